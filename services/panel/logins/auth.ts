import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { PanelError } from '../../../domain/panel/errors';
import type { OrgType, Role } from '../../../domain/panel/tree';
import type { Db } from '../../../platform/db';
import type { Actor } from '../shared/actor';
import { audit } from '../shared/audit';
import { isUuid } from '../shared/chain';
import { checkPassword, loginView } from './logins';
import { hashPassword, verifyPassword } from './passwords';
import { beginAttempt, endAttempt, type ThrottleSettings } from './throttle';
import { acceptSecondFactor } from './two-factor';

// Sign-in, server-side sessions and API tokens (spec 2 section 5, PANEL.md section 3). Nothing is
// cached: every request reads its session or token with the login and the status of every org on
// its path, so a suspension or a reset is seen by every API process on the very next request.

export interface AuthSettings {
  sealingKey: Buffer;
  sessionIdleMs: number;
  sessionMaxMs: number;
  throttle: ThrottleSettings;
}

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
export const TOKEN_PREFIX = 'pnl_';

/** The signed-in caller with what limits its request (temporary password, missing two-factor). */
export interface Principal extends Actor {
  via: 'session' | 'token';
  credentialId: string;
  mustChangePassword: boolean;
  twoFactor: boolean;
}

const PRINCIPAL_SQL = `
  SELECT l.id AS login_id, l.username, l.role, l.status, l.must_change_password, l.two_factor_enabled_at,
         o.id AS org_id, o.path AS org_path, o.type AS org_type,
         EXISTS (SELECT 1 FROM panel_orgs a WHERE a.id = ANY (string_to_array(rtrim(o.path, '/'), '/')::uuid[]) AND a.status <> 'active') AS org_suspended`;

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a raw query row
function principalOf(row: Record<string, any>, via: 'session' | 'token', credentialId: string): Principal {
  if (row.status !== 'active' || row.org_suspended) throw new PanelError('suspended');
  return {
    loginId: row.login_id,
    username: row.username,
    role: row.role as Role,
    orgId: row.org_id,
    orgPath: row.org_path,
    orgType: row.org_type as OrgType,
    via,
    credentialId,
    mustChangePassword: row.must_change_password,
    twoFactor: row.two_factor_enabled_at !== null,
  };
}

/**
 * The principal of a session cookie; slides the session's expiry at most once a minute, or every
 * half idle period when that is shorter (else an idle timeout of a minute or two ends active sessions).
 */
export async function sessionPrincipal(db: Db, s: AuthSettings, token: string): Promise<Principal | null> {
  const { rows } = await db.raw(
    `${PRINCIPAL_SQL}, s.id AS session_id, s.last_seen_at < now() - least(interval '1 minute', make_interval(secs => ?)) AS stale
     FROM panel_sessions s JOIN panel_logins l ON l.id = s.login_id JOIN panel_orgs o ON o.id = l.org_id
     WHERE s.token_hash = ? AND s.expires_at > now()`,
    [s.sessionIdleMs / 2000, sha256(token)],
  );
  if (!rows.length) return null;
  const p = principalOf(rows[0], 'session', rows[0].session_id);
  if (rows[0].stale) {
    await db.raw(
      `UPDATE panel_sessions SET last_seen_at = now(), expires_at = least(created_at + make_interval(secs => ?), now() + make_interval(secs => ?)) WHERE id = ?`,
      [s.sessionMaxMs / 1000, s.sessionIdleMs / 1000, p.credentialId],
    );
  }
  return p;
}

/** The principal of an API token (`Authorization: Bearer pnl_…`). */
export async function tokenPrincipal(db: Db, token: string): Promise<Principal | null> {
  if (!token.startsWith(TOKEN_PREFIX)) return null;
  const { rows } = await db.raw(
    `${PRINCIPAL_SQL}, t.id AS token_id, t.last_used_at IS NULL OR t.last_used_at < now() - interval '1 minute' AS stale
     FROM panel_api_tokens t JOIN panel_logins l ON l.id = t.login_id JOIN panel_orgs o ON o.id = l.org_id
     WHERE t.token_hash = ? AND t.revoked_at IS NULL`,
    [sha256(token)],
  );
  if (!rows.length) return null;
  const p = principalOf(rows[0], 'token', rows[0].token_id);
  if (rows[0].stale) await db('panel_api_tokens').where({ id: p.credentialId }).update({ last_used_at: db.fn.now() });
  return p;
}

export interface SignInInput {
  username: string;
  password: string;
  /** a TOTP code or a recovery code, for logins with two-factor on */
  code?: string;
  ip: string;
  userAgent?: string;
}

