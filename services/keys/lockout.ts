import { LRUCache } from 'lru-cache';
import type { Db } from '../../platform/db';
import type { Logger } from '../../platform/logger';
import type { CacheInvalidation } from '../../platform/cache-invalidation';

export interface LockoutSettings {
  /** wrong-key attempts from one IP within the window that lock it */
  limit: number;
  windowMs: number;
  /** how long a locked IP gets 429 */
  lockoutMs: number;
}

/**
 * Locks out client IPs that send too many wrong keys (spec 3 A 5.3), shared by every API process.
 *
 * The check on the request path is a lookup in memory. Every wrong key is counted at once in
 * this process and, after the answer, in the shared `auth_failures` row (one atomic upsert).
 * When the shared count reaches the limit, the statement sets `locked_until` and sends a NOTIFY;
 * every process then reloads the active lockouts. So the count is global across processes, and
 * a process also locks by itself when its own attempts alone reach the limit.
 */
export class IpLockout {
  private readonly counts: LRUCache<string, { failures: number; windowStart: number }>;
  private readonly locks = new Map<string, number>(); // ip → locked until (this process's clock)
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly db: Db,
    invalidation: CacheInvalidation,
    private readonly settings: LockoutSettings,
    private readonly logger: Logger,
  ) {
    this.counts = new LRUCache({ max: 100_000, ttl: settings.windowMs });
    invalidation.subscribe((table) => {
      if (table === 'auth_failures' || table === '*') void this.reload();
    });
  }

  async start(): Promise<void> {
    await this.reload();
    // The NOTIFY is the fast path; this also catches lockouts missed while the listener was down.
    this.timer = setInterval(() => void this.housekeeping(), 30_000);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /** Milliseconds until this IP may try again; 0 when it is not locked. */
  lockedFor(ip: string, now = Date.now()): number {
    const until = this.locks.get(ip);
    if (until === undefined) return 0;
    if (until <= now) {
      this.locks.delete(ip);
      return 0;
    }
    return until - now;
  }

  /** Counts a wrong key in this process, synchronously; see {@link persistFailure}. */
  recordFailure(ip: string, now = Date.now()): void {
    let c = this.counts.get(ip);
    if (!c || c.windowStart + this.settings.windowMs <= now) c = { failures: 0, windowStart: now };
    c.failures++;
    this.counts.set(ip, c);
    if (c.failures >= this.settings.limit) this.lock(ip, now + this.settings.lockoutMs);
  }

  /** Counts a wrong key in the shared row. Called after the answer; never throws. */
  async persistFailure(ip: string): Promise<void> {
    try {
      const res = await this.db.raw(
        `WITH f AS (
           INSERT INTO auth_failures AS f (ip, failures, window_started_at, locked_until)
           VALUES (:ip, 1, now(), CASE WHEN :limit <= 1 THEN now() + :lockout_ms * interval '1 millisecond' END)
           ON CONFLICT (ip) DO UPDATE SET
             failures = CASE WHEN f.window_started_at > now() - :window_ms * interval '1 millisecond' THEN f.failures + 1 ELSE 1 END,
             window_started_at = CASE WHEN f.window_started_at > now() - :window_ms * interval '1 millisecond' THEN f.window_started_at ELSE now() END,
             locked_until = CASE
               WHEN (CASE WHEN f.window_started_at > now() - :window_ms * interval '1 millisecond' THEN f.failures + 1 ELSE 1 END) >= :limit
               THEN now() + :lockout_ms * interval '1 millisecond'
               ELSE f.locked_until END
           RETURNING locked_until
         )
         SELECT GREATEST(0, ceil(extract(epoch FROM locked_until - now()) * 1000))::bigint AS locked_ms,
           CASE WHEN locked_until = now() + :lockout_ms * interval '1 millisecond'
             THEN pg_notify('cache_invalidation', 'auth_failures:lock') END AS notified
         FROM f`,
        { ip, limit: this.settings.limit, window_ms: this.settings.windowMs, lockout_ms: this.settings.lockoutMs },
      );
      const ms = res.rows[0]?.locked_ms ?? 0;
      if (ms > 0) this.lock(ip, Date.now() + ms);
    } catch (err) {
      this.logger.error({ err, ip }, 'could not record a wrong-key attempt');
    }
  }

  private lock(ip: string, until: number): void {
    if ((this.locks.get(ip) ?? 0) < until) this.locks.set(ip, until);
  }

  /** Takes over every active lockout from the shared table. */
  private async reload(): Promise<void> {
    try {
      const res = await this.db.raw(
        `SELECT ip, ceil(extract(epoch FROM locked_until - now()) * 1000)::bigint AS ms FROM auth_failures WHERE locked_until > now()`,
      );
      const now = Date.now();
      for (const r of res.rows as Array<{ ip: string; ms: number }>) this.lock(r.ip, now + r.ms);
    } catch (err) {
      this.logger.warn({ err }, 'could not load IP lockouts');
    }
  }

  private async housekeeping(): Promise<void> {
    const now = Date.now();
    for (const [ip, until] of this.locks) if (until <= now) this.locks.delete(ip);
    await this.reload();
    try {
      await this.db('auth_failures')
        .where('window_started_at', '<', this.db.raw(`now() - ? * interval '1 millisecond'`, [this.settings.windowMs]))
        .where((q) => q.whereNull('locked_until').orWhere('locked_until', '<', this.db.fn.now()))
        .delete();
    } catch (err) {
      this.logger.warn({ err }, 'could not prune wrong-key attempts');
    }
  }
}
