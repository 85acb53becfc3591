import { PanelError } from '../../../domain/panel/errors';
import type { Db } from '../../../platform/db';

// Failed sign-ins are counted per username and per client IP in PostgreSQL, so every API process
// sees the same counts: a scope that reaches its limit within the window is locked for a while and
// answered 429 with Retry-After, whether the next password is right or not.
//
// An attempt is counted when it starts, before its password is checked, and the count is given
// back when it turns out not to be a failure. So a burst of parallel attempts never gets more
// password checks than the limit (counting only after the check let every attempt of a burst
// through before the first failure was recorded).

export interface ThrottleSettings {
  loginFailures: number;
  ipFailures: number;
  windowSeconds: number;
  lockSeconds: number;
}

export const THROTTLE_DEFAULTS: ThrottleSettings = { loginFailures: 5, ipFailures: 50, windowSeconds: 900, lockSeconds: 900 };

type Scope = 'login' | 'ip';

/**
 * Counts one attempt for the username and the IP (one atomic upsert each), then 429 when either is
 * locked or this attempt goes over its limit (which locks it); a refused attempt is not counted.
 * A lock that has run out, or a window that has passed, starts a new window.
 */
export async function beginAttempt(db: Db, s: ThrottleSettings, username: string, ip: string): Promise<void> {
  const count = async (scope: Scope, key: string, limit: number) => {
    const { rows } = await db.raw(
      `INSERT INTO panel_signin_failures AS f (scope, key, window_start, failures, locked_until)
       VALUES (:scope, :key, now(), 1, CASE WHEN 1 > :limit THEN now() + make_interval(secs => :lock) END)
       ON CONFLICT (scope, key) DO UPDATE SET
         failures = CASE WHEN f.locked_until > now() THEN f.failures + 1
                         WHEN f.window_start < now() - make_interval(secs => :window) OR f.locked_until IS NOT NULL THEN 1
                         ELSE f.failures + 1 END,
         window_start = CASE WHEN f.locked_until > now() THEN f.window_start
                             WHEN f.window_start < now() - make_interval(secs => :window) OR f.locked_until IS NOT NULL THEN now()
                             ELSE f.window_start END,
         locked_until = CASE WHEN f.locked_until > now() THEN f.locked_until
                             WHEN f.window_start < now() - make_interval(secs => :window) OR f.locked_until IS NOT NULL THEN CASE WHEN 1 > :limit THEN now() + make_interval(secs => :lock) END
                             WHEN f.failures + 1 > :limit THEN now() + make_interval(secs => :lock)
                             END
       RETURNING locked_until > now() AS locked, ceil(extract(epoch FROM locked_until - now()))::int AS retry_after`,
      { scope, key, limit, window: s.windowSeconds, lock: s.lockSeconds },
    );
    return { scope, locked: rows[0].locked === true, retryAfter: rows[0].retry_after as number };
  };
  const counted = await Promise.all([count('login', username, s.loginFailures), count('ip', ip, s.ipFailures)]);
  const locked = counted.filter((c) => c.locked).sort((a, b) => b.retryAfter - a.retryAfter);
  if (locked.length) {
    await giveBack(db, username, ip);
    const r = locked[0];
    throw new PanelError('too_many_attempts', { scope: r.scope === 'ip' ? 'address' : 'login', retry_after: r.retryAfter }, { 'retry-after': String(r.retryAfter) });
  }
}

/** Gives back the count of an attempt that was not a failure (the right password). */
async function giveBack(db: Db, username: string, ip: string): Promise<void> {
  await db('panel_signin_failures')
    .where((w) => w.where({ scope: 'login', key: username }).orWhere({ scope: 'ip', key: ip }))
    .update({ failures: db.raw('greatest(failures - 1, 0)') });
}

/**
 * The end of an attempt begun with beginAttempt: a failure stays counted; a successful sign-in
 * clears the username's count (not the IP's, which only gets its attempt back); an attempt with the
 * right password that ended otherwise (second factor missing, suspended) gets its attempt back.
 */
export async function endAttempt(db: Db, username: string, ip: string, outcome: 'failed' | 'signed_in' | 'not_failed'): Promise<void> {
  if (outcome === 'failed') return;
  await giveBack(db, username, ip);
  if (outcome === 'signed_in') await db('panel_signin_failures').where({ scope: 'login', key: username }).delete();
}

/** Deletes the counts whose window has passed and whose lock has run out (they would start afresh anyway). */
export async function pruneAttempts(db: Db, s: ThrottleSettings): Promise<number> {
  return db('panel_signin_failures')
    .where('window_start', '<', db.raw('now() - make_interval(secs => ?)', [s.windowSeconds]))
    .andWhere((w) => w.whereNull('locked_until').orWhere('locked_until', '<', db.fn.now()))
    .delete();
}
