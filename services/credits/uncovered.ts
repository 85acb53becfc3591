import { z } from 'zod';
import { normalize } from '../../domain/credits/pricing';
import { isoInstant } from '../../domain/shared/instant';
import type { Db } from '../../platform/db';

// Provider costs above their holds: charged up to the hold (billing_source provider_cost_capped),
// the rest is on the operator. One line per request and the total, for reconciling the
// accounts' charges with the provider's bill.

export const uncoveredQuery = z
  .object({
    /** ISO 8601: requests settled at or after this instant */
    since: isoInstant.optional(),
    limit: z.coerce.number().int().min(1).max(1000).default(100),
  })
  .strict();

interface UncoveredRow {
  id: string;
  account_id: string;
  model: string;
  provider: string;
  provider_cost: string;
  held_credits: string;
  charge: string;
  uncovered_credits: string;
  settled_at: Date;
}

export async function uncoveredReport(db: Db, query: z.input<typeof uncoveredQuery> = {}) {
  const q = uncoveredQuery.parse(query);
  const base = db('reservations').where('uncovered_credits', '>', 0).modify((b) => {
    if (q.since) b.where('settled_at', '>=', q.since);
  });
  const [rows, [sum]]: [UncoveredRow[], Array<{ n: number; total: string }>] = await Promise.all([
    base.clone().orderBy('settled_at', 'desc').limit(q.limit).select('id', 'account_id', 'model', 'provider', 'provider_cost', 'held_credits', 'charge', 'uncovered_credits', 'settled_at'),
    base.clone().select(db.raw('count(*)::int AS n'), db.raw('COALESCE(sum(uncovered_credits), 0) AS total')),
  ]);
  return {
    requests: sum.n,
    total_uncovered_credits: normalize(sum.total),
    data: rows.map((r) => ({
      request_id: r.id,
      account_id: r.account_id,
      model: r.model,
      provider: r.provider,
      provider_cost_credits: normalize(r.provider_cost),
      held_credits: normalize(r.held_credits),
      charge: normalize(r.charge),
      uncovered_credits: normalize(r.uncovered_credits),
      settled_at: r.settled_at.toISOString(),
    })),
  };
}
