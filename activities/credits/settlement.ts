import type { Db } from '../../platform/db';
import { computeCharge, normalize, type Tariff } from '../../domain/credits/pricing';
import type { RequestReport, SettlementResult } from '../../domain/credits/reservation';

/**
 * Ledger activities. Settlement is one statement guarded by `status = 'held'`, so however often
 * Temporal retries it, the hold resolves exactly once. A hold that also raised its key's spend
 * (keyed variant) has the key's spend corrected from the hold to the charge in that statement;
 * `a` joins `k` so the key row is locked before the account row, the order the hold uses.
 */
export function createLedgerActivities(db: Db) {
  async function settleReservation(reservationId: string, report: RequestReport): Promise<SettlementResult> {
    const row = await db('reservations').where({ id: reservationId }).first();
    if (!row) throw new Error(`reservation ${reservationId} not found`);
    if (row.status !== 'held') {
      return { reservationId, status: row.status, billingSource: row.billing_source, charge: normalize(row.charge), applied: false };
    }
    const tariff: Tariff = row;
    const c = computeCharge({
      tariff,
      held: row.held_credits,
      complimentary: row.complimentary,
      usage: report.usage,
      providerCost: report.providerCost,
      billable: report.billable,
      media: report.media,
    });
    const status = report.outcome === 'cancelled' ? 'cancelled' : c.billing_source === 'not_billed' ? 'released' : 'settled';
    const u = report.usage;
    const result = await db.raw(
      `WITH r AS (
         UPDATE reservations SET status = :status, billing_source = :billing_source, outcome = :outcome,
           http_status = :http_status, body_id = COALESCE(:body_id, body_id), latency_ms = :latency_ms, error = :error,
           prompt_tokens = :prompt_tokens, completion_tokens = :completion_tokens, cached_tokens = :cached_tokens,
           cache_write_tokens = :cache_write_tokens, reasoning_tokens = :reasoning_tokens,
           usage_details = COALESCE(:usage_details::jsonb, usage_details),
           provider_cost = :provider_cost, charge = :charge, input_credits = :input_credits,
           cache_write_credits = :cache_write_credits, cache_read_credits = :cache_read_credits,
           output_credits = :output_credits, pricing_adjustment_credits = :pricing_adjustment_credits,
           is_estimate = :is_estimate, settled_at = now()
         WHERE id = :id AND status = 'held'
         RETURNING account_id, key_id, key_spend_tracked, held_credits, charge
       ), k AS (
         UPDATE api_keys SET spend = spend - r.held_credits + r.charge
         FROM r WHERE api_keys.id = r.key_id AND r.key_spend_tracked
         RETURNING api_keys.id
       ), a AS (
         UPDATE accounts SET total_usage = total_usage - r.held_credits + r.charge,
           reserved_credits = reserved_credits - r.held_credits, pending_requests = pending_requests - 1
         FROM r LEFT JOIN k ON true WHERE accounts.id = r.account_id
       ), l AS (
         INSERT INTO ledger (account_id, reservation_id, kind, amount)
         SELECT account_id, :id::uuid, 'release', held_credits FROM r
         UNION ALL SELECT account_id, :id::uuid, 'charge', charge FROM r WHERE charge > 0
       )
       SELECT count(*)::int AS n FROM r`,
      {
        id: reservationId,
        status,
        billing_source: c.billing_source,
        outcome: report.outcome,
        http_status: report.httpStatus,
        body_id: report.bodyId ?? null,
        latency_ms: report.latencyMs ?? null,
        error: report.error ?? null,
        prompt_tokens: u?.prompt_tokens ?? null,
        completion_tokens: u?.completion_tokens ?? null,
        cached_tokens: u?.cached_tokens ?? null,
        cache_write_tokens: u?.cache_write_tokens ?? null,
        reasoning_tokens: u?.reasoning_tokens ?? null,
        usage_details: report.usageDetails ? JSON.stringify(report.usageDetails) : null,
        provider_cost: report.providerCost,
        charge: c.charge,
        input_credits: c.input_credits,
        cache_write_credits: c.cache_write_credits,
        cache_read_credits: c.cache_read_credits,
        output_credits: c.output_credits,
        pricing_adjustment_credits: c.pricing_adjustment_credits,
        is_estimate: c.is_estimate,
      },
    );
    const applied = result.rows[0].n === 1;
    if (!applied) {
      const now = await db('reservations').where({ id: reservationId }).first();
      return { reservationId, status: now.status, billingSource: now.billing_source, charge: normalize(now.charge), applied: false };
    }
    return { reservationId, status, billingSource: c.billing_source, charge: c.charge, applied };
  }

  return { settleReservation };
}

export type LedgerActivities = ReturnType<typeof createLedgerActivities>;
