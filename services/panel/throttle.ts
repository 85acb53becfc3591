import { PanelError } from '../../domain/panel/errors';
import type { Db } from '../../platform/db';

// Failed sign-ins are counted per username and per client IP in PostgreSQL, so every API process
// sees the same counts: a scope that reaches its limit within the window is locked for a while and
// answered 429 with Retry-After, whether the next password is right or not.

export interface ThrottleSettings {
  loginFailures: number;
  ipFailures: number;
  windowSeconds: number;
  lockSeconds: number;
}

export const THROTTLE_DEFAULTS: ThrottleSettings = { loginFailures: 5, ipFailures: 50, windowSeconds: 900, lockSeconds: 900 };

type Scope = 'login' | 'ip';

/** 429 when the username or the IP is locked. */
export async function checkThrottle(db: Db, username: string, ip: string): Promise<void> {
  const rows = await db('panel_signin_failures')
    .where((w) => w.where({ scope: 'login', key: username }).orWhere({ scope: 'ip', key: ip }))
    .andWhere('locked_until', '>', db.fn.now())
    .select('scope', db.raw('ceil(extract(epoch FROM locked_until - now()))::int AS retry_after'));
  if (rows.length) {
    const r = rows.sort((a, b) => b.retry_after - a.retry_after)[0];
    throw new PanelError('too_many_attempts', { scope: r.scope === 'ip' ? 'address' : 'login', retry_after: r.retry_after }, { 'retry-after': String(r.retry_after) });
  }
}

/** Counts one failure for the username and the IP (one atomic upsert each). */
export async function recordFailure(db: Db, s: ThrottleSettings, username: string, ip: string): Promise<void> {
  const count = (scope: Scope, key: string, limit: number) =>
    db.raw(
      `INSERT INTO panel_signin_failures AS f (scope, key, window_start, failures) VALUES (?, ?, now(), 1)
       ON CONFLICT (scope, key) DO UPDATE SET
         failures = CASE WHEN f.window_start < now() - make_interval(secs => ?) THEN 1 ELSE f.failures + 1 END,
         window_start = CASE WHEN f.window_start < now() - make_interval(secs => ?) THEN now() ELSE f.window_start END,
         locked_until = CASE WHEN (CASE WHEN f.window_start < now() - make_interval(secs => ?) THEN 1 ELSE f.failures + 1 END) >= ?
                             THEN now() + make_interval(secs => ?) ELSE f.locked_until END`,
      [scope, key, s.windowSeconds, s.windowSeconds, s.windowSeconds, limit, s.lockSeconds],
    );
  await Promise.all([count('login', username, s.loginFailures), count('ip', ip, s.ipFailures)]);
}

/** A successful sign-in clears the username's count (not the IP's). */
export async function clearFailures(db: Db, username: string): Promise<void> {
  await db('panel_signin_failures').where({ scope: 'login', key: username }).delete();
}
