import { normalize, type Tariff } from '../../domain/credits/pricing';
import { chargeOf, resolvedStatus, type RequestReport, type SettlementResult } from '../../domain/credits/reservation';
import type { Db } from '../../platform/db';
import { EVENT_DELIVERIES, EVENTS_CHANNEL, LOW_BALANCE, REACHED_AT } from '../accounts/event-sql';
import { holdsResolved, settlementLag } from './metrics';

/**
 * Settlement: the only writer of release and charge rows. One statement guarded by
 * `status = 'held'`, so however often it is retried, the hold resolves exactly once. A hold that
 * also raised its key's spend (keyed variant) has the key's spend corrected from the hold to the
 * charge in that statement; `a` joins `k` so the key row is locked before the account row, the
 * order the hold uses (services/credits/holds.ts).
 */
export async function settleReservation(db: Db, reservationId: string, report: RequestReport): Promise<SettlementResult> {
  const row = await db('reservations').where({ id: reservationId }).first();
  if (!row) throw new Error(`reservation ${reservationId} not found`);
  if (row.status !== 'held') {
    return { reservationId, status: row.status, billingSource: row.billing_source, charge: normalize(row.charge), applied: false };
  }
  const c = chargeOf({ tariff: row as Tariff, held: row.held_credits, complimentary: row.complimentary }, report);
  const status = resolvedStatus(report, c);
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
         uncovered_credits = :uncovered_credits,
         route = COALESCE(:route::jsonb, route), provider = COALESCE(:route_provider, provider),
         is_estimate = :is_estimate, settled_at = now()
       WHERE id = :id AND status = 'held'
       RETURNING account_id, key_id, key_spend_tracked, held_credits, charge, extract(epoch FROM clock_timestamp() - reported_at)::float8 AS lag
     ), k AS (
       UPDATE api_keys SET spend = spend - r.held_credits + r.charge,
         spend_limit_reached_at = ${REACHED_AT}
       FROM r WHERE api_keys.id = r.key_id AND r.key_spend_tracked
       RETURNING api_keys.id, api_keys.account_id, api_keys.spend, api_keys.spend_limit, api_keys.spend_limit_reached_at = statement_timestamp() AS reached
     ), a AS (
       UPDATE accounts SET total_usage = total_usage - r.held_credits + r.charge,
         reserved_credits = reserved_credits - r.held_credits, pending_requests = pending_requests - 1,
         ${LOW_BALANCE}
       FROM r LEFT JOIN k ON true WHERE accounts.id = r.account_id
       RETURNING accounts.id, accounts.total_credits - accounts.total_usage AS balance, accounts.low_balance_threshold,
         accounts.low_balance_crossed_at = statement_timestamp() AS crossed
     ), w AS (${EVENT_DELIVERIES}
     ), l AS (
       INSERT INTO ledger (account_id, reservation_id, kind, amount)
       SELECT account_id, :id::uuid, 'release', held_credits FROM r
       UNION ALL SELECT account_id, :id::uuid, 'charge', charge FROM r WHERE charge > 0
     )
     SELECT count(*)::int AS n, max(lag) AS lag, (SELECT count(pg_notify('${EVENTS_CHANNEL}', '')) FROM (SELECT 1 FROM w LIMIT 1) x)::int AS events FROM r`,
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
      uncovered_credits: c.uncovered_credits,
      // the route that answered (text requests with fallback) is the request's provider
      route: report.routing ? JSON.stringify(report.routing) : null,
      route_provider: report.routing?.provider ?? null,
      is_estimate: c.is_estimate,
    },
  );
  const applied = result.rows[0].n === 1;
  if (!applied) {
    const now = await db('reservations').where({ id: reservationId }).first();
    return { reservationId, status: now.status, billingSource: now.billing_source, charge: normalize(now.charge), applied: false };
  }
  holdsResolved.inc({ status });
  // Outcomes the sweeper settles were never recorded (no reported_at): no lag to observe.
  if (result.rows[0].lag !== null) settlementLag.observe(result.rows[0].lag);
  return { reservationId, status, billingSource: c.billing_source, charge: c.charge, applied };
}

export interface AbandonmentRule {
  /** a process whose heartbeat is older than this is dead */
  deadAfterMs: number;
  /** holds taken before processes were recorded (no api_process_id): released past this age */
  unrecordedOlderThanMs: number;
}

export interface HeldRow {
  id: string;
  owner_workflow_id: string | null;
  created_at: Date;
}

/**
 * Held reservations without a recorded outcome whose API process is dead (or gone), oldest first, a page at a time after
 * `after`: candidates for the hold sweeper. Age alone never makes a hold a candidate, nor a heartbeat that stopped
 * because PostgreSQL was down (a crash and restart).
 */
export async function holdsOfDeadProcesses(db: Db, rule: AbandonmentRule, after: HeldRow | null, limit = 500): Promise<HeldRow[]> {
  const r = await db.raw(
    `SELECT r.id, r.owner_workflow_id, r.created_at FROM reservations r
     LEFT JOIN api_processes p ON p.id = r.api_process_id
     WHERE r.status = 'held'
       AND (r.created_at, r.id) > (:after_at::timestamptz, :after_id::uuid)
       AND CASE WHEN r.api_process_id IS NULL THEN r.created_at < now() - make_interval(secs => :unrecorded::float8 / 1000)
                -- a process row missing: gone (stopped), or not registered yet (its database was down at start).
                -- No heartbeat could be written while PostgreSQL itself was down: none is taken for dead
                -- until the server has been up that long.
                ELSE COALESCE(p.heartbeat_at, r.created_at) < now() - make_interval(secs => :dead::float8 / 1000)
                  AND pg_postmaster_start_time() < now() - make_interval(secs => :dead::float8 / 1000) END
       AND r.report IS NULL
     ORDER BY r.created_at, r.id
     LIMIT :limit`,
    {
      after_at: after?.created_at ?? new Date(0),
      after_id: after?.id ?? '00000000-0000-0000-0000-000000000000',
      unrecorded: rule.unrecordedOlderThanMs,
      dead: rule.deadAfterMs,
      limit,
    },
  );
  return r.rows;
}

/** The charge of a settled (or released) reservation; null while it is held or unknown. */
export async function settledChargeOf(db: Db, reservationId: string): Promise<string | null> {
  const r = await db('reservations').where({ id: reservationId }).first('status', 'charge');
  return r && r.status !== 'held' ? r.charge : null;
}