/** Checks the credentials (throttled per username and IP) and opens a session: the cookie token, shown once. */
export async function signIn(db: Db, s: AuthSettings, input: SignInInput) {
  const username = String(input.username ?? '').toLowerCase();
  await beginAttempt(db, s.throttle, username, input.ip);
  // Only a wrong password or second factor is a failure (not a missing code, a suspension or an error).
  let outcome: 'failed' | 'signed_in' | 'not_failed' = 'not_failed';
  try {
    const login = await db('panel_logins').where({ username }).first();
    if (!(await verifyPassword(login?.password_hash ?? null, String(input.password ?? '')))) {
      outcome = 'failed';
      throw new PanelError('invalid_credentials');
    }
    if (login.two_factor_enabled_at && !input.code) throw new PanelError('two_factor_code_required');
    const token = randomBytes(32).toString('base64url');
    const session = await db.transaction(async (trx) => {
      const locked = await trx('panel_logins').where({ id: login.id }).forUpdate().first();
      if (locked.two_factor_enabled_at && !(await acceptSecondFactor(trx, s.sealingKey, locked, input.code!))) return null;
      // Suspension is checked after the credentials, so a wrong password never tells that a login
      // exists; a suspended login (or one below a suspended org) gets no session row at all.
      const { rows } = await trx.raw(`${PRINCIPAL_SQL} FROM panel_logins l JOIN panel_orgs o ON o.id = l.org_id WHERE l.id = ?`, [login.id]);
      principalOf(rows[0], 'session', '');
      const [row] = await trx('panel_sessions')
        .insert({ id: randomUUID(), token_hash: sha256(token), login_id: login.id, expires_at: new Date(Date.now() + Math.min(s.sessionIdleMs, s.sessionMaxMs)), ip: input.ip, user_agent: input.userAgent?.slice(0, 300) ?? null })
        .returning(['id', 'expires_at']);
      await trx('panel_logins').where({ id: login.id }).update({ last_sign_in_at: trx.fn.now() });
      return row;
    });
    if (!session) {
      outcome = 'failed';
      throw new PanelError('invalid_two_factor_code');
    }
    outcome = 'signed_in';
    return { token, expires_at: session.expires_at, login: loginView(login) };
  } finally {
    await endAttempt(db, username, input.ip, outcome);
  }
}

export async function signOut(db: Db, p: Principal): Promise<void> {
  if (p.via === 'session') await db('panel_sessions').where({ id: p.credentialId }).delete();
}

/** Changes the caller's own password (this is how a temporary password is replaced); other sessions end. */
export async function changeOwnPassword(db: Db, p: Principal, current: string, next: string): Promise<void> {
  checkPassword(next, 'new_password');
  if (current === next) throw new PanelError('validation_failed', { field: 'new_password', detail: 'new_password: must differ from the current password' });
  const row = await db('panel_logins').where({ id: p.loginId }).first('password_hash');
  if (!(await verifyPassword(row.password_hash, String(current ?? '')))) throw new PanelError('validation_failed', { field: 'current_password', detail: 'current_password: is wrong' });
  const hash = await hashPassword(next);
  await db.transaction(async (trx) => {
    await trx('panel_logins').where({ id: p.loginId }).update({ password_hash: hash, must_change_password: false, password_changed_at: trx.fn.now() });
    const others = trx('panel_sessions').where({ login_id: p.loginId });
    if (p.via === 'session') others.whereNot({ id: p.credentialId });
    await others.delete();
    await audit(trx, p, { org: { id: p.orgId, path: p.orgPath }, action: 'login.change_password', target: { type: 'login', id: p.loginId } });
  });
}

export async function accountOf(db: Db, p: Principal) {
  const row = await db('panel_logins').where({ id: p.loginId }).first();
  return loginView(row);
}

// API tokens: per login, shown once, stored as a SHA-256 hash, carrying the login's role and scope.

export async function createToken(db: Db, p: Principal, name: string) {
  const token = TOKEN_PREFIX + randomBytes(32).toString('base64url');
  const id = randomUUID();
  return db.transaction(async (trx) => {
    const [row] = await trx('panel_api_tokens')
      .insert({ id, login_id: p.loginId, name, token_hash: sha256(token), prefix: token.slice(0, 12) })
      .returning(['id', 'name', 'prefix', 'created_at']);
    await audit(trx, p, { org: { id: p.orgId, path: p.orgPath }, action: 'token.create', target: { type: 'api_token', id }, after: { name, prefix: row.prefix } });
    return { ...row, token };
  });
}

export async function listTokens(db: Db, p: Principal) {
  return db('panel_api_tokens').where({ login_id: p.loginId }).whereNull('revoked_at').orderBy('created_at').select('id', 'name', 'prefix', 'created_at', 'last_used_at');
}

export async function revokeToken(db: Db, p: Principal, id: string): Promise<void> {
  if (!isUuid(id)) throw new PanelError('not_found', { what: 'API token' });
  await db.transaction(async (trx) => {
    const n = await trx('panel_api_tokens').where({ id, login_id: p.loginId }).whereNull('revoked_at').update({ revoked_at: trx.fn.now() });
    if (!n) throw new PanelError('not_found', { what: 'API token' });
    await audit(trx, p, { org: { id: p.orgId, path: p.orgPath }, action: 'token.revoke', target: { type: 'api_token', id } });
  });
}
