import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { parseCurrency, parsePeriod, periodOf, rateUsage, subtract, sum, toCsv, type PlanUsage, type StatementLine } from '../../../domain/panel/billing';
import { invalid, PanelError } from '../../../domain/panel/errors';
import type { Db } from '../../../platform/db';
import type { Actor } from '../shared/actor';
import { findInScope } from '../shared/chain';
import { planOf, ratingPlans, type Clock } from './plans';

// Statements (spec 2 sections 2.8, 3): an org's month rated from its metered hours. While the
// month runs (or until it is closed) it is an Estimate, rated with the plans as they are now; Close
// month writes it once into panel_statements, which never changes afterwards (a trigger refuses
// updates), so a second close reads the same row. A reseller's page adds what it bills the orgs
// below it and its margin (billed to them minus billed to it), per currency.

type Q = Knex | Knex.Transaction;

export interface Statement {
  org_id: string;
  org_name: string;
  org_status: string;
  period: string;
  state: 'estimate' | 'closed';
  billed_by: string | null;
  metered_hours: number;
  plans: Array<{ plan_id: string; plan: string; currency: string; hours: number }>;
  lines: StatementLine[];
  /** one total per currency (a plan change to another currency mid-month keeps them apart) */
  totals: Record<string, string>;
  closed_at: Date | null;
}

export interface BillingSettings {
  /** -billing-meter: the hourly metering runs */
  metering: boolean;
  clock: Clock;
}

/** A period the caller may read: well-formed and not after the running month. */
export function readablePeriod(value: unknown, now: Date) {
  const p = parsePeriod(value ?? periodOf(now));
  if (p.start > now) throw invalid('period', `${p.period} is in the future (the running month is ${periodOf(now)})`);
  return p;
}

/** The metered usage of `orgIds` in [start, end), per org and plan, in one query per table. */
async function usageOf(q: Q, orgIds: string[], start: Date, end: Date) {
  const queries = [
    `SELECT org_id, plan_id, count(*)::int AS hours, (array_agg(billed_by ORDER BY hour DESC))[1] AS billed_by, (array_agg(org_status ORDER BY hour DESC))[1] AS status, max(hour) AS last
     FROM panel_meter_orgs WHERE org_id = ANY(?::uuid[]) AND hour >= ? AND hour < ? GROUP BY org_id, plan_id`,
    `SELECT m.org_id, m.plan_id, kv.key AS pkg, sum(kv.value::int)::int AS n FROM panel_meter_orgs m CROSS JOIN LATERAL jsonb_each_text(m.accounts) kv
     WHERE m.org_id = ANY(?::uuid[]) AND m.hour >= ? AND m.hour < ? GROUP BY 1, 2, 3`,
    `SELECT s.org_id, m.plan_id, s.node_name, s.region, s.physical_region, s.zone, s.cell, count(*)::int AS n, sum(s.quota_mb)::bigint AS mb,
       sum(s.cpu_us)::text AS cpu_us, sum(s.memory_peak_bytes)::text AS memory_peak_bytes
     FROM panel_meter_sites s JOIN panel_meter_orgs m ON m.hour = s.hour AND m.org_id = s.org_id
     WHERE s.org_id = ANY(?::uuid[]) AND s.hour >= ? AND s.hour < ? GROUP BY 1, 2, 3, 4, 5, 6, 7`,
    `SELECT d.org_id, m.plan_id, d.node_name, d.region, d.physical_region, d.zone, d.cell, count(*)::int AS n
     FROM panel_meter_databases d JOIN panel_meter_orgs m ON m.hour = d.hour AND m.org_id = d.org_id
     WHERE d.org_id = ANY(?::uuid[]) AND d.hour >= ? AND d.hour < ? GROUP BY 1, 2, 3, 4, 5, 6, 7`,
  ];
  // one after the other: inside a transaction they share its one connection
  const results = [];
  for (const sql of queries) results.push((await q.raw(sql, [orgIds, start, end])).rows);
  const [hours, accounts, sites, databases] = results;
  const byOrg = new Map<string, { billedBy: string; status: string; last: Date; usage: Map<string, PlanUsage> }>();
  for (const r of hours) {
    const o = byOrg.get(r.org_id) ?? { billedBy: r.billed_by, status: r.status, last: r.last, usage: new Map() };
    if (r.last > o.last) Object.assign(o, { billedBy: r.billed_by, status: r.status, last: r.last });
    o.usage.set(r.plan_id, { planId: r.plan_id, hours: r.hours, accountHours: {}, nodes: [] });
    byOrg.set(r.org_id, o);
  }
  const planUsage = (r: { org_id: string; plan_id: string }) => byOrg.get(r.org_id)!.usage.get(r.plan_id)!;
  for (const r of accounts) planUsage(r).accountHours[r.pkg] = r.n;
  const node = (u: PlanUsage, r: Record<string, string | null>) => {
    let n = u.nodes.find((x) => x.node === r.node_name && x.region === r.region && x.physical_region === r.physical_region && x.zone === r.zone && x.cell === r.cell);
    if (!n) {
      n = { node: r.node_name!, region: r.region, physical_region: r.physical_region, zone: r.zone, cell: r.cell, siteHours: 0, databaseHours: 0, diskMbHours: 0 };
      u.nodes.push(n);
    }
    return n;
  };
  for (const r of sites) Object.assign(node(planUsage(r), r), { siteHours: r.n, diskMbHours: Number(r.mb), cpuUs: r.cpu_us, memoryPeakByteHours: r.memory_peak_bytes });
  for (const r of databases) node(planUsage(r), r).databaseHours = r.n;
  return byOrg;
}

