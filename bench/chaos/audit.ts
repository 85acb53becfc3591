import Decimal from 'decimal.js';
import { tablePrice, type Tariff } from '../../domain/credits/pricing';
import type { Routing } from '../../domain/credits/reservation';
import type { Db } from '../../platform/db';
import type { Sent } from './load';

// The money audit of `npm run chaos` and `npm run topology`, after a fault: no reservation charged
// twice, every answered request charged exactly once with the charge its answer showed (and, given
// the prices, at the table price of the model that answered, or its cache-hit price for an answer
// from the response cache), no hold left, ledger drift 0, the keyed key's spend within its limit
// (keyedKeyId null: no keyed key).


export interface Checks {
  doubleCharged: number;
  chargeRowMismatch: number;
  answered: number;
  answeredNotChargedOnce: string[];
  holdsLeft: number;
  drift: string;
  keySpend: string;
  keySpendMax: string;
  keyLimit: string;
  keyOk: boolean;
  recreated: number;
  abandoned: number;
  /** answered requests whose charge was checked against their answering model's price */
  priced: number;
  /** per mix entry (Sent.kind): requests, answered, answered by a fallback model, after a retry, from the response cache, the others by outcome */
  mix: Record<string, { sent: number; answered: number; fellBack: number; retried: number; cacheHits: number; unanswered: Record<string, number> }>;
}

/** A model's prices: its tariff and its response-cache hit price (models.cache_hit_credits). */
export type Prices = Tariff & { cache_hit_credits: string };

/** What settlement charges an answer without a provider cost: the cache-hit price, else the table price to the 12 places the ledger keeps. */
const priceOf = (p: Prices, s: Sent, u: { prompt_tokens: number; completion_tokens: number }) =>
  s.cacheHit ? new Decimal(p.cache_hit_credits) : tablePrice(p, { ...u, cached_tokens: 0, cache_write_tokens: 0, reasoning_tokens: null }).total.toDecimalPlaces(12);

