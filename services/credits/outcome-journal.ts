import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Counter, Gauge } from 'prom-client';
import type { Db } from '../../platform/db';
import type { Logger } from '../../platform/logger';
import { registry } from '../../platform/metrics';
import { recordOutcomes, type OutcomeWrite } from './outbox';

// The outcome journal (issue 33 item 2): outcomes an API process could not write to PostgreSQL
// (down or unreachable) wait here in arrival order, appended and fsynced to a file of this
// process under DATA_DIR/outcome-journal, and are replayed with backoff, forever, until the
// database takes them. The reservation id is the key: an outcome recorded already is not recorded
// again (services/credits/outbox.ts), so a replay repeated after a crash still charges once. A
// process that starts takes over the files of processes that are gone (kill -9) and replays them.

export interface JournalSettings {
  /** the journal's folder; null: the outcomes wait in memory only (tests and tools) */
  dir: string | null;
  /** past either bound the process refuses new requests (503) instead of risking outcomes */
  maxEntries: number;
  maxBytes: number;
}

export const JOURNAL_DEFAULTS: Omit<JournalSettings, 'dir'> = { maxEntries: 100_000, maxBytes: 256 * 1024 * 1024 };

/** Outcomes per replay statement; retry delays from 100 ms doubling up to 5 s. */
const REPLAY_BATCH = 500;
const MAX_BACKOFF_MS = 5_000;

interface Entry {
  at: number;
  write: OutcomeWrite;
  bytes: number;
  /** resolves the append's promise once PostgreSQL took the outcome */
  written?: () => void;
}

const open = new Set<OutcomeJournal>();
const sum = (f: (j: OutcomeJournal) => number) => [...open].reduce((s, j) => s + f(j), 0);
new Gauge({ name: 'credits_outcome_journal_entries', help: 'Outcomes waiting in the outcome journal for PostgreSQL', registers: [registry], collect() { this.set(sum((j) => j.depth)); } });
new Gauge({ name: 'credits_outcome_journal_bytes', help: 'Bytes of the outcomes waiting in the outcome journal', registers: [registry], collect() { this.set(sum((j) => j.size)); } });
new Gauge({ name: 'credits_outcome_journal_oldest_seconds', help: 'Age of the oldest outcome waiting in the outcome journal', registers: [registry], collect() { this.set(Math.max(0, ...[...open].map((j) => j.oldestSeconds))); } });
const appended = new Counter({ name: 'credits_outcome_journal_appended_total', help: 'Outcomes written to the outcome journal (PostgreSQL could not take them)', registers: [registry] });
const replayed = new Counter({ name: 'credits_outcome_journal_replayed_total', help: 'Outcomes of the journal that PostgreSQL took on replay', registers: [registry] });
const refused = new Counter({ name: 'credits_outcome_journal_full_refusals_total', help: 'Requests refused (503) because the outcome journal was at its bound', registers: [registry] });

