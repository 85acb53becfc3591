import { createHash, randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { generateSecret, generateURI, verifySync } from 'otplib';
import { PanelError } from '../../../domain/panel/errors';
import type { Db } from '../../../platform/db';
import { open, seal } from '../../../platform/secret-box';
import type { Actor } from '../shared/actor';
import { audit } from '../shared/audit';

// TOTP two-factor sign-in (RFC 6238, 30 s steps, 6 digits; spec 2 sections 5.2-5.3). The secret is
// sealed at rest; a code is accepted once (the last accepted time step is kept); ten recovery codes
// are shown once at confirmation and stored hashed, each usable once.

const RECOVERY_CODES = 10;
const hashCode = (code: string) => createHash('sha256').update(code.replace(/[\s-]/g, '').toLowerCase()).digest('hex');

export interface Enrolment {
  secret: string;
  otpauth_uri: string;
}

/** Starts (or restarts) an enrolment: a new secret, not in force until confirmed with a code. */
export async function startEnrolment(db: Db, key: Buffer, actor: Actor, issuer: string): Promise<Enrolment> {
  const login = await db('panel_logins').where({ id: actor.loginId }).first('two_factor_enabled_at');
  if (login.two_factor_enabled_at) throw new PanelError('conflict', { detail: 'two-factor sign-in is already on; the level above can remove it' });
  const secret = generateSecret();
  await db('panel_logins').where({ id: actor.loginId }).update({ totp_pending_sealed: seal(key, secret) });
  return { secret, otpauth_uri: generateURI({ issuer, label: actor.username, secret }) };
}

/** Confirms an enrolment with a current code; returns the recovery codes, shown this once. */
export async function confirmEnrolment(db: Db, key: Buffer, actor: Actor, code: string): Promise<{ recovery_codes: string[] }> {
  return db.transaction(async (trx) => {
    const login = await trx('panel_logins').where({ id: actor.loginId }).forUpdate().first('totp_pending_sealed', 'two_factor_enabled_at', 'org_id');
    if (login.two_factor_enabled_at) throw new PanelError('conflict', { detail: 'two-factor sign-in is already on' });
    if (!login.totp_pending_sealed) throw new PanelError('conflict', { detail: 'start the enrolment first (POST /v1/account/two-factor)' });
    const secret = open(key, login.totp_pending_sealed);
    const step = checkCode(secret, code, null);
    if (step === null) throw new PanelError('invalid_two_factor_code');
    const codes = Array.from({ length: RECOVERY_CODES }, () => randomBytes(5).toString('hex').replace(/^(.{5})/, '$1-'));
    await trx('panel_logins')
      .where({ id: actor.loginId })
      .update({ totp_secret_sealed: login.totp_pending_sealed, totp_pending_sealed: null, two_factor_enabled_at: trx.fn.now(), totp_last_step: step, recovery_code_hashes: codes.map(hashCode) });
    await audit(trx, actor, { org: { id: actor.orgId, path: actor.orgPath }, action: 'login.enable_two_factor', target: { type: 'login', id: actor.loginId }, after: { two_factor: true } });
    return { recovery_codes: codes };
  });
}

/** The time step of a valid, unused code (±1 step of clock drift), else null. */
function checkCode(secret: string, code: string, lastStep: number | null): number | null {
  if (!/^\d{6}$/.test(code)) return null;
  const r = verifySync({ secret, token: code, epochTolerance: 30, ...(lastStep !== null ? { afterTimeStep: lastStep } : {}) });
  return r.valid && 'timeStep' in r ? r.timeStep : null;
}

/**
 * The second factor at sign-in, inside the sign-in transaction holding the login row: a TOTP code
 * (each used once) or a recovery code (consumed). True when accepted.
 */
export async function acceptSecondFactor(trx: Knex.Transaction, key: Buffer, login: { id: string; totp_secret_sealed: string; totp_last_step: number | null; recovery_code_hashes: string[] }, code: string): Promise<boolean> {
  const trimmed = code.trim();
  const step = checkCode(open(key, login.totp_secret_sealed), trimmed, login.totp_last_step);
  if (step !== null) {
    await trx('panel_logins').where({ id: login.id }).update({ totp_last_step: step });
    return true;
  }
  const h = hashCode(trimmed);
  if (trimmed.length >= 10 && login.recovery_code_hashes.includes(h)) {
    await trx('panel_logins').where({ id: login.id }).update({ recovery_code_hashes: login.recovery_code_hashes.filter((x) => x !== h) });
    return true;
  }
  return false;
}
