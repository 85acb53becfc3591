import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { invalid, notFound, PanelError } from '../../../domain/panel/errors';
import { isBelow, rolesFor, type OrgType, type Role } from '../../../domain/panel/tree';
import type { Db } from '../../../platform/db';
import type { Actor } from '../shared/actor';
import { audit } from '../shared/audit';
import { findInScope, isUuid } from '../shared/chain';
import { hashPassword, temporaryPassword } from './passwords';

// Logins (spec 2 section 2.5): a login never manages the logins of its own org; the levels above do.
// Initial and reset passwords are temporary; a reset ends the login's sessions and revokes its API tokens.

export const USERNAME = /^[a-z0-9][a-z0-9._-]{2,31}$/;
export const MIN_PASSWORD = 12;

export function checkUsername(username: string, field = 'username'): void {
  if (!USERNAME.test(username)) throw invalid(field, 'must be 3 to 32 characters: lower-case letters, digits, dot, dash or underscore, starting with a letter or digit');
}

export function checkPassword(password: string, field = 'password'): void {
  if (typeof password !== 'string' || password.length < MIN_PASSWORD) throw invalid(field, `must be at least ${MIN_PASSWORD} characters`);
  if (password.length > 256) throw invalid(field, 'must be at most 256 characters');
}

export interface LoginView {
  id: string;
  org_id: string;
  username: string;
  role: Role;
  status: string;
  must_change_password: boolean;
  password_changed_at: Date;
  password_age_days: number;
  two_factor: boolean;
  last_sign_in_at: Date | null;
  created_at: Date;
}

const VIEW_COLUMNS = ['id', 'org_id', 'username', 'role', 'status', 'must_change_password', 'password_changed_at', 'two_factor_enabled_at', 'last_sign_in_at', 'created_at'];

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a panel_logins row
export function loginView(row: Record<string, any>): LoginView {
  return {
    id: row.id,
    org_id: row.org_id,
    username: row.username,
    role: row.role,
    status: row.status,
    must_change_password: row.must_change_password,
    password_changed_at: row.password_changed_at,
    password_age_days: Math.floor((Date.now() - new Date(row.password_changed_at).getTime()) / 86_400_000),
    two_factor: row.two_factor_enabled_at !== null,
    last_sign_in_at: row.last_sign_in_at,
    created_at: row.created_at,
  };
}

/** Inserts a login with a temporary password (already validated by the caller's transaction). */
export async function insertLogin(trx: Knex.Transaction, org: { id: string; type: OrgType }, input: { username: string; passwordHash: string; role: Role }): Promise<LoginView> {
  if (!rolesFor(org.type).includes(input.role)) throw invalid('role', `a ${org.type} login is ${rolesFor(org.type).join(' or ')}`);
  if (await trx('panel_logins').where({ username: input.username }).first('id')) {
    throw new PanelError('conflict', { field: 'username', detail: `the username "${input.username}" is taken` });
  }
  const [row] = await trx('panel_logins')
    .insert({ id: randomUUID(), org_id: org.id, username: input.username, password_hash: input.passwordHash, role: input.role, must_change_password: true })
    .returning(VIEW_COLUMNS);
  return loginView(row);
}

/** The org whose logins the actor manages: strictly below the actor's own org. */
async function managedOrg(q: Knex | Knex.Transaction, actor: Actor, orgId: string) {
  const org = await findInScope(q, actor, orgId);
  if (org.id === actor.orgId) throw new PanelError('forbidden', { detail: "a login cannot add or change logins of its own organisation; the level above does that" });
  return org;
}

/** A login the actor manages (its org strictly below the actor's), else 404 / 403 as for orgs. */
async function managedLogin(q: Knex | Knex.Transaction, actor: Actor, loginId: string, lock = false) {
  if (!isUuid(loginId)) throw notFound('login');
  const query = q('panel_logins as l').join('panel_orgs as o', 'o.id', 'l.org_id').where('l.id', loginId).first('l.*', 'o.path as org_path', 'o.type as org_type');
  if (lock) query.forUpdate();
  const row = await query;
  if (!row || !(row.org_id === actor.orgId || isBelow(row.org_path, actor.orgPath))) throw notFound('login');
  if (row.org_id === actor.orgId) throw new PanelError('forbidden', { detail: "a login cannot add or change logins of its own organisation; the level above does that" });
  return row;
}

export async function listLogins(db: Db, actor: Actor, orgId: string): Promise<LoginView[]> {
  const org = await findInScope(db, actor, orgId);
  const rows = await db('panel_logins').where({ org_id: org.id }).orderBy('username').select(VIEW_COLUMNS);
  return rows.map(loginView);
}

