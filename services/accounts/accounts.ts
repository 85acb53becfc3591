import { z } from 'zod';
import type { Db } from '../../platform/db';

// Accounts and their credits: the only writer of grants (every grant is a ledger row). Used by
// the admin CLI, `npm start` seeding and the tests.

export const TIERS = ['free_trial', 'starter', 'pro', 'business', 'user'] as const;
export const credits = z.string().regex(/^\d{1,24}(\.\d{1,12})?$/, 'must be a non-negative decimal with at most 12 decimals');

export const accountInput = z.object({
  name: z.string().min(1).max(200),
  tier: z.enum(TIERS).default('user'),
  credits: credits.default('0'),
  planExpiresAt: z.string().datetime({ offset: true }).nullable().default(null),
});

export async function createAccount(db: Db, input: z.input<typeof accountInput>) {
  const a = accountInput.parse(input);
  return db.transaction(async (trx) => {
    const [row] = await trx('accounts')
      .insert({ name: a.name, tier: a.tier, total_credits: a.credits, plan_expires_at: a.planExpiresAt })
      .returning(['id', 'name', 'tier', 'total_credits', 'plan_expires_at', 'created_at']);
    if (a.credits !== '0') await trx('ledger').insert({ account_id: row.id, kind: 'grant', amount: a.credits });
    return row;
  });
}

/** Adds credits: the balance and its ledger row in one statement. */
export async function addCredits(db: Db, accountId: string, amount: string) {
  credits.parse(amount);
  const res = await db.raw(
    `WITH a AS (UPDATE accounts SET total_credits = total_credits + :amount WHERE id = :id RETURNING id, total_credits, total_usage),
          l AS (INSERT INTO ledger (account_id, kind, amount) SELECT id, 'grant', :amount FROM a)
     SELECT id, total_credits, total_credits - total_usage AS remaining_credits FROM a`,
    { id: accountId, amount },
  );
  if (!res.rows[0]) throw new Error(`account ${accountId} not found`);
  return res.rows[0];
}

export async function deactivateAccount(db: Db, accountId: string) {
  const [row] = await db('accounts').where({ id: accountId }).update({ active: false }).returning(['id', 'active']);
  if (!row) throw new Error(`account ${accountId} not found`);
  return row;
}
