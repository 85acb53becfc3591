import { sub, toNumber, type Charge, type Tariff, type TokenUsage } from '../../../domain/credits/pricing';
import { chargeOf } from '../../../domain/credits/reservation';
import type { Hold } from '../../../services/credits/holds';

/** The charge settlement will write, by the same rule (chargeOf), so the answer can show it; `tariff`: a fallback model's. */
export function chargeFor(hold: Hold, usage: TokenUsage | null, providerCost: string | null, tariff?: Tariff): Charge {
  return chargeOf(hold, { usage, providerCost, billable: true, tariff });
}

/** A capped provider cost shows what was not charged. */
export const uncovered = (c: Pick<Charge, 'billing_source' | 'uncovered_credits'>) =>
  c.billing_source === 'provider_cost_capped' ? { uncovered_credits: toNumber(c.uncovered_credits) } : {};

/** Credit fields added to the provider's usage object (spec 1 section 2.2). */
export function creditUsage(hold: Hold, c: Charge) {
  return {
    cost: toNumber(c.charge),
    cost_details: {
      input_credits: toNumber(c.input_credits),
      cache_write_credits: toNumber(c.cache_write_credits),
      cache_read_credits: toNumber(c.cache_read_credits),
      output_credits: toNumber(c.output_credits),
      pricing_adjustment_credits: toNumber(c.pricing_adjustment_credits),
      billing_source: c.billing_source,
      is_estimate: c.is_estimate,
      ...uncovered(c),
    },
    balance: {
      before: toNumber(hold.balanceBefore),
      after: toNumber(sub(hold.balanceBefore, c.charge)),
      reserved_credits: toNumber(hold.held),
    },
  };
}

/** Chat usage: the provider's token fields (its currency cost replaced) plus the credit fields. */
export function chatUsage(providerUsage: Record<string, unknown>, hold: Hold, c: Charge) {
  const { cost: _providerCost, ...tokens } = providerUsage;
  void _providerCost;
  return { ...tokens, ...creditUsage(hold, c) };
}
