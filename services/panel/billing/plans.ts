import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { hourOf, parseCurrency, parsePrice, parseRateLines, type RateLine, type RatingPlan } from '../../../domain/panel/billing';
import { invalid, notFound, PanelError } from '../../../domain/panel/errors';
import { pathIds } from '../../../domain/panel/tree';
import type { Db } from '../../../platform/db';
import type { Actor } from '../shared/actor';
import { audit } from '../shared/audit';
import { findInScope, isUuid, lockedChain } from '../shared/chain';
import { isUniqueViolation } from '../orgs/settings';

// Billing plans (spec 2 section 2.8): owned by an org in the caller's subtree (never a customer),
// billing the orgs directly below the owner. Assigning a plan (or Not billed) to an org belongs to
// the levels above it and takes effect from the next metered hour (a history row per change, so a
// month shows every plan it had). A plan is deleted only while no org is billed by it; the row is
// kept (deleted_at) for the metered hours that name it. Lock order: the org chain (lockedChain),
// then plan rows.

export type Clock = () => Date;

export interface PlanInput {
  name: string;
  currency: string;
  base_price: string | number;
  account_price: string | number;
  package_prices?: Record<string, string | number>;
  rates: string;
}

interface PlanRow {
  id: string;
  owner_org_id: string;
  name: string;
  currency: string;
  minor_units: number;
  base_price: string;
  account_price: string;
  package_prices: Record<string, string>;
  rates_text: string;
  rates: RateLine[];
  deleted_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

const price = (v: string) => v.replace(/(\.\d*?)0+$/, '$1').replace(/\.$/, '');

const planView = (p: PlanRow, orgsBilled?: number) => ({
  id: p.id,
  owner_org_id: p.owner_org_id,
  name: p.name,
  currency: p.currency,
  base_price: price(p.base_price),
  account_price: price(p.account_price),
  package_prices: p.package_prices,
  rates: p.rates_text,
  rate_lines: p.rates,
  created_at: p.created_at,
  updated_at: p.updated_at,
  ...(orgsBilled === undefined ? {} : { orgs_billed: orgsBilled }),
});

/** The plan as rating needs it. */
export const ratingPlan = (p: PlanRow): RatingPlan => ({
  id: p.id,
  name: p.name,
  currency: p.currency,
  minorUnits: p.minor_units,
  basePrice: price(p.base_price),
  accountPrice: price(p.account_price),
  packagePrices: p.package_prices,
  rates: p.rates,
});

/** Validated columns of a plan; package prices name packages listed to the orgs below the owner. */
async function planColumns(q: Knex | Knex.Transaction, ownerPath: string, input: Partial<PlanInput>) {
  const cols: Record<string, unknown> = {};
  if (input.name !== undefined) cols.name = input.name;
  if (input.currency !== undefined) {
    const c = parseCurrency(input.currency);
    Object.assign(cols, { currency: c.currency, minor_units: c.minorUnits });
  }
  if (input.base_price !== undefined) cols.base_price = parsePrice(input.base_price, 'base_price');
  if (input.account_price !== undefined) cols.account_price = parsePrice(input.account_price, 'account_price');
  if (input.rates !== undefined) {
    cols.rates = JSON.stringify(parseRateLines(input.rates));
    cols.rates_text = input.rates;
  }
  if (input.package_prices !== undefined) {
    const prices: Record<string, string> = {};
    for (const [pkg, v] of Object.entries(input.package_prices)) prices[pkg] = parsePrice(v, `package_prices.${pkg}`);
    const ids = Object.keys(prices);
    const bad = ids.find((id) => !isUuid(id));
    if (bad) throw invalid(`package_prices.${bad}`, 'not a package id');
    const listed: Array<{ id: string }> = ids.length ? await q('panel_packages').whereIn('id', ids).whereIn('owner_org_id', pathIds(ownerPath)).select('id') : [];
    const missing = ids.find((id) => !listed.some((l) => l.id === id));
    if (missing) throw invalid(`package_prices.${missing}`, 'no package with that id is listed to the orgs this plan bills');
    cols.package_prices = JSON.stringify(prices);
  }
  return cols;
}

const taken = (name: string) => new PanelError('conflict', { field: 'name', detail: `this organisation already has a billing plan named "${name}"` });

/** How many orgs are billed by the plan now or from an hour to come (their latest assignment names it). */
const orgsBilledSql = (q: Knex | Knex.Transaction) =>
  q.raw(`(SELECT count(*)::int FROM (SELECT DISTINCT ON (a.org_id) a.plan_id FROM panel_billing_assignments a
           WHERE a.org_id IN (SELECT b.org_id FROM panel_billing_assignments b WHERE b.plan_id = p.id)
           ORDER BY a.org_id, a.effective_from DESC, a.id DESC) cur WHERE cur.plan_id = p.id) AS orgs_billed`);

/** The plans owned by org `id`. */
export async function listPlans(db: Db, actor: Actor, id: string) {
  const org = await findInScope(db, actor, id);
  const rows = await db('panel_billing_plans as p').where({ owner_org_id: org.id }).whereNull('deleted_at').orderByRaw('lower(name)').select('p.*', orgsBilledSql(db));
  return { plans: rows.map((r) => planView(r, r.orgs_billed)) };
}

/** A plan the actor may read: owned in its subtree, or one its parent bills it (or could) with. */
async function visiblePlan(q: Knex | Knex.Transaction, actor: Actor, id: string) {
  const row = isUuid(id)
    ? await q('panel_billing_plans as p').join('panel_orgs as o', 'o.id', 'p.owner_org_id').where('p.id', id).whereNull('p.deleted_at').first('p.*', 'o.path as owner_path', orgsBilledSql(q))
    : undefined;
  const billsActor = actor.orgPath.replace(/[^/]+\/$/, '') === row?.owner_path;
  if (!row || !(row.owner_path.startsWith(actor.orgPath) || billsActor)) throw notFound('billing plan');
  return row as PlanRow & { owner_path: string; orgs_billed: number };
}

export async function getPlan(db: Db, actor: Actor, id: string) {
  const p = await visiblePlan(db, actor, id);
  return planView(p, p.orgs_billed);
}

/** A plan the actor may change: owned by its own org or one below; locked after the owner's chain. */
async function editablePlan(trx: Knex.Transaction, actor: Actor, id: string) {
  const visible = await visiblePlan(trx, actor, id);
  if (!visible.owner_path.startsWith(actor.orgPath)) throw new PanelError('forbidden', { detail: 'a billing plan is changed only by its owner or the levels above it' });
  const { org: owner } = await lockedChain(trx, actor, visible.owner_org_id);
  const plan: PlanRow | undefined = await trx('panel_billing_plans').where({ id }).whereNull('deleted_at').forUpdate().first();
  if (!plan) throw notFound('billing plan');
  return { plan, owner, orgsBilled: visible.orgs_billed };
}

export async function createPlan(db: Db, actor: Actor, ownerId: string, input: PlanInput) {
  return db.transaction(async (trx) => {
    const { org: owner } = await lockedChain(trx, actor, ownerId);
    if (owner.type === 'customer') throw new PanelError('forbidden', { detail: 'a customer account bills nobody: plans belong to the orgs that have orgs below them' });
    const cols = await planColumns(trx, owner.path, { package_prices: {}, ...input });
    let plan: PlanRow;
    try {
      [plan] = await trx('panel_billing_plans').insert({ id: randomUUID(), owner_org_id: owner.id, ...cols }).returning('*');
    } catch (err) {
      if (isUniqueViolation(err, 'panel_billing_plans_owner_name')) throw taken(input.name);
      throw err;
    }
    await audit(trx, actor, { org: owner, action: 'billing_plan.create', target: { type: 'billing_plan', id: plan.id }, after: planView(plan) });
    return planView(plan, 0);
  });
}

/** Edits a plan: the next estimates and closes rate with it; closed statements never change. */
export async function updatePlan(db: Db, actor: Actor, id: string, patch: Partial<PlanInput>) {
  return db.transaction(async (trx) => {
    const { plan, owner, orgsBilled } = await editablePlan(trx, actor, id);
    const cols = await planColumns(trx, owner.path, patch);
    let updated: PlanRow;
    try {
      [updated] = await trx('panel_billing_plans').where({ id: plan.id }).update({ ...cols, updated_at: trx.fn.now() }).returning('*');
    } catch (err) {
      if (isUniqueViolation(err, 'panel_billing_plans_owner_name')) throw taken(String(patch.name));
      throw err;
    }
    await audit(trx, actor, { org: owner, action: 'billing_plan.update', target: { type: 'billing_plan', id: plan.id }, before: planView(plan), after: planView(updated) });
    return planView(updated, orgsBilled);
  });
}

/** Deletes a plan no org is billed by (now or from an hour to come). */
export async function deletePlan(db: Db, actor: Actor, id: string) {
  await db.transaction(async (trx) => {
    const { plan, owner, orgsBilled } = await editablePlan(trx, actor, id);
    if (orgsBilled > 0) throw new PanelError('conflict', { detail: `${orgsBilled} organisation(s) are billed by this plan; assign them another plan or Not billed first` });
    await trx('panel_billing_plans').where({ id: plan.id }).update({ deleted_at: trx.fn.now() });
    await audit(trx, actor, { org: owner, action: 'billing_plan.delete', target: { type: 'billing_plan', id: plan.id }, before: planView(plan) });
  });
}

/** The plan billing an org now and the one from an hour to come, if changed. */
export async function planOf(q: Knex | Knex.Transaction, orgId: string, now: Date) {
  const rows: Array<{ plan_id: string | null; effective_from: Date; name: string | null }> = await q('panel_billing_assignments as a')
    .leftJoin('panel_billing_plans as p', 'p.id', 'a.plan_id')
    .where('a.org_id', orgId)
    .orderBy([{ column: 'a.effective_from', order: 'desc' }, { column: 'a.id', order: 'desc' }])
    .limit(50)
    .select('a.plan_id', 'a.effective_from', 'p.name');
  const current = rows.find((r) => r.effective_from <= now) ?? null;
  const next = rows[0] && rows[0].effective_from > now ? rows[0] : null;
  const view = (r: (typeof rows)[number] | null) => (r ? { plan_id: r.plan_id, plan_name: r.name, effective_from: r.effective_from } : null);
  return { current: view(current), next: view(next) };
}

/**
 * Sets the plan billing an org below the caller (a plan owned by the org's parent), or with null
 * Not billed, effective from the next metered hour: the hour after the one `now` lies in.
 */
export async function assignPlan(db: Db, actor: Actor, orgId: string, planId: string | null, now: Date) {
  return db.transaction(async (trx) => {
    const { org, chain } = await lockedChain(trx, actor, orgId, { strictlyBelow: true });
    const parent = chain[chain.length - 2];
    if (planId !== null) {
      const plan = isUuid(planId) ? await trx('panel_billing_plans').where({ id: planId, owner_org_id: parent.id }).whereNull('deleted_at').forUpdate().first('id') : undefined;
      if (!plan) throw new PanelError('not_found', { what: 'billing plan', field: 'plan_id', detail: 'a plan bills the orgs directly below its owner' });
    }
    const before = await planOf(trx, org.id, now);
    const effectiveFrom = new Date(hourOf(now).getTime() + 3_600_000);
    await trx('panel_billing_assignments').insert({ org_id: org.id, plan_id: planId, effective_from: effectiveFrom });
    await audit(trx, actor, { org, action: 'org.assign_billing_plan', target: { type: 'org', id: org.id }, before, after: { plan_id: planId, effective_from: effectiveFrom } });
    return { org_id: org.id, ...(await planOf(trx, org.id, now)) };
  });
}

/** Every plan row named by `ids` (deleted ones too: metered hours may name them), as rating needs them. */
export async function ratingPlans(q: Knex | Knex.Transaction, ids: string[]): Promise<Map<string, RatingPlan>> {
  const rows: PlanRow[] = ids.length ? await q('panel_billing_plans').whereIn('id', ids) : [];
  return new Map(rows.map((r) => [r.id, ratingPlan(r)]));
}
