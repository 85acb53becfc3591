import type { Knex } from 'knex';
import { PanelError } from '../../../domain/panel/errors';
import { resolveLimits, type Limits } from '../../../domain/panel/limits';
import { pathIds } from '../../../domain/panel/tree';
import type { Db } from '../../../platform/db';
import type { Actor } from '../shared/actor';
import { audit } from '../shared/audit';

// Declared capacity (spec 2 section 4.2): CPU (% of one core summed over the cluster), memory and
// disk, with an overcommit percentage. Committed = the sum of every customer account's effective
// CPU, memory and disk caps. While a capacity is declared, a change that would take committed above
// declared × overcommit (or add an account with no cap on a declared resource) is refused with
// capacity_exceeded. Changes that can raise committed run inside withCapacityCheck, which holds one
// transaction-level advisory lock, so concurrent changes are checked one after another.

export const RESOURCES = ['cpu_percent', 'memory_mb', 'disk_mb'] as const;
type Resource = (typeof RESOURCES)[number];
type Q = Knex | Knex.Transaction;

const LOCK_KEY = 0x70616e656c; // 'panel': the capacity checks' advisory lock

interface Declared {
  cpu_percent: number | null;
  memory_mb: number | null;
  disk_mb: number | null;
  overcommit_percent: number;
}

async function declared(q: Q): Promise<Declared | null> {
  const row = await q('panel_capacity').where({ id: 1 }).first();
  return row ? { cpu_percent: row.cpu_percent, memory_mb: row.memory_mb, disk_mb: row.disk_mb, overcommit_percent: row.overcommit_percent } : null;
}

const allowedOf = (d: Declared, r: Resource) => (d[r] === null ? null : Math.floor((d[r]! * d.overcommit_percent) / 100));

/** Committed caps over every customer account: the finite sum and how many accounts have no cap. */
export async function committed(q: Q): Promise<Record<Resource, { sum: number; uncapped: number }>> {
  const rows: Array<{ id: string; path: string; type: string; limits: Limits; package_limits: Limits | null; package_id: string | null }> = await q('panel_orgs as o')
    .leftJoin('panel_packages as p', 'p.id', 'o.package_id')
    .select('o.id', 'o.path', 'o.type', 'o.limits', 'o.package_id', 'p.limits as package_limits');
  const own = new Map(rows.map((r) => [r.id, r.package_id ? (r.package_limits ?? {}) : r.limits]));
  const out = Object.fromEntries(RESOURCES.map((r) => [r, { sum: 0, uncapped: 0 }])) as Record<Resource, { sum: number; uncapped: number }>;
  for (const r of rows) {
    if (r.type !== 'customer') continue;
    const eff = resolveLimits(pathIds(r.path).map((id) => ({ orgId: id, name: '', limits: own.get(id) ?? {} })));
    for (const res of RESOURCES) {
      const v = eff[res].value;
      if (v === null) out[res].uncapped++;
      else out[res].sum += v;
    }
  }
  return out;
}

/**
 * Runs `change` (which writes in `trx`) and refuses it when a capacity is declared and the change
 * takes a resource's committed caps above the allowed amount, or adds an uncapped account.
 */
export async function withCapacityCheck<T>(trx: Knex.Transaction, change: () => Promise<T>): Promise<T> {
  const d = await declared(trx);
  if (!d) return change();
  await trx.raw('SELECT pg_advisory_xact_lock(?)', [LOCK_KEY]);
  const before = await committed(trx);
  const result = await change();
  const after = await committed(trx);
  for (const r of RESOURCES) {
    const allowed = allowedOf(d, r);
    if (allowed === null) continue;
    if (after[r].uncapped > before[r].uncapped) {
      throw new PanelError('capacity_exceeded', { resource: r, detail: `an account without a ${r} cap cannot be added while a ${r} capacity is declared` });
    }
    if (after[r].sum > allowed && after[r].sum > before[r].sum) {
      throw new PanelError('capacity_exceeded', { resource: r, allowed, committed: before[r].sum, requested: after[r].sum, detail: `${r}: committed would be ${after[r].sum}, allowed is ${allowed}` });
    }
  }
  return result;
}

/** A package whose cap alone is above what the cluster allows can never be given to an account. */
export async function refusePackageAboveCapacity(q: Q, limits: Limits): Promise<void> {
  const d = await declared(q);
  if (!d) return;
  for (const r of RESOURCES) {
    const allowed = allowedOf(d, r);
    const v = limits[r];
    if (allowed !== null && v !== undefined && v > allowed) {
      throw new PanelError('capacity_exceeded', { resource: r, allowed, requested: v, detail: `${r}: the package's ${v} is above the allowed ${allowed}` });
    }
  }
}

/** The capacity table: declared, allowed with overcommit, committed (and uncapped accounts) per resource. */
export async function capacityView(q: Q) {
  const [d, c] = await Promise.all([declared(q), committed(q)]);
  return {
    declared: d !== null,
    overcommit_percent: d?.overcommit_percent ?? null,
    resources: Object.fromEntries(
      RESOURCES.map((r) => [r, { declared: d?.[r] ?? null, allowed: d ? allowedOf(d, r) : null, committed: c[r].sum, uncapped_accounts: c[r].uncapped }]),
    ),
  };
}

export interface CapacityInput {
  cpu_percent: number | null;
  memory_mb: number | null;
  disk_mb: number | null;
  overcommit_percent: number;
}

/** Declares (or changes) the capacity; platform logins only (checked by the caller's route). */
export async function declareCapacity(db: Db, actor: Actor, input: CapacityInput) {
  return db.transaction(async (trx) => {
    const before = await declared(trx);
    await trx('panel_capacity')
      .insert({ id: 1, ...input, updated_at: trx.fn.now() })
      .onConflict('id')
      .merge();
    await audit(trx, actor, { org: { id: actor.orgId, path: actor.orgPath }, action: 'capacity.declare', target: { type: 'capacity', id: 'cluster' }, before, after: input });
    return capacityView(trx);
  });
}

/** Clearing the declaration turns the check off. */
export async function clearCapacity(db: Db, actor: Actor) {
  return db.transaction(async (trx) => {
    const before = await declared(trx);
    await trx('panel_capacity').where({ id: 1 }).delete();
    await audit(trx, actor, { org: { id: actor.orgId, path: actor.orgPath }, action: 'capacity.clear', target: { type: 'capacity', id: 'cluster' }, before });
    return capacityView(trx);
  });
}