/** prices: the catalog's, by model id; given, a non-streaming answer's charge must be its answering model's price. */
export async function check(db: Db, accountIds: string[], keyedKeyId: string | null, sent: Sent[], keySpendMax: Decimal, prices?: Map<string, Prices>): Promise<Checks> {
  const dup = await db.raw(
    `SELECT count(*)::int AS n FROM (SELECT reservation_id, kind FROM ledger WHERE account_id = ANY(?::uuid[]) AND reservation_id IS NOT NULL
       GROUP BY 1, 2 HAVING count(*) > 1) d`,
    [accountIds],
  );
  const mismatch = await db.raw(
    `SELECT count(*)::int AS n FROM reservations r
     LEFT JOIN ledger c ON c.reservation_id = r.id AND c.kind = 'charge'
     LEFT JOIN ledger rel ON rel.reservation_id = r.id AND rel.kind = 'release'
     LEFT JOIN ledger h ON h.reservation_id = r.id AND h.kind = 'hold'
     WHERE r.account_id = ANY(?::uuid[]) AND (h.id IS NULL OR h.amount <> r.held_credits
       OR (r.status <> 'held' AND (rel.id IS NULL OR COALESCE(c.amount, 0) <> COALESCE(r.charge, 0))))`,
    [accountIds],
  );
  const drift = await db.raw(
    `SELECT COALESCE(sum(abs(a.total_usage - l.usage) + abs(a.total_credits - l.grants) + abs(a.reserved_credits - r.held)), 0) AS drift,
            COALESCE(sum(abs(a.pending_requests - r.n)), 0) AS pending_drift
     FROM accounts a
     CROSS JOIN LATERAL (SELECT COALESCE(sum(amount) FILTER (WHERE kind = 'grant'), 0) AS grants,
       COALESCE(sum(amount) FILTER (WHERE kind = 'hold'), 0) - COALESCE(sum(amount) FILTER (WHERE kind = 'release'), 0)
         + COALESCE(sum(amount) FILTER (WHERE kind = 'charge'), 0) AS usage FROM ledger WHERE account_id = a.id) l
     CROSS JOIN LATERAL (SELECT COALESCE(sum(held_credits), 0) AS held, count(*) AS n FROM reservations WHERE account_id = a.id AND status = 'held') r
     WHERE a.id = ANY(?::uuid[])`,
    [accountIds],
  );
  const counts = await db.raw(
    `SELECT count(*) FILTER (WHERE status = 'held')::int AS held, count(*) FILTER (WHERE hold_recreated_at IS NOT NULL)::int AS recreated,
            count(*) FILTER (WHERE outcome = 'abandoned')::int AS abandoned
     FROM reservations WHERE account_id = ANY(?::uuid[])`,
    [accountIds],
  );
  const answered = sent.filter((s) => s.answered && s.id);
  const rows = new Map<string, { status: string; charge: string | null; charges: number; route: Routing | null }>();
  for (let i = 0; i < answered.length; i += 500) {
    const ids = answered.slice(i, i + 500).map((s) => s.id!);
    const r = await db.raw(
      `SELECT r.id, r.status, r.charge, r.route, (SELECT count(*)::int FROM ledger WHERE reservation_id = r.id AND kind = 'charge') AS charges
       FROM reservations r WHERE r.id = ANY(?::uuid[])`,
      [ids],
    );
    for (const row of r.rows) rows.set(row.id, row);
  }
  const bad: string[] = [];
  let pricedCount = 0;
  const mix: Checks['mix'] = {};
  for (const s of sent) {
    if (!s.kind) continue;
    const m = (mix[s.kind] ??= { sent: 0, answered: 0, fellBack: 0, retried: 0, cacheHits: 0, unanswered: {} });
    m.sent++;
    if (!s.answered) {
      const why = `${s.status || 'no answer'} ${s.error ?? ''}`.trim();
      m.unanswered[why] = (m.unanswered[why] ?? 0) + 1;
      continue;
    }
    m.answered++;
    // a cache hit tried no route: its reservation has none
    const route = s.id ? rows.get(s.id)?.route : null;
    if (route?.model && route.model !== s.asked) m.fellBack++;
    if (route?.attempts.some((a) => a.retry)) m.retried++;
    if (s.cacheHit) m.cacheHits++;
  }
  for (const s of answered) {
    const row = rows.get(s.id!);
    const shown = s.cost === null ? null : new Decimal(s.cost);
    // the model that answered: the reservation's route names it (the answer's own name may be the upstream one); a cache hit's is the one asked
    const model = s.cacheHit ? s.asked : row?.route?.model;
    const price = model ? prices?.get(model) : undefined;
    const priced = !price || !s.usage || (row?.charge != null && new Decimal(row.charge).eq(priceOf(price, s, s.usage)));
    if (price && s.usage) pricedCount++;
    const ok =
      priced &&
      row &&
      row.status === 'settled' &&
      row.charges === 1 &&
      row.charge !== null &&
      new Decimal(row.charge).gt(0) &&
      (shown === null || (s.stream ? new Decimal(row.charge).minus(shown).abs().lt('1e-9') : new Decimal(row.charge).eq(shown)));
    if (!ok) bad.push(`${s.id} (${s.stream ? 'stream' : 'non-streaming'} ${s.kind ?? ''} ${s.asked} answered by ${model ?? s.model}${s.cacheHit ? ' from the cache' : ''}, answer showed ${s.cost}${priced ? '' : ', NOT its price'}, ended ${new Date(s.endedAt).toISOString()}; row ${row ? `${row.status} ${row.charge}, ${row.charges} charge row(s)` : 'missing'})`);
  }
  let keySpend = '—';
  let keyLimit = '—';
  let keyOk = true;
  if (keyedKeyId) {
    const k = await db.raw(
      `SELECT k.spend, k.spend_limit, k.spend - (SELECT COALESCE(sum(CASE WHEN status = 'held' THEN held_credits ELSE charge END), 0)
         FROM reservations WHERE key_id = k.id AND key_spend_tracked) AS drift
       FROM api_keys k WHERE k.id = ?`,
      [keyedKeyId],
    );
    const row = k.rows[0];
    keySpend = new Decimal(row.spend).toFixed();
    keyLimit = new Decimal(row.spend_limit).toFixed();
    keyOk = new Decimal(row.spend).lte(row.spend_limit) && keySpendMax.lte(row.spend_limit) && new Decimal(row.drift).eq(0);
    if (!new Decimal(row.drift).eq(0)) keySpend += ` (drift ${row.drift})`;
  }
  const d = drift.rows[0];
  return {
    doubleCharged: dup.rows[0].n,
    chargeRowMismatch: mismatch.rows[0].n,
    answered: answered.length,
    answeredNotChargedOnce: bad,
    holdsLeft: counts.rows[0].held,
    drift: new Decimal(d.drift).plus(d.pending_drift).toFixed(),
    keySpend,
    keySpendMax: keySpendMax.toFixed(),
    keyLimit,
    keyOk,
    recreated: counts.rows[0].recreated,
    abandoned: counts.rows[0].abandoned,
    priced: pricedCount,
    mix,
  };
}

export const passed = (c: Checks) => c.doubleCharged === 0 && c.chargeRowMismatch === 0 && c.answeredNotChargedOnce.length === 0 && c.holdsLeft === 0 && c.drift === '0' && c.keyOk;
