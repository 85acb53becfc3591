import fs from 'node:fs';
import { z } from 'zod';
import { generateSecret, generateURI } from 'otplib';
import type { Db } from '../../platform/db';
import { seal } from '../../platform/secret-box';
import { hashPassword, temporaryPassword } from '../panel/logins/passwords';
import { Conflict, NotFound } from '../shared/errors';

// Dashboard users: the people of an account who sign in to the gateway dashboard. Created by the
// operator CLI (`admin user create`); the password is hashed with argon2id, the optional TOTP
// secret is sealed at rest and shown once, at creation.

export const userInput = z.object({
  accountId: z.string().uuid('must be a UUID'),
  email: z.string().trim().toLowerCase().email('must be an email address').max(320),
  /** absent: a generated one, shown once */
  password: z.string().min(10, 'must have at least 10 characters').max(200).optional(),
  role: z.enum(['owner', 'member']).default('owner'),
  totp: z.boolean().default(false),
});

export async function createUser(db: Db, sealingKey: Buffer, input: z.input<typeof userInput>) {
  const u = userInput.parse(input);
  const account = await db('accounts').where({ id: u.accountId }).first('id');
  if (!account) throw new NotFound(`account ${u.accountId} not found`);
  if (await db('dashboard_users').where({ email: u.email }).first('id')) throw new Conflict(`a dashboard user ${u.email} exists already`);
  const password = u.password ?? temporaryPassword();
  const secret = u.totp ? generateSecret() : null;
  const [row] = await db('dashboard_users')
    .insert({ account_id: u.accountId, email: u.email, password_hash: await hashPassword(password), role: u.role, totp_secret_sealed: secret === null ? null : seal(sealingKey, secret) })
    .onConflict('email')
    .ignore()
    .returning(['id', 'account_id', 'email', 'role', 'created_at']);
  if (!row) throw new Conflict(`a dashboard user ${u.email} exists already`);
  return {
    ...row,
    ...(u.password === undefined ? { password } : {}),
    ...(secret === null ? {} : { totp_secret: secret, otpauth_uri: generateURI({ issuer: 'Gateway dashboard', label: u.email, secret }) }),
  };
}

/**
 * The dashboard user of `npm start`'s demo account: created once with a generated password kept in
 * `passwordFile` (mode 600) to be printed again by the next start, like the demo key. A user whose
 * file is gone gets a new password.
 */
export async function ensureDemoUser(db: Db, sealingKey: Buffer, accountId: string, passwordFile: string): Promise<{ email: string; password: string }> {
  const email = 'demo@example.com';
  const user = await db('dashboard_users').where({ email }).first('id', 'account_id');
  if (user && user.account_id === accountId && fs.existsSync(passwordFile)) return { email, password: fs.readFileSync(passwordFile, 'utf8').trim() };
  const password = temporaryPassword();
  if (user) await db('dashboard_users').where({ id: user.id }).update({ account_id: accountId, password_hash: await hashPassword(password) });
  else await createUser(db, sealingKey, { accountId, email, password });
  fs.writeFileSync(passwordFile, password + '\n', { mode: 0o600 });
  return { email, password };
}