/** The estimates of `orgs` for a period (orgs without metered hours get none), rated with the plans as they are now. */
async function estimates(q: Q, orgs: Array<{ id: string; name: string; status: string }>, p: ReturnType<typeof parsePeriod>): Promise<Statement[]> {
  const usage = await usageOf(q, orgs.map((o) => o.id), p.start, p.end);
  const plans = await ratingPlans(q, [...new Set([...usage.values()].flatMap((u) => [...u.usage.keys()]))]);
  return orgs.flatMap((o) => {
    const u = usage.get(o.id);
    if (!u) return [];
    const used = [...u.usage.values()].sort((a, b) => a.planId.localeCompare(b.planId));
    const rated = rateUsage(used, plans, p.hours);
    return [
      {
        org_id: o.id,
        org_name: o.name,
        org_status: u.status,
        period: p.period,
        state: 'estimate' as const,
        billed_by: u.billedBy,
        metered_hours: used.reduce((s, x) => s + x.hours, 0),
        plans: used.map((x) => ({ plan_id: x.planId, plan: plans.get(x.planId)?.name ?? '(unknown plan)', currency: plans.get(x.planId)?.currency ?? '', hours: x.hours })),
        lines: rated.lines,
        totals: rated.totals,
        closed_at: null,
      },
    ];
  });
}

const closedView = (r: Record<string, never>): Statement => ({
  org_id: r.org_id,
  org_name: r.org_name,
  org_status: r.org_status,
  period: r.period,
  state: 'closed',
  billed_by: r.billed_by,
  metered_hours: r.metered_hours,
  plans: r.plans,
  lines: r.lines,
  totals: r.totals,
  closed_at: r.closed_at,
});

/** The statements of `orgs` for a period: the closed one where written, else the estimate. */
async function statementsOf(q: Q, orgs: Array<{ id: string; name: string; status: string }>, p: ReturnType<typeof parsePeriod>): Promise<Statement[]> {
  const closed = new Map<string, Statement>(
    (await q('panel_statements').whereIn('org_id', orgs.map((o) => o.id)).where({ period: p.period })).map((r) => [r.org_id, closedView(r)]),
  );
  const open = await estimates(q, orgs.filter((o) => !closed.has(o.id)), p);
  const byId = new Map([...closed.values(), ...open].map((s) => [s.org_id, s]));
  return orgs.flatMap((o) => byId.get(o.id) ?? []);
}

