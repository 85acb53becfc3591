import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { Db } from '../../platform/db';
import { registry as processRegistry } from '../../platform/metrics';

/** Holds resolved by settlement (in the process running the credits worker), by final status. */
export const holdsResolved = new Counter({
  name: 'credits_holds_resolved_total',
  help: 'Holds resolved by settlement, by status: settled (charged), released (nothing billed), cancelled',
  labelNames: ['status'] as const,
  registers: [processRegistry],
});

/** From the outcome's record (the answer's end) to the settlement's commit. */
export const settlementLag = new Histogram({
  name: 'credits_settlement_lag_seconds',
  help: 'Seconds from a recorded outcome (the answer ended) to its settlement commit',
  buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900],
  registers: [processRegistry],
});

/** Tokens of settled requests the provider processed (cache hits excluded), by model, provider and type. */
export const tokensSettled = new Counter({
  name: 'gateway_tokens_total',
  help: 'Tokens of settled requests by model, provider (the route that answered) and type: input, output, cached (part of input), reasoning (part of output); answers from the response cache are not counted',
  labelNames: ['model', 'provider', 'type'] as const,
  registers: [processRegistry],
});

/** Credits charged by settlement, by model and provider (`cache` for answers from the response cache). */
export const creditsCharged = new Counter({
  name: 'gateway_credits_charged_total',
  help: 'Credits charged by settlement, by model and provider (the route that answered; cache for response-cache hits)',
  labelNames: ['model', 'provider'] as const,
  registers: [processRegistry],
});

const CACHE_MS = 5000;
const state: { db: Db | null; at: number } = { db: null, at: 0 };

/**
 * Credits gauges read from PostgreSQL at scrape time (only held rows: the partial outbox indexes
 * cover them), cached a few seconds. Registered once per registry; the latest gateway's db wins.
 */
export function registerCreditsGauges(registry: Registry, db: Db): void {
  state.db = db;
  if (registry.getSingleMetric('credits_holds_open')) return;
  const open = new Gauge({ name: 'credits_holds_open', help: 'Reservations still held (not settled, released or cancelled)', registers: [registry], collect: () => refresh() });
  const held = new Gauge({ name: 'credits_held', help: 'Credits held by open reservations (sum of held_credits)', registers: [registry] });
  const backlog = new Gauge({ name: 'credits_outbox_backlog', help: 'Recorded outcomes the settlement relay has not claimed yet', registers: [registry] });
  const claimed = new Gauge({ name: 'credits_outbox_claimed_unsettled', help: 'Claimed outcomes whose settlement workflow has not settled them yet', registers: [registry] });
  const oldest = new Gauge({ name: 'credits_outbox_oldest_seconds', help: 'Age of the oldest unclaimed recorded outcome (settlement lag of the backlog)', registers: [registry] });
  async function refresh() {
    if (Date.now() - state.at < CACHE_MS || !state.db) return;
    state.at = Date.now();
    type Row = { open: number; held: string | null; backlog: number; claimed: number; oldest: number | null };
    // The database down: the scrape still answers (the outcome journal's gauges matter most then), these keep their last values.
    const rows: Row[] | null = await state.db.raw(`
      SELECT h.open, h.held, o.backlog, o.claimed, o.oldest
        FROM (SELECT count(*)::int AS open, sum(held_credits)::text AS held FROM reservations WHERE status = 'held') h,
             (SELECT (count(*) FILTER (WHERE workflow_id IS NULL))::int AS backlog, (count(*) FILTER (WHERE workflow_id IS NOT NULL))::int AS claimed,
                     extract(epoch FROM now() - min(recorded_at) FILTER (WHERE workflow_id IS NULL))::float8 AS oldest FROM settlement_outbox) o`).then((r: { rows: Row[] }) => r.rows, () => null);
    if (!rows) return;
    const r = rows[0];
    open.set(r.open);
    held.set(Number(r.held ?? 0)); // a Prometheus sample is a float anyway; storage stays exact
    backlog.set(r.backlog);
    claimed.set(r.claimed);
    oldest.set(r.oldest ?? 0);
  }
}
