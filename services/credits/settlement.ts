import { normalize, type Tariff } from '../../domain/credits/pricing';
import { chargeOf, resolvedStatus, type RequestReport, type SettlementResult } from '../../domain/credits/reservation';
import type { Db } from '../../platform/db';
import { EVENT_DELIVERIES, EVENTS_CHANNEL, LOW_BALANCE, REACHED_AT } from '../accounts/event-sql';
import { creditsCharged, holdsResolved, settlementLag, tokensSettled } from './metrics';

/** A hold to settle, with its outcome (absent: the outcome recorded in the outbox). */
export interface ToSettle {
  id: string;
  report?: RequestReport;
}

/** The reservation columns settlement writes, as the batch statement reads them (jsonb_to_recordset). */
const SETTLED_COLUMNS = `ord int, id uuid, status text, billing_source text, outcome text, http_status int, body_id text, latency_ms int, error text,
  prompt_tokens int, completion_tokens int, cached_tokens int, cache_write_tokens int, reasoning_tokens int, usage_details jsonb,
  provider_cost numeric, charge numeric, input_credits numeric, cache_write_credits numeric, cache_read_credits numeric,
  output_credits numeric, pricing_adjustment_credits numeric, uncovered_credits numeric, route jsonb, route_provider text, is_estimate boolean`;

/**
 * The batch, set-based (issue 31), in one statement (its own transaction): first the key rows and
 * then the account rows locked, each in id order (lk, then la: each gates the next through a
 * one-time filter, so no reservation row is touched before both are held); then every reservation
 * by one UPDATE guarded by status = 'held' (taking the claim's workflow id and the recording time
 * from its outbox row, which goes), each key and each account updated once with the batch's sums,
 * the release and charge ledger rows by one INSERT … SELECT, account events by one INSERT. A
 * replayed batch changes nothing. (An UPDATE works on the newest row version, so the
 * statement's snapshot, taken before the lock waits, reads no stale balance.)
 */
