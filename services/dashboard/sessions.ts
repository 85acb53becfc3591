import { createHash, randomBytes } from 'node:crypto';
import { verifySync } from 'otplib';
import type { Db } from '../../platform/db';
import { open } from '../../platform/secret-box';
import { verifyPassword } from '../panel/logins/passwords';

// Sign-in and server-side sessions of the gateway dashboard. The cookie carries a random token
// whose SHA-256 is the session row's key; every request reads the row (no cache), so a sign-out
// or a deleted user ends the session on every API process at once. Failed sign-ins are counted
// per email and per client IP in PostgreSQL; a scope over its limit is refused until its window
// has passed, whether the next password is right or not.

export interface DashboardAuthSettings {
  sealingKey: Buffer;
  sessionMs: number;
  emailFailures: number;
  ipFailures: number;
  windowSeconds: number;
}

export const DASHBOARD_AUTH_DEFAULTS = { sessionMs: 12 * 3600_000, emailFailures: 5, ipFailures: 50, windowSeconds: 900 };

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

export interface DashboardSession {
  sessionId: string;
  userId: string;
  accountId: string;
  email: string;
  role: 'owner' | 'member';
  csrfToken: string;
}

export async function sessionOf(db: Db, token: string): Promise<DashboardSession | null> {
  const row = await db('dashboard_sessions as s')
    .join('dashboard_users as u', 'u.id', 's.user_id')
    .where('s.token_hash', sha256(token))
    .where('s.expires_at', '>', db.fn.now())
    .first('s.id as session_id', 's.csrf_token', 'u.id as user_id', 'u.account_id', 'u.email', 'u.role');
  return row ? { sessionId: row.session_id, userId: row.user_id, accountId: row.account_id, email: row.email, role: row.role, csrfToken: row.csrf_token } : null;
}

export type SignInResult =
  | { ok: true; token: string; expiresAt: Date }
  | { ok: false; reason: 'invalid_credentials' | 'code_required' | 'throttled'; retryAfter?: number };

/** Seconds until the scope's window passes when it is over its limit, else null. */
async function throttled(db: Db, s: DashboardAuthSettings, email: string, ip: string): Promise<number | null> {
  const { rows } = await db.raw(
    `SELECT ceil(extract(epoch FROM window_start + make_interval(secs => :window) - now()))::int AS retry_after
       FROM dashboard_signin_failures
      WHERE window_start > now() - make_interval(secs => :window)
        AND ((scope = 'email' AND key = :email AND failures >= :emailLimit) OR (scope = 'ip' AND key = :ip AND failures >= :ipLimit))
      ORDER BY 1 DESC LIMIT 1`,
    { window: s.windowSeconds, email, ip, emailLimit: s.emailFailures, ipLimit: s.ipFailures },
  );
  return rows.length ? Math.max(1, rows[0].retry_after) : null;
}

/** One failure for the email and the IP; a window that has passed starts again at 1. */
async function countFailure(db: Db, s: DashboardAuthSettings, email: string, ip: string): Promise<void> {
  for (const [scope, key] of [['email', email], ['ip', ip]]) {
    await db.raw(
      `INSERT INTO dashboard_signin_failures AS f (scope, key, window_start, failures) VALUES (?, ?, now(), 1)
       ON CONFLICT (scope, key) DO UPDATE SET
         failures = CASE WHEN f.window_start < now() - make_interval(secs => ?) THEN 1 ELSE f.failures + 1 END,
         window_start = CASE WHEN f.window_start < now() - make_interval(secs => ?) THEN now() ELSE f.window_start END`,
      [scope, key, s.windowSeconds, s.windowSeconds],
    );
  }
}

/** The time step of a valid TOTP code not used before (±1 step of drift), else null. */
export function totpStep(secret: string, code: string, lastStep: number | null): number | null {
  if (!/^\d{6}$/.test(code)) return null;
  const r = verifySync({ secret, token: code, epochTolerance: 30, ...(lastStep !== null ? { afterTimeStep: lastStep } : {}) });
  return r.valid && 'timeStep' in r ? r.timeStep : null;
}

/** Checks email, password and (when the user has one) TOTP code, and opens a session. */
export async function signIn(db: Db, s: DashboardAuthSettings, input: { email: string; password: string; code?: string; ip: string }): Promise<SignInResult> {
  const email = input.email.trim().toLowerCase();
  const retryAfter = await throttled(db, s, email, input.ip);
  if (retryAfter !== null) return { ok: false, reason: 'throttled', retryAfter };
  const user = await db('dashboard_users').where({ email }).first();
  if (!(await verifyPassword(user?.password_hash ?? null, input.password))) {
    await countFailure(db, s, email, input.ip);
    return { ok: false, reason: 'invalid_credentials' };
  }
  if (user.totp_secret_sealed) {
    const code = input.code?.trim() ?? '';
    if (!code) return { ok: false, reason: 'code_required' };
    const step = totpStep(open(s.sealingKey, user.totp_secret_sealed), code, user.totp_last_step === null ? null : Number(user.totp_last_step));
    // The step is taken with a conditional update, so one code opens one session even when sent twice at once.
    const taken = step !== null && (await db('dashboard_users').where({ id: user.id }).where((w) => w.whereNull('totp_last_step').orWhere('totp_last_step', '<', step)).update({ totp_last_step: step }));
    if (!taken) {
      await countFailure(db, s, email, input.ip);
      return { ok: false, reason: 'invalid_credentials' };
    }
  }
  const token = randomBytes(32).toString('base64url');
  const expiresAt = new Date(Date.now() + s.sessionMs);
  await db('dashboard_sessions').insert({ token_hash: sha256(token), user_id: user.id, csrf_token: randomBytes(24).toString('base64url'), expires_at: expiresAt });
  await db('dashboard_users').where({ id: user.id }).update({ last_sign_in_at: db.fn.now() });
  // Expired sessions are of no use: each sign-in clears its user's.
  await db('dashboard_sessions').where({ user_id: user.id }).where('expires_at', '<=', db.fn.now()).delete();
  await db('dashboard_signin_failures').where({ scope: 'email', key: email }).delete();
  return { ok: true, token, expiresAt };
}

export async function signOut(db: Db, sessionId: string): Promise<void> {
  await db('dashboard_sessions').where({ id: sessionId }).delete();
}
