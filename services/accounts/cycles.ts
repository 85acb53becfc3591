import { z } from 'zod';
import type { Db } from '../../platform/db';
import { NotFound } from '../shared/errors';
import { credits } from './accounts';
import { sub } from '../../domain/credits/pricing';

// A new purchase cycle (spec 1 section 2.4: `total_credits` are the credits of the current cycle,
// `total_usage` what it spent, `cycle_started_at` its start). The remaining balance carries over,
// so no credits are lost or made: the new cycle's credits are that balance plus any grant, its
// usage the credits still held by unsettled requests (they settle against the new cycle).

export const newCycleInput = z.object({ account: z.string().uuid('must be a UUID'), credits: credits.default('0') }).strict();

export async function startNewCycle(db: Db, input: z.input<typeof newCycleInput>) {
  const c = newCycleInput.parse(input);
  return db.transaction(async (trx) => {
    const a = await trx('accounts').where({ id: c.account }).forUpdate().first('id', 'total_credits', 'total_usage', 'reserved_credits');
    if (!a) throw new NotFound(`account ${c.account} not found`);
    const [cycle] = await trx('account_cycles')
      .insert({
        account_id: a.id,
        previous_total_credits: a.total_credits,
        previous_total_usage: a.total_usage,
        carried_over: trx.raw('?::numeric - ?::numeric', [a.total_credits, a.total_usage]),
        granted: c.credits,
      })
      .returning(['started_at', 'carried_over', 'granted']);
    const [row] = await trx('accounts')
      .where({ id: a.id })
      .update({
        total_credits: trx.raw('total_credits - total_usage + reserved_credits + ?::numeric', [c.credits]),
        total_usage: trx.raw('reserved_credits'),
        cycle_started_at: cycle.started_at,
        low_balance_armed: trx.raw('COALESCE(low_balance_armed OR total_credits - total_usage + ?::numeric >= low_balance_threshold, true)', [c.credits]),
      })
      .returning(['id', 'total_credits', 'total_usage', 'reserved_credits', 'pending_requests', 'cycle_started_at']);
    if (c.credits !== '0') await trx('ledger').insert({ account_id: a.id, kind: 'grant', amount: c.credits });
    return { ...row, remaining_credits: sub(row.total_credits, row.total_usage), carried_over: cycle.carried_over, granted: cycle.granted };
  });
}