const SETTLE_SQL = `WITH lk AS MATERIALIZED (SELECT count(*) AS n FROM (SELECT 1 FROM api_keys WHERE id = ANY(?::uuid[]) ORDER BY id FOR NO KEY UPDATE) x),
  la AS MATERIALIZED (SELECT count(*) AS n FROM (SELECT 1 FROM accounts WHERE id = ANY(?::uuid[]) AND (SELECT n FROM lk) >= 0 ORDER BY id FOR NO KEY UPDATE) y),
  s AS (SELECT s.*, o.workflow_id AS outbox_workflow_id, o.recorded_at FROM jsonb_to_recordset(?::jsonb) AS s(${SETTLED_COLUMNS})
        LEFT JOIN settlement_outbox o ON o.reservation_id = s.id WHERE (SELECT n FROM la) >= 0),
  r AS (
    UPDATE reservations SET status = s.status, billing_source = s.billing_source, outcome = s.outcome,
      http_status = s.http_status, body_id = COALESCE(s.body_id, reservations.body_id), latency_ms = s.latency_ms, error = s.error,
      prompt_tokens = s.prompt_tokens, completion_tokens = s.completion_tokens, cached_tokens = s.cached_tokens,
      cache_write_tokens = s.cache_write_tokens, reasoning_tokens = s.reasoning_tokens,
      usage_details = COALESCE(s.usage_details, reservations.usage_details),
      provider_cost = s.provider_cost, charge = s.charge, input_credits = s.input_credits,
      cache_write_credits = s.cache_write_credits, cache_read_credits = s.cache_read_credits,
      output_credits = s.output_credits, pricing_adjustment_credits = s.pricing_adjustment_credits,
      uncovered_credits = s.uncovered_credits,
      route = COALESCE(s.route, reservations.route), provider = COALESCE(s.route_provider, reservations.provider),
      is_estimate = s.is_estimate, settled_at = now(),
      reported_at = COALESCE(s.recorded_at, reservations.reported_at),
      settlement_workflow_id = COALESCE(s.outbox_workflow_id, reservations.settlement_workflow_id)
    FROM s WHERE reservations.id = s.id AND reservations.status = 'held'
    RETURNING s.ord, reservations.id, reservations.status, reservations.account_id, reservations.key_id, reservations.key_spend_tracked,
      reservations.held_credits, reservations.charge, extract(epoch FROM clock_timestamp() - reservations.reported_at)::float8 AS lag
  ), o AS (
    DELETE FROM settlement_outbox WHERE reservation_id IN (SELECT id FROM r)
  ), k AS (
    UPDATE api_keys SET spend = spend + d.spend_delta, spend_limit_reached_at = ${REACHED_AT}
    FROM (SELECT key_id, sum(charge - held_credits) AS spend_delta, (array_agg(id::text ORDER BY ord DESC))[1] AS request_id
          FROM r WHERE key_spend_tracked GROUP BY key_id) d
    WHERE api_keys.id = d.key_id
    RETURNING api_keys.id, api_keys.account_id, api_keys.spend, api_keys.spend_limit, d.request_id,
      api_keys.spend_limit_reached_at = statement_timestamp() AS reached
  ), a AS (
    UPDATE accounts SET total_usage = total_usage + d.usage_delta, reserved_credits = reserved_credits - d.held,
      pending_requests = pending_requests - d.n,
      ${LOW_BALANCE}
    FROM (SELECT account_id, sum(charge - held_credits) AS usage_delta, sum(held_credits) AS held, count(*) AS n,
            (array_agg(id::text ORDER BY ord DESC))[1] AS request_id
          FROM r GROUP BY account_id) d
    WHERE accounts.id = d.account_id
    RETURNING accounts.id, accounts.total_credits - accounts.total_usage AS balance, accounts.low_balance_threshold, d.request_id,
      accounts.low_balance_crossed_at = statement_timestamp() AS crossed
  ), w AS (${EVENT_DELIVERIES}
  ), l AS (
    INSERT INTO ledger (account_id, reservation_id, kind, amount)
    SELECT account_id, id, 'release', held_credits FROM r
    UNION ALL SELECT account_id, id, 'charge', charge FROM r WHERE charge > 0
  )
  SELECT r.id, r.status, r.lag, (SELECT count(pg_notify('${EVENTS_CHANNEL}', '')) FROM (SELECT 1 FROM w LIMIT 1) x)::int AS events
  FROM r`;

/**
 * Settlement: the only writer of release and charge rows. A batch of holds (one, for the sweeper
 * and reservation workflows) is settled by one statement after one read,
 * guarded by status = 'held', so however often it is retried each hold resolves exactly once. A
 * hold that also raised its key's spend (keyed variant) has the key's spend corrected from the
 * hold to the charge. The key and account rows are locked first, keys then accounts, each by id:
 * the order the holds use (migrations/202612310201_credits_hold_batches.ts), so none deadlock.
 * Returns one result per item, in order (applied false: resolved already, or no outcome to settle from).
 */