/** Alive, as far as this host can tell (a file of a live process is not taken over). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export class OutcomeJournal {
  private entries: Entry[] = [];
  private bytes = 0;
  private file: string | null = null;
  private fd: number | null = null;
  private timer: NodeJS.Timeout | null = null;
  private replaying = false;
  private failures = 0;
  private stopped = false;

  constructor(
    private readonly db: Db,
    private readonly logger: Logger,
    private readonly settings: JournalSettings,
  ) {
    open.add(this);
  }

  get depth(): number {
    return this.entries.length;
  }

  get size(): number {
    return this.bytes;
  }

  get oldestSeconds(): number {
    return this.entries.length ? (Date.now() - this.entries[0].at) / 1000 : 0;
  }

  /** False at its bound (counted as a refusal): the process takes no new request until the journal shrinks. */
  admits(): boolean {
    if (this.entries.length < this.settings.maxEntries && this.bytes < this.settings.maxBytes) return true;
    refused.inc();
    return false;
  }

  /**
   * Opens this process's file; first takes over the files of processes that are gone (renamed to
   * a name of this process, so two starting processes never take the same one): their outcomes
   * are written into this process's file and replayed first.
   */
  open(): void {
    const dir = this.settings.dir;
    if (!dir) return;
    fs.mkdirSync(dir, { recursive: true });
    const taken: string[] = [];
    const ours = new Set([...open].map((j) => j.file && path.basename(j.file))); // journals open in this process
    for (const name of fs.readdirSync(dir).filter((n) => n.endsWith('.jsonl')).sort()) {
      const pid = Number(name.split('-')[0]);
      if (ours.has(name) || (pid !== process.pid && alive(pid))) continue;
      const mine = path.join(dir, `${process.pid}-taken-${name}`);
      try {
        fs.renameSync(path.join(dir, name), mine);
      } catch {
        continue; // another process took it first
      }
      taken.push(mine);
      this.entries.push(...this.read(mine));
    }
    this.file = path.join(dir, `${process.pid}-${randomUUID()}.jsonl`);
    this.fd = fs.openSync(this.file, 'a');
    if (this.entries.length) {
      fs.writeSync(this.fd, this.entries.map((e) => this.line(e)).join(''));
      fs.fdatasyncSync(this.fd);
    }
    this.syncDir();
    for (const f of taken) fs.unlinkSync(f);
    this.bytes = this.entries.reduce((s, e) => s + e.bytes, 0);
    if (this.entries.length) {
      this.logger.warn({ outcomes: this.entries.length, files: taken.length }, 'outcome journal: outcomes of processes that are gone are replayed');
      this.schedule(0);
    }
  }

  /** The lines of a taken-over file; a torn last line (its process died writing it) is skipped. */
  private read(file: string): Entry[] {
    const out: Entry[] = [];
    for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
      if (!line) continue;
      try {
        const { at, write } = JSON.parse(line) as { at: number; write: OutcomeWrite };
        out.push({ at, write, bytes: Buffer.byteLength(line) + 1 });
      } catch {
        this.logger.error({ file }, 'outcome journal: an unreadable line skipped (its process died while writing it)');
      }
    }
    return out;
  }

  private line(e: Pick<Entry, 'at' | 'write'>): string {
    return JSON.stringify({ at: e.at, write: e.write }) + '\n';
  }

  /**
   * Appends an outcome and fsyncs it before returning (synchronous: the caller's answer has not
   * ended yet), then replays in the background; the promise resolves once PostgreSQL took it.
   * Kept in memory too if the disk refuses it.
   */
  append(write: OutcomeWrite): Promise<void> {
    const at = Date.now();
    const line = this.line({ at, write });
    if (this.fd !== null) {
      try {
        fs.writeSync(this.fd, line);
        fs.fdatasyncSync(this.fd);
      } catch (err) {
        this.logger.error({ err, reservation: write.reservationId }, 'outcome journal: the disk refused an outcome; it waits in memory only');
      }
    }
    if (this.entries.length === 0) this.logger.warn({ reservation: write.reservationId }, 'outcome journal: PostgreSQL did not take an outcome; outcomes wait in the journal until it does');
    const written = new Promise<void>((resolve) => this.entries.push({ at, write, bytes: Buffer.byteLength(line), written: resolve }));
    this.bytes += Buffer.byteLength(line);
    appended.inc();
    this.schedule(0);
    return written;
  }

  private schedule(ms: number): void {
    if (this.stopped || this.timer || this.replaying) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.replay();
    }, ms);
    this.timer.unref();
  }

  /**
   * Writes the waiting outcomes in order, a batch per statement. A batch that fails is tried one
   * outcome at a time, so one that cannot be written (it is retried) does not hold up the others.
   */
  private async replay(): Promise<void> {
    this.replaying = true;
    let done = 0;
    try {
      while (this.entries.length > 0 && !this.stopped) {
        const batch = this.entries.slice(0, REPLAY_BATCH);
        let taken: Set<Entry>;
        try {
          await recordOutcomes(this.db, batch.map((e) => e.write));
          taken = new Set(batch);
        } catch (err) {
          if (batch.length === 1) throw err;
          taken = new Set();
          for (const e of batch) if (await recordOutcomes(this.db, [e.write]).then(() => true, () => false)) taken.add(e);
          if (taken.size === 0) throw err;
        }
        this.remove(taken);
        done += taken.size;
        if (taken.size < batch.length) throw new Error(`${batch.length - taken.size} outcomes of the journal could not be written`);
      }
      if (done) this.logger.info({ outcomes: done }, 'outcome journal: replayed; nothing waits');
      this.failures = 0;
    } catch (err) {
      this.failures++;
      if (this.failures === 1 || this.failures % 12 === 0) this.logger.warn({ err, waiting: this.entries.length, oldestSeconds: Math.round(this.oldestSeconds) }, 'outcome journal: PostgreSQL does not take the outcomes yet; retrying');
    } finally {
      this.replaying = false;
    }
    if (this.entries.length) this.schedule(this.failures ? Math.min(100 * 2 ** (this.failures - 1), MAX_BACKOFF_MS) : 0);
  }

  /** Drops written outcomes; the file is cut to what still waits (in the same tick: no append in between). */
  private remove(taken: Set<Entry>): void {
    this.entries = this.entries.filter((e) => !taken.has(e));
    for (const e of taken) e.written?.();
    this.bytes = this.entries.reduce((s, e) => s + e.bytes, 0);
    replayed.inc(taken.size);
    if (this.fd === null || !this.file) return;
    if (this.entries.length === 0) {
      fs.ftruncateSync(this.fd);
      fs.fdatasyncSync(this.fd);
      return;
    }
    const tmp = `${this.file}.tmp`;
    fs.writeFileSync(tmp, this.entries.map((e) => this.line(e)).join(''));
    const t = fs.openSync(tmp, 'r+');
    fs.fdatasyncSync(t);
    fs.closeSync(t);
    fs.renameSync(tmp, this.file);
    fs.closeSync(this.fd);
    this.fd = fs.openSync(this.file, 'a');
    this.syncDir();
  }

  private syncDir(): void {
    const d = fs.openSync(this.settings.dir!, 'r');
    fs.fsyncSync(d);
    fs.closeSync(d);
  }

  /** Stops replaying; what still waits stays in the file for the next process. */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.entries.length) this.logger.warn({ waiting: this.entries.length }, 'outcome journal: stopping with outcomes waiting; the next process started here replays them');
    if (this.fd !== null) fs.closeSync(this.fd);
    if (this.file && this.entries.length === 0) fs.rmSync(this.file, { force: true });
    this.fd = null;
    open.delete(this);
  }
}
