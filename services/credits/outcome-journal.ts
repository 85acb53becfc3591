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
//
// The spool, in the same folder: an outcome that waits in memory for its batch (group commit's
// interval, or a batch in flight) is first written, without fsync, to a segment file of this
// process (`<pid>-<uuid>.spool`), and dropped from it once PostgreSQL or the journal has it. A kill
// -9 of the process leaves what write(2) took in the kernel, so the next process started on the
// folder takes the segment over like a journal file (replaying an outcome recorded already changes
// nothing). A power loss of the host within the interval is not covered (it would need an fsync
// per request): those requests are released at 0, an error towards the client.

export interface JournalSettings {
  /** the journal's folder; null: the outcomes wait in memory only (tests and tools) */
  dir: string | null;
  /** past either bound the process refuses new requests (503) instead of risking outcomes */
  maxEntries: number;
  maxBytes: number;
  /**
   * Outcome batches leave the process at most this often (OUTCOME_BATCH_INTERVAL_MS; 0: as soon as
   * no batch is in flight): at a moderate rate a batch then holds the outcomes of this many
   * milliseconds, not one or two, so the outcome write is a small share of the statements and
   * commits per request. Only with a folder: the outcomes that wait are spooled there.
   */
  batchIntervalMs: number;
}

export const JOURNAL_DEFAULTS: Omit<JournalSettings, 'dir'> = { maxEntries: 100_000, maxBytes: 256 * 1024 * 1024, batchIntervalMs: 50 };

/** Outcomes per replay statement; retry delays from 100 ms doubling up to 5 s. */
const REPLAY_BATCH = 500;
const MAX_BACKOFF_MS = 5_000;
/** A spool segment past this size is closed and a new one opened; the old one goes once its outcomes are written. */
const SPOOL_SEGMENT_BYTES = 4 * 1024 * 1024;

/** A spool file and how many of its outcomes still wait. */
interface Segment {
  file: string;
  /** null once closed */
  fd: number | null;
  bytes: number;
  waiting: number;
}

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
new Gauge({ name: 'credits_outcome_spooled', help: 'Outcomes waiting for their batch (OUTCOME_BATCH_INTERVAL_MS), spooled to disk', registers: [registry], collect() { this.set(sum((j) => j.spooled)); } });
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
  private segment: Segment | null = null;
  /** outcomes in the spool now, over its segments */
  private spooledNow = 0;
  private spoolFailed = false;
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

  get spooled(): number {
    return this.spooledNow;
  }

  get size(): number {
    return this.bytes;
  }

  get oldestSeconds(): number {
    return this.entries.length ? (Date.now() - this.entries[0].at) / 1000 : 0;
  }

  /** How long an outcome may wait for its batch: 0 unless the waiting outcomes are spooled to a folder. */
  get batchIntervalMs(): number {
    return this.settings.dir === null ? 0 : this.settings.batchIntervalMs;
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
    const ours = new Set([...open].flatMap((j) => [j.file, j.segment?.file]).map((f) => f && path.basename(f))); // journals open in this process
    for (const name of fs.readdirSync(dir).filter((n) => n.endsWith('.jsonl') || n.endsWith('.spool')).sort()) {
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

  /**
   * Writes an outcome that waits in memory for its batch to this process's spool (no fsync; see the
   * top of this file). Call the returned function once PostgreSQL or the journal has the outcome.
   * Without a folder, or if the disk refuses it (logged once), the outcome waits in memory only.
   */
  spool(write: OutcomeWrite): () => void {
    const seg = this.settings.dir && !this.stopped ? this.spoolSegment() : null;
    if (!seg) return () => {};
    try {
      const line = this.line({ at: Date.now(), write });
      fs.writeSync(seg.fd!, line);
      seg.bytes += Buffer.byteLength(line);
    } catch (err) {
      if (!this.spoolFailed) this.logger.error({ err }, 'outcome spool: the disk refused an outcome; outcomes waiting for their batch are in memory only');
      this.spoolFailed = true;
      return () => {};
    }
    seg.waiting++;
    this.spooledNow++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      seg.waiting--;
      this.spooledNow--;
      this.dropSpooled(seg);
    };
  }

  private spoolSegment(): Segment | null {
    const cur = this.segment;
    if (cur && cur.bytes < SPOOL_SEGMENT_BYTES) return cur;
    try {
      const file = path.join(this.settings.dir!, `${process.pid}-${randomUUID()}.spool`);
      this.segment = { file, fd: fs.openSync(file, 'a'), bytes: 0, waiting: 0 };
    } catch (err) {
      if (!this.spoolFailed) this.logger.error({ err }, 'outcome spool: no segment file; outcomes waiting for their batch are in memory only');
      this.spoolFailed = true;
      return cur;
    }
    if (cur) this.dropSpooled(cur);
    return this.segment;
  }

  /** A segment whose outcomes are all written: emptied when it is the current one, else removed. */
  private dropSpooled(seg: Segment): void {
    if (seg.waiting > 0) return;
    try {
      if (seg === this.segment) {
        if (seg.bytes > 0) fs.ftruncateSync(seg.fd!, 0);
        seg.bytes = 0;
      } else {
        if (seg.fd !== null) fs.closeSync(seg.fd);
        seg.fd = null;
        fs.rmSync(seg.file, { force: true });
      }
    } catch (err) {
      this.logger.warn({ err, file: seg.file }, 'outcome spool: could not empty a segment (its outcomes are written; a replay changes nothing)');
    }
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
    const seg = this.segment;
    this.segment = null;
    if (seg?.fd != null) {
      fs.closeSync(seg.fd);
      seg.fd = null;
      // outcomes still spooled (the process stops without flushing them) stay for the next process
      if (seg.waiting === 0) fs.rmSync(seg.file, { force: true });
    }
    open.delete(this);
  }
}