/** The statement of org `id` for a period (default the running month), closed or estimate; null if it was not billed then. */
export async function statement(db: Db, actor: Actor, id: string, period: unknown, s: BillingSettings) {
  const org = await findInScope(db, actor, id);
  const p = readablePeriod(period, s.clock());
  const [st] = await statementsOf(db, [org], p);
  return st ?? null;
}

/** The orgs that org `orgId` billed in a period (metered under its plans, or closed by it). */
async function billedOrgs(q: Q, orgId: string, p: ReturnType<typeof parsePeriod>) {
  return q('panel_orgs')
    .whereIn('id', q('panel_meter_orgs').distinct('org_id').where({ billed_by: orgId }).where('hour', '>=', p.start).where('hour', '<', p.end))
    .orWhereIn('id', q('panel_statements').select('org_id').where({ billed_by: orgId, period: p.period }))
    .orderBy('name')
    .select('id', 'name', 'status');
}

/**
 * The billing page of an org (console `/orgs/{id}/billing`): whether usage is metered, its plan now
 * and next, its own statement (what the level above bills it), the statements of the orgs it
 * bills, and its margin per currency (billed to them minus billed to it).
 */
export async function billingPage(db: Db, actor: Actor, id: string, period: unknown, s: BillingSettings) {
  const org = await findInScope(db, actor, id);
  const now = s.clock();
  const p = readablePeriod(period, now);
  const [own] = await statementsOf(db, [org], p);
  const below = await statementsOf(db, await billedOrgs(db, org.id, p), p);
  const currencies = new Set([...Object.keys(own?.totals ?? {}), ...below.flatMap((b) => Object.keys(b.totals))]);
  const digits = (c: string) => parseCurrency(c).minorUnits;
  const billedToCustomers: Record<string, string> = {};
  const margin: Record<string, string> = {};
  for (const c of currencies) {
    billedToCustomers[c] = sum(below.flatMap((b) => b.totals[c] ?? []), digits(c));
    margin[c] = subtract(billedToCustomers[c], own?.totals[c] ?? '0', digits(c));
  }
  return {
    org_id: org.id,
    period: p.period,
    metering: s.metering ? { on: true, message: 'usage is metered hourly' } : { on: false, message: 'usage is not being metered (the panel runs without -billing-meter)' },
    plan: await planOf(db, org.id, now),
    statement: own ?? null,
    billed_orgs: below.map((b) => ({ org_id: b.org_id, org_name: b.org_name, org_status: b.org_status, state: b.state, metered_hours: b.metered_hours, totals: b.totals })),
    billed_to_customers: billedToCustomers,
    billed_to_it: own?.totals ?? {},
    margin,
  };
}

/**
 * Checks a close of org `id`'s month by the actor (the level above it): the month has ended (UTC),
 * the final confirmation is given, and the org was billed in it. Returns the validated period.
 */
export async function checkClose(db: Db, actor: Actor, id: string, period: unknown, confirm: boolean, s: BillingSettings) {
  const org = await findInScope(db, actor, id, { strictlyBelow: true });
  const now = s.clock();
  const p = parsePeriod(period);
  if (p.end > now) throw new PanelError('conflict', { field: 'period', detail: `the month ${p.period} has not ended yet (UTC); it can be closed from ${p.end.toISOString()}` });
  if (!confirm) throw invalid('confirm', 'closing a month is final: tick the final confirmation (confirm: true)');
  if (!s.metering) throw new PanelError('conflict', { detail: 'usage is not being metered (the panel runs without -billing-meter), so there is nothing to close' });
  const metered = await db('panel_meter_orgs').where({ org_id: org.id }).where('hour', '>=', p.start).where('hour', '<', p.end).first('hour');
  const closed = await db('panel_statements').where({ org_id: org.id, period: p.period }).first('id');
  if (!metered && !closed) throw new PanelError('conflict', { field: 'period', detail: `the organisation was not billed in ${p.period}` });
  return { org, period: p.period };
}