export async function settleReservations(db: Db, items: ToSettle[]): Promise<SettlementResult[]> {
  const rows: Array<Tariff & { id: string; status: string; account_id: string; key_id: string; key_spend_tracked: boolean; model: string; provider: string; held_credits: string; complimentary: boolean; report: RequestReport | null }> =
    await db('reservations as r').leftJoin('settlement_outbox as o', 'o.reservation_id', 'r.id').whereIn('r.id', items.map((i) => i.id)).select('r.*', db.raw('COALESCE(o.report, r.report) AS report'));
  const byId = new Map(rows.map((r) => [r.id as string, r]));
  const decided = new Map<string, { status: SettlementResult['status']; billingSource: string; charge: string }>();
  const batch: Array<Record<string, unknown>> = [];
  items.forEach(({ id, report: given }, ord) => {
    const row = byId.get(id);
    if (!row) throw new Error(`reservation ${id} not found`);
    const report = given ?? row.report;
    if (row.status !== 'held' || !report || decided.has(id)) return;
    const c = chargeOf({ tariff: row, held: row.held_credits, complimentary: row.complimentary }, report);
    const status = resolvedStatus(report, c);
    decided.set(id, { status, billingSource: c.billing_source, charge: c.charge });
    const u = report.usage;
    batch.push({
      ord, id, status,
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
      usage_details: report.usageDetails ?? null,
      provider_cost: report.providerCost,
      charge: c.charge,
      input_credits: c.input_credits,
      cache_write_credits: c.cache_write_credits,
      cache_read_credits: c.cache_read_credits,
      output_credits: c.output_credits,
      pricing_adjustment_credits: c.pricing_adjustment_credits,
      uncovered_credits: c.uncovered_credits,
      // the route that answered (text requests with fallback) is the request's provider
      route: report.routing ?? null,
      route_provider: report.routing?.provider ?? null,
      is_estimate: c.is_estimate,
    });
  });
  const applied = new Set<string>();
  if (batch.length) {
    const held = batch.map((b) => byId.get(b.id as string)!);
    const keys = [...new Set(held.filter((r) => r.key_spend_tracked).map((r) => r.key_id))].sort();
    const accounts = [...new Set(held.map((r) => r.account_id))].sort();
    const settled = (await db.raw(SETTLE_SQL, [keys, accounts, JSON.stringify(batch)])).rows as Array<{ id: string; status: SettlementResult['status']; lag: number | null }>;
    const written = new Map(batch.map((b) => [b.id as string, b]));
    for (const r of settled) {
      applied.add(r.id);
      holdsResolved.inc({ status: r.status });
      countSettled(byId.get(r.id)!, written.get(r.id)!);
      // Outcomes the sweeper settles were never recorded (no reported_at): no lag to observe.
      if (r.lag !== null) settlementLag.observe(r.lag);
    }
  }
  // Those not applied here: what their row says now (resolved by an earlier attempt, or not yet reported).
  const missed = items.filter((i) => !applied.has(i.id)).map((i) => i.id);
  const now = new Map<string, { id: string; status: SettlementResult['status']; billing_source: string; charge: string | null }>(missed.length ? (await db('reservations').whereIn('id', missed).select('id', 'status', 'billing_source', 'charge')).map((r) => [r.id, r]) : []);
  // An outcome recorded while another path resolved its hold (the sweeper) has no settlement left to do.
  const resolved = [...now.values()].filter((r) => (r.status as string) !== 'held' && byId.get(r.id)?.report).map((r) => r.id);
  if (resolved.length) await db('settlement_outbox').whereIn('reservation_id', resolved).delete();
  return items.map(({ id }) => {
    const d = decided.get(id);
    if (applied.has(id) && d) return { reservationId: id, status: d.status, billingSource: d.billingSource, charge: d.charge, applied: true };
    const r = now.get(id)!;
    return { reservationId: id, status: r.status, billingSource: r.billing_source, charge: r.charge === null ? '0' : normalize(r.charge), applied: false };
  });
}

/** The token and credit counters of a settled request (once: only for rows this statement resolved). */
function countSettled(row: { model: string; provider: string }, b: Record<string, unknown>): void {
  const cached = b.billing_source === 'cache';
  const labels = { model: row.model, provider: cached ? 'cache' : ((b.route_provider as string | null) ?? row.provider) };
  if (Number(b.charge) > 0) creditsCharged.inc(labels, Number(b.charge)); // a Prometheus sample is a float; the ledger stays exact
  if (cached) return;
  const counts: Array<[string, unknown]> = [['input', b.prompt_tokens], ['output', b.completion_tokens], ['cached', b.cached_tokens], ['reasoning', b.reasoning_tokens]];
  for (const [type, n] of counts) if (typeof n === 'number' && n > 0) tokensSettled.inc({ ...labels, type }, n);
}

/** Settles one hold from the given outcome (a batch of one). */
export async function settleReservation(db: Db, reservationId: string, report: RequestReport): Promise<SettlementResult> {
  return (await settleReservations(db, [{ id: reservationId, report }]))[0];
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
       AND r.report IS NULL AND NOT EXISTS (SELECT 1 FROM settlement_outbox o WHERE o.reservation_id = r.id)
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
