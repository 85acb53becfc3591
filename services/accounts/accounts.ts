import { z } from 'zod';
import type { Db } from '../../platform/db';
import { NotFound } from '../shared/errors';
import { isoInstant } from '../../domain/shared/instant';

// Accounts and their credits: the only writer of grants (every grant is a ledger row). Used by
// the admin CLI, `npm start` seeding and the tests.

export const TIERS = ['free_trial', 'starter', 'pro', 'business', 'user'] as const;
export const credits = z.string().regex(/^\d{1,24}(\.\d{1,12})?$/, 'must be a non-negative decimal with at most 12 decimals');

export const accountInput = z.object({
  name: z.string().min(1).max(200),
  tier: z.enum(TIERS).default('user'),
  credits: credits.default('0'),
  planExpiresAt: isoInstant.nullable().default(null),
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
    // A balance back at or above the low-balance threshold re-arms balance.low (services/accounts/event-sql.ts).
    `WITH a AS (UPDATE accounts SET total_credits = total_credits + :amount,
                  low_balance_armed = COALESCE(low_balance_armed OR total_credits + :amount - total_usage >= low_balance_threshold, true)
                WHERE id = :id RETURNING id, total_credits, total_usage),
          l AS (INSERT INTO ledger (account_id, kind, amount) SELECT id, 'grant', :amount FROM a)
     SELECT id, total_credits, total_credits - total_usage AS remaining_credits FROM a`,
    { id: accountId, amount },
  );
  if (!res.rows[0]) throw new NotFound(`account ${accountId} not found`);
  return res.rows[0];
}

const accountId = z.string().uuid('must be a UUID');
const VIEW = ['id', 'name', 'tier', 'active', 'plan_expires_at', 'total_credits', 'total_usage', 'reserved_credits', 'pending_requests', 'created_at'];

/** Changes an account's row; every API process drops it from its cache (NOTIFY on these columns). */
async function changeAccount(db: Db, id: string, changes: Record<string, unknown>) {
  accountId.parse(id);
  const q = db('accounts').where({ id });
  const [row] = Object.keys(changes).length > 0 ? await q.update(changes).returning(VIEW) : await q.select(VIEW);
  if (!row) throw new NotFound(`account ${id} not found`);
  return row;
}

export const getAccount = (db: Db, id: string) => changeAccount(db, id, {});

/** An account's keys stop working (401 account_deactivated) or work again. */
export async function setAccountActive(db: Db, id: string, active: boolean) {
  const row = await changeAccount(db, id, { active });
  return { id: row.id as string, active: row.active as boolean };
}

export const deactivateAccount = (db: Db, id: string) => setAccountActive(db, id, false);
export const reactivateAccount = (db: Db, id: string) => setAccountActive(db, id, true);

/** Tier and plan expiry; absent: unchanged, plan expiry null: no expiry. */
export const accountChange = z
  .object({
    tier: z.enum(TIERS).optional(),
    planExpiresAt: isoInstant.nullable().optional(),
  })
  .strict();

export async function updateAccount(db: Db, id: string, input: z.input<typeof accountChange>) {
  const c = accountChange.parse(input);
  return changeAccount(db, id, { ...(c.tier ? { tier: c.tier } : {}), ...(c.planExpiresAt !== undefined ? { plan_expires_at: c.planExpiresAt } : {}) });
}
