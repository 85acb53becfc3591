import { generateSecret, generateURI } from 'otplib';
import type { Db } from '../../platform/db';
import { open, seal } from '../../platform/secret-box';
import { hashPassword, verifyPassword } from '../panel/logins/passwords';
import { Conflict, InvalidInput } from '../shared/errors';
import { totpStep } from './sessions';

// A signed-in user's own sign-in: password change (other sessions end) and TOTP two-factor,
// enrolled with a new secret that is in force only once a current code confirms it.

async function checkCurrent(db: Db, userId: string, password: string): Promise<void> {
  const row = await db('dashboard_users').where({ id: userId }).first('password_hash');
  if (!(await verifyPassword(row?.password_hash ?? null, password))) throw new InvalidInput('current_password', 'is wrong');
}

export async function changePassword(db: Db, userId: string, sessionId: string, current: string, next: string): Promise<void> {
  if (next.length < 10 || next.length > 200) throw new InvalidInput('new_password', 'must have 10 to 200 characters');
  await checkCurrent(db, userId, current);
  const hash = await hashPassword(next);
  await db.transaction(async (trx) => {
    await trx('dashboard_users').where({ id: userId }).update({ password_hash: hash });
    await trx('dashboard_sessions').where({ user_id: userId }).whereNot({ id: sessionId }).delete();
  });
}

/** Starts (or restarts) an enrolment: the secret and its otpauth URI, for the authenticator app. */
export async function startTotp(db: Db, key: Buffer, userId: string, email: string) {
  const row = await db('dashboard_users').where({ id: userId }).first('totp_secret_sealed');
  if (row.totp_secret_sealed) throw new Conflict('two-factor sign-in is already on');
  const secret = generateSecret();
  await db('dashboard_users').where({ id: userId }).update({ totp_pending_sealed: seal(key, secret) });
  return { secret, uri: generateURI({ issuer: 'Gateway dashboard', label: email, secret }) };
}

/** The secret of the enrolment begun, to show again while it is not confirmed. */
export async function pendingTotp(db: Db, key: Buffer, userId: string, email: string) {
  const row = await db('dashboard_users').where({ id: userId }).first('totp_pending_sealed');
  if (!row.totp_pending_sealed) return null;
  const secret = open(key, row.totp_pending_sealed);
  return { secret, uri: generateURI({ issuer: 'Gateway dashboard', label: email, secret }) };
}

export async function confirmTotp(db: Db, key: Buffer, userId: string, code: string): Promise<void> {
  const row = await db('dashboard_users').where({ id: userId }).first('totp_pending_sealed');
  if (!row.totp_pending_sealed) throw new Conflict('start the set-up first');
  const step = totpStep(open(key, row.totp_pending_sealed), code.trim(), null);
  if (step === null) throw new InvalidInput('code', 'is not the current code of the authenticator app');
  await db('dashboard_users').where({ id: userId }).update({ totp_secret_sealed: row.totp_pending_sealed, totp_pending_sealed: null, totp_last_step: step });
}

export async function disableTotp(db: Db, userId: string, password: string): Promise<void> {
  await checkCurrent(db, userId, password);
  await db('dashboard_users').where({ id: userId }).update({ totp_secret_sealed: null, totp_pending_sealed: null, totp_last_step: null });
}

export async function hasTotp(db: Db, userId: string): Promise<boolean> {
  return Boolean((await db('dashboard_users').where({ id: userId }).first('totp_secret_sealed'))?.totp_secret_sealed);
}
