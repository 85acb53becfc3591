import { GatewayError } from '../../domain/shared/errors';
import type { Db } from '../../platform/db';

/**
 * Requests per minute per key (spec 3 A 8.2), shared by every API process behind one database:
 * one row per key holds the count of the current UTC minute of the database clock, and one
 * atomic upsert both checks and counts. A refused request is not counted.
 *
 * A statement that started in the previous minute but commits after the row moved on is
 * counted in the newer minute (GREATEST), never resetting it.
 */
export class KeyRateLimiter {
  constructor(private readonly db: Db) {}

  /** Counts one request of this key, or throws 429 rate_limit_exceeded with Retry-After. */
  async take(keyId: string, rpm: number): Promise<void> {
    const res = await this.db.raw(
      `WITH w AS (
         INSERT INTO key_rate_windows AS w (key_id, window_start, count) VALUES (:key_id, date_trunc('minute', now()), 1)
         ON CONFLICT (key_id) DO UPDATE SET
           count = CASE WHEN EXCLUDED.window_start > w.window_start THEN 1 ELSE w.count + 1 END,
           window_start = GREATEST(w.window_start, EXCLUDED.window_start)
         WHERE EXCLUDED.window_start > w.window_start OR w.count < :rpm
         RETURNING count
       )
       SELECT (SELECT count FROM w) AS count,
         GREATEST(1, ceil(extract(epoch FROM date_trunc('minute', now()) + interval '1 minute' - now())))::int AS retry_after`,
      { key_id: keyId, rpm },
    );
    const row = res.rows[0];
    if (row.count === null) {
      const retryAfter = String(row.retry_after);
      throw new GatewayError('rate_limit_exceeded', { retry_after: retryAfter }, { 'retry-after': retryAfter });
    }
  }
}