/** Writes org `orgId`'s closed statement for `period` once (rated with the plans as they are now) and returns it; a repeat returns the same row. */
export async function closeStatement(db: Db, orgId: string, period: string): Promise<Statement> {
  const p = parsePeriod(period);
  return db.transaction(async (trx) => {
    const existing = await trx('panel_statements').where({ org_id: orgId, period: p.period }).first();
    if (existing) return closedView(existing);
    const org = await trx('panel_orgs').where({ id: orgId }).first('id', 'name', 'status');
    const [est] = await estimates(trx, [org], p);
    if (!est) throw new Error(`org ${orgId} has no metered hours in ${p.period}`);
    await trx.raw(
      `INSERT INTO panel_statements (id, org_id, period, billed_by, org_name, org_status, metered_hours, plans, lines, totals)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (org_id, period) DO NOTHING`,
      [randomUUID(), orgId, p.period, est.billed_by, est.org_name, est.org_status, est.metered_hours, JSON.stringify(est.plans), JSON.stringify(est.lines), JSON.stringify(est.totals)],
    );
    return closedView(await trx('panel_statements').where({ org_id: orgId, period: p.period }).first());
  });
}

/** The issued (closed) statements of the orgs billed by org `id` in a month (the API-token export). */
export async function issuedStatements(db: Db, actor: Actor, id: string, period: unknown, s: BillingSettings) {
  const org = await findInScope(db, actor, id);
  const p = readablePeriod(period, s.clock());
  const rows = await db('panel_statements').where({ billed_by: org.id, period: p.period }).orderBy('org_name');
  return { org_id: org.id, period: p.period, statements: rows.map(closedView) };
}

/** The closed statements of org `id` and of the orgs it billed, newest month first (the console's statements list). */
export async function closedStatements(db: Db, actor: Actor, id: string) {
  const org = await findInScope(db, actor, id);
  const rows = await db('panel_statements')
    .where((w) => w.where({ org_id: org.id }).orWhere({ billed_by: org.id }))
    .orderBy([{ column: 'period', order: 'desc' }, { column: 'org_name' }])
    .limit(STATEMENTS_LISTED);
  return { org_id: org.id, statements: rows.map((r) => ({ org_id: r.org_id, org_name: r.org_name, period: r.period, billed_by: r.billed_by, metered_hours: r.metered_hours, totals: r.totals, closed_at: r.closed_at })) };
}

/** how many closed statements the list shows (a reseller with many accounts reads older ones per month or by the issued export) */
const STATEMENTS_LISTED = 500;

const SUMMARY = ['org_id', 'org_name', 'org_status', 'period', 'state', 'metered_hours', 'currency', 'amount'];
const LINE = ['org_id', 'period', 'plan', 'kind', 'detail', 'quantity_hours', 'unit_price', 'currency', 'amount'];

/** A statement as CSV: one row per line, then one total row per currency (kind `total`). */
export function statementCsv(st: Statement): string {
  const rows = st.lines.map((l) => [st.org_id, st.period, l.plan, l.kind, l.detail, l.quantity_hours, l.unit_price, l.currency, l.amount]);
  for (const [c, amount] of Object.entries(st.totals)) rows.push([st.org_id, st.period, '', 'total', `${st.metered_hours} metered hours (${st.state})`, '', '', c, amount]);
  return toCsv(LINE, rows);
}

/** Statements as CSV: one row per statement and currency (org, status, metered hours, amount). */
export const statementsCsv = (sts: Statement[]): string =>
  toCsv(
    SUMMARY,
    sts.flatMap((st) => Object.entries(st.totals).map(([c, amount]) => [st.org_id, st.org_name, st.org_status, st.period, st.state, st.metered_hours, c, amount])),
  );
