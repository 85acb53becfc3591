import type { Db } from '../../platform/db';
import type { Logger } from '../../platform/logger';

export interface RequestLogEntry {
  id: string;
  key_id: string | null;
  account_id: string | null;
  method: string;
  path: string;
  model: string | null;
  status: number;
  latency_ms: number;
  cost: string | null;
  ip: string | null;
  error_code: string | null;
  /** ISO 8601 with microseconds: requests of one client in a row keep their order */
  created_at: string;
}

/** Now, to the microsecond, as ISO 8601. */
export function preciseNow(): string {
  const us = Math.round((performance.timeOrigin + performance.now()) * 1000);
  const iso = new Date(Math.floor(us / 1000)).toISOString();
  return `${iso.slice(0, -1)}${String(us % 1000).padStart(3, '0')}Z`;
}

const MAX_BATCH = 1000;
/** Rows deleted per statement when pruning: short locks, however far behind the prune is. */
const PRUNE_BATCH = 5000;
const PRUNE_EVERY_MS = 60 * 60_000;

/**
 * The request log of the keyed variant. Entries are recorded when a response has gone out and
 * written in batches (one multi-row INSERT every `flushMs`, or at once when a batch is full), so
 * no request waits for it. A failed write is logged and dropped: the log must never hold up or
 * break the gateway.
 */
export class RequestLog {
  private buffer: RequestLogEntry[] = [];
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> = Promise.resolve();
  private pruner: NodeJS.Timeout | null = null;

  constructor(
    private readonly db: Db,
    private readonly logger: Logger,
    private readonly flushMs: number,
    private readonly retentionDays: number,
  ) {}

  /** Prunes now and then hourly; every API process does it, and the deletes do not conflict. */
  startPruning(): void {
    const run = () =>
      void this.prune().catch((err) => this.logger.warn({ err }, 'could not prune the request log'));
    run();
    this.pruner = setInterval(run, PRUNE_EVERY_MS).unref();
  }

  /** Stops pruning and writes what is buffered. */
  close(): Promise<void> {
    if (this.pruner) clearInterval(this.pruner);
    this.pruner = null;
    return this.flush();
  }

  /** Deletes entries older than the retention, in batches; returns how many went. */
  async prune(): Promise<number> {
    let deleted = 0;
    for (;;) {
      const n: number = await this.db('request_log')
        .whereIn(
          'id',
          this.db('request_log').select('id').where('created_at', '<', this.db.raw("now() - ? * interval '1 day'", [this.retentionDays])).limit(PRUNE_BATCH),
        )
        .delete();
      deleted += n;
      if (n < PRUNE_BATCH) break;
    }
    if (deleted > 0) this.logger.info({ deleted, retention_days: this.retentionDays }, 'request log pruned');
    return deleted;
  }

  record(e: RequestLogEntry): void {
    this.buffer.push(e);
    if (this.buffer.length >= MAX_BATCH) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), this.flushMs);
  }

  /** Writes what is buffered; resolves when every write started so far has finished. */
  flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const batch = this.buffer;
    this.buffer = [];
    if (batch.length > 0) {
      this.writing = this.writing.then(() =>
        this.db('request_log')
          .insert(batch)
          .onConflict('id')
          .ignore()
          .then(
            () => undefined,
            (err) => this.logger.error({ err, entries: batch.length }, 'could not write the request log'),
          ),
      );
    }
    return this.writing;
  }
}