export async function createLogin(db: Db, actor: Actor, orgId: string, input: { username: string; password: string; role?: Role }): Promise<LoginView> {
  checkUsername(input.username);
  checkPassword(input.password);
  const passwordHash = await hashPassword(input.password);
  return db.transaction(async (trx) => {
    const org = await managedOrg(trx, actor, orgId);
    const login = await insertLogin(trx, org, { username: input.username, passwordHash, role: input.role ?? rolesFor(org.type)[0] });
    await audit(trx, actor, { org, action: 'login.create', target: { type: 'login', id: login.id }, after: { username: login.username, role: login.role } });
    return login;
  });
}

export async function setLoginStatus(db: Db, actor: Actor, loginId: string, status: 'active' | 'suspended'): Promise<LoginView> {
  return db.transaction(async (trx) => {
    const row = await managedLogin(trx, actor, loginId, true);
    const [updated] = await trx('panel_logins').where({ id: row.id }).update({ status }).returning(VIEW_COLUMNS);
    await audit(trx, actor, { org: { id: row.org_id, path: row.org_path }, action: status === 'suspended' ? 'login.suspend' : 'login.reactivate', target: { type: 'login', id: row.id }, before: { status: row.status }, after: { status } });
    return loginView(updated);
  });
}

/**
 * Sets a new temporary password (changed at the next sign-in), ends the login's sessions and revokes
 * its API tokens: whoever knew the old password may have made one. The answer counts both.
 */
export async function resetPassword(db: Db, actor: Actor, loginId: string, password: string): Promise<ResetAnswer> {
  checkPassword(password);
  const passwordHash = await hashPassword(password);
  return db.transaction(async (trx) => applyReset(trx, actor, await managedLogin(trx, actor, loginId, true), passwordHash));
}

/**
 * The operator's reset where the database is reachable (`panelctl reset-password -login NAME`, for a
 * lost platform administrator password): any login by its username, a generated temporary password
 * returned once, the same effects as a reset by the level above, audited with no login as the actor.
 */
export async function operatorResetPassword(db: Db, username: string): Promise<ResetAnswer & { temporary_password: string }> {
  const password = temporaryPassword();
  const passwordHash = await hashPassword(password);
  return db.transaction(async (trx) => {
    const row = await trx('panel_logins as l').join('panel_orgs as o', 'o.id', 'l.org_id').where('l.username', username).forUpdate().first('l.*', 'o.path as org_path');
    if (!row) throw notFound('login');
    return { ...(await applyReset(trx, null, row, passwordHash, 'panelctl reset-password')), temporary_password: password };
  });
}

type ResetAnswer = LoginView & { sessions_ended: number; tokens_revoked: number };

/** A temporary password in place, the login's sessions ended and API tokens revoked, audited: one transaction. */
async function applyReset(trx: Knex.Transaction, actor: Actor | null, row: { id: string; org_id: string; org_path: string }, passwordHash: string, via?: string): Promise<ResetAnswer> {
  const [updated] = await trx('panel_logins')
    .where({ id: row.id })
    .update({ password_hash: passwordHash, must_change_password: true, password_changed_at: trx.fn.now() })
    .returning(VIEW_COLUMNS);
  const ended = await trx('panel_sessions').where({ login_id: row.id }).delete();
  const revoked = await trx('panel_api_tokens').where({ login_id: row.id }).whereNull('revoked_at').update({ revoked_at: trx.fn.now() });
  await audit(trx, actor, { org: { id: row.org_id, path: row.org_path }, action: 'login.reset_password', target: { type: 'login', id: row.id }, after: { sessions_ended: ended, tokens_revoked: revoked, ...(via ? { via } : {}) } });
  return { ...loginView(updated), sessions_ended: ended, tokens_revoked: revoked };
}

/** Removes a login's two-factor sign-in (by the level above): its sessions end; it may enrol again. */
export async function removeTwoFactor(db: Db, actor: Actor, loginId: string): Promise<LoginView> {
  return db.transaction(async (trx) => {
    const row = await managedLogin(trx, actor, loginId, true);
    const [updated] = await trx('panel_logins')
      .where({ id: row.id })
      .update({ totp_secret_sealed: null, totp_pending_sealed: null, two_factor_enabled_at: null, recovery_code_hashes: [], totp_last_step: null })
      .returning(VIEW_COLUMNS);
    const ended = await trx('panel_sessions').where({ login_id: row.id }).delete();
    await audit(trx, actor, { org: { id: row.org_id, path: row.org_path }, action: 'login.remove_two_factor', target: { type: 'login', id: row.id }, before: { two_factor: row.two_factor_enabled_at !== null }, after: { two_factor: false, sessions_ended: ended } });
    return loginView(updated);
  });
}

export async function deleteLogin(db: Db, actor: Actor, loginId: string): Promise<void> {
  await db.transaction(async (trx) => {
    const row = await managedLogin(trx, actor, loginId, true);
    await trx('panel_logins').where({ id: row.id }).delete();
    await audit(trx, actor, { org: { id: row.org_id, path: row.org_path }, action: 'login.delete', target: { type: 'login', id: row.id }, before: { username: row.username, role: row.role } });
  });
}
