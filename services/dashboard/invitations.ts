import { createHash, randomBytes } from 'node:crypto';
import { z } from 'zod';
import type { Db } from '../../platform/db';
import { hashPassword } from '../panel/logins/passwords';
import { Conflict, NotFound } from '../shared/errors';

// Invitations by an account's owner: a link with a one-time token (7 days) with which the invitee
// chooses a password and becomes a user of the account with the invited role. The token is shown
// once, to the owner; accepting it is one conditional update, so a link opens one user only.

const VALID_MS = 7 * 86_400_000;
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

export const invitationInput = z.object({
  email: z.string().trim().toLowerCase().email('must be an email address').max(320),
  role: z.enum(['owner', 'member']),
});

export const passwordInput = z.string().min(10, 'must have at least 10 characters').max(200);

export async function createInvitation(db: Db, accountId: string, invitedBy: string, input: z.input<typeof invitationInput>) {
  const i = invitationInput.parse(input);
  if (await db('dashboard_users').where({ email: i.email }).first('id')) throw new Conflict(`${i.email} already has a dashboard sign-in`);
  const token = randomBytes(32).toString('base64url');
  const [row] = await db('dashboard_invitations')
    .insert({ account_id: accountId, email: i.email, role: i.role, token_hash: sha256(token), invited_by: invitedBy, expires_at: new Date(Date.now() + VALID_MS) })
    .returning(['id', 'email', 'role', 'expires_at']);
  return { ...row, token };
}

/** The account's users and its invitations still open. */
export async function team(db: Db, accountId: string) {
  const [users, invitations] = await Promise.all([
    db('dashboard_users').where({ account_id: accountId }).orderBy('created_at').select('id', 'email', 'role', 'created_at', 'last_sign_in_at', db.raw('totp_secret_sealed IS NOT NULL AS two_factor')),
    db('dashboard_invitations').where({ account_id: accountId }).whereNull('accepted_at').whereNull('cancelled_at').where('expires_at', '>', db.fn.now()).orderBy('created_at').select('id', 'email', 'role', 'created_at', 'expires_at'),
  ]);
  return { users, invitations };
}

export async function cancelInvitation(db: Db, accountId: string, id: string): Promise<void> {
  const n = z.string().uuid().safeParse(id).success
    ? await db('dashboard_invitations').where({ id, account_id: accountId }).whereNull('accepted_at').whereNull('cancelled_at').update({ cancelled_at: db.fn.now() })
    : 0;
  if (!n) throw new NotFound('no such open invitation');
}

/** The open invitation of a token, or null (unknown, used, cancelled or expired). */
export async function openInvitation(db: Db, token: string) {
  return (
    (await db('dashboard_invitations').where({ token_hash: sha256(token) }).whereNull('accepted_at').whereNull('cancelled_at').where('expires_at', '>', db.fn.now()).first('id', 'account_id', 'email', 'role')) ?? null
  );
}

/** Uses the token once: the invitee's user with the chosen password. */
export async function acceptInvitation(db: Db, token: string, password: string) {
  const pw = passwordInput.parse(password);
  const hash = await hashPassword(pw);
  return db.transaction(async (trx) => {
    const [inv] = await trx('dashboard_invitations')
      .where({ token_hash: sha256(token) })
      .whereNull('accepted_at')
      .whereNull('cancelled_at')
      .where('expires_at', '>', trx.fn.now())
      .update({ accepted_at: trx.fn.now() })
      .returning(['account_id', 'email', 'role']);
    if (!inv) throw new NotFound('this invitation is used, cancelled or expired');
    const [user] = await trx('dashboard_users').insert({ account_id: inv.account_id, email: inv.email, password_hash: hash, role: inv.role }).onConflict('email').ignore().returning(['id', 'email', 'role']);
    if (!user) throw new Conflict(`${inv.email} already has a dashboard sign-in`);
    return user as { id: string; email: string; role: string };
  });
}
