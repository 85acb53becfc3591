import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { notFound, PanelError } from '../../../domain/panel/errors';
import type { Limits } from '../../../domain/panel/limits';
import { pathIds } from '../../../domain/panel/tree';
import type { Db } from '../../../platform/db';
import type { Actor } from '../shared/actor';
import { audit } from '../shared/audit';
import { refusePackageAboveCapacity, withCapacityCheck } from '../nodes/capacity';
import { checkRequiredRegion, editorChain, findInScope, isUuid, listedPackage, loadChain, lockedChain, ownLimits, refuseAboveOwn, requirePower, type ChainLevel } from '../shared/chain';
import { given, isUniqueViolation, limitsView, type LimitsCascade } from './settings';

// Packages (spec 2 section 2.4): named limits and regions an org offers to the orgs below it. The
// packages listed to an org are those owned by it or any level above it. Creating, editing and
// deleting need create_packages; assigning a listed package does not. Limits never exceed the
// owner's own (the owner is at or below the editor, so never the editor's either). Lock order: the
// owner's path root first (loadChain), then the package row.

export interface PackageInput {
  name: string;
  limits: Limits;
  preferred_region?: string | null;
  required_region?: string | null;
}

interface PackageRow {
  id: string;
  owner_org_id: string;
  name: string;
  limits: Limits;
  preferred_region: string | null;
  required_region: string | null;
  created_at: Date;
  updated_at: Date;
}

const packageView = (p: PackageRow, orgsUsing?: number) => ({
  id: p.id,
  owner_org_id: p.owner_org_id,
  name: p.name,
  limits: p.limits,
  preferred_region: p.preferred_region,
  required_region: p.required_region,
  created_at: p.created_at,
  updated_at: p.updated_at,
  ...(orgsUsing === undefined ? {} : { orgs_using: orgsUsing }),
});

const taken = (name: string) => new PanelError('conflict', { field: 'name', detail: `this organisation already has a package named "${name}"` });

/** How many orgs of the actor's subtree use the package (never counts orgs the caller cannot see). */
const orgsUsingSql = (q: Knex | Knex.Transaction, actor: Actor) =>
  q.raw('(SELECT count(*)::int FROM panel_orgs u WHERE u.package_id = p.id AND u.path LIKE ?) AS orgs_using', [`${actor.orgPath}%`]);

/** The packages listed to org `id`: owned by it or a level above it, nearest owner last. */
export async function listPackages(db: Db, actor: Actor, id: string) {
  const org = await findInScope(db, actor, id);
  const rows = await db('panel_packages as p')
    .join('panel_orgs as o', 'o.id', 'p.owner_org_id')
    .whereIn('p.owner_org_id', pathIds(org.path))
    .orderByRaw('o.depth, lower(p.name)')
    .select('p.*', orgsUsingSql(db, actor));
  return { packages: rows.map((r) => packageView(r, r.orgs_using)) };
}

/** A package the actor may read: owned in its subtree or above it; otherwise 404. */
async function visiblePackage(q: Knex | Knex.Transaction, actor: Actor, id: string) {
  const row = isUuid(id) ? await q('panel_packages as p').join('panel_orgs as o', 'o.id', 'p.owner_org_id').where('p.id', id).first('p.*', 'o.path as owner_path', orgsUsingSql(q, actor)) : undefined;
  if (!row || !(row.owner_path.startsWith(actor.orgPath) || actor.orgPath.startsWith(row.owner_path))) throw notFound('package');
  return row as PackageRow & { owner_path: string; orgs_using: number };
}

export async function getPackage(db: Db, actor: Actor, id: string) {
  const p = await visiblePackage(db, actor, id);
  return packageView(p, p.orgs_using);
}

/**
 * A package the actor may change: owned by its org or below, with create_packages held by the
 * actor's org. Returns the owner's chain, locked, and the package row, locked after it.
 */
async function editablePackage(trx: Knex.Transaction, actor: Actor, id: string) {
  const visible = await visiblePackage(trx, actor, id);
  if (!visible.owner_path.startsWith(actor.orgPath)) throw new PanelError('forbidden', { detail: 'a package is changed only by its owner or the levels above it' });
  const chain = await loadChain(trx, visible.owner_path, true);
  requirePower(editorChain(chain, actor), 'create_packages');
  const pkg: PackageRow | undefined = await trx('panel_packages').where({ id }).forUpdate().first();
  if (!pkg) throw notFound('package');
  return { pkg, chain, orgsUsing: visible.orgs_using };
}

export async function createPackage(db: Db, actor: Actor, ownerId: string, input: PackageInput) {
  return db.transaction(async (trx) => {
    const { org: owner, chain } = await lockedChain(trx, actor, ownerId);
    requirePower(chain, 'create_packages');
    refuseAboveOwn(input.limits, chain);
    await refusePackageAboveCapacity(trx, input.limits);
    checkRequiredRegion(chain, input.required_region, 'required_region');
    let pkg: PackageRow;
    try {
      [pkg] = await trx('panel_packages')
        .insert({ id: randomUUID(), owner_org_id: owner.id, name: input.name, limits: JSON.stringify(input.limits), preferred_region: input.preferred_region ?? null, required_region: input.required_region ?? null })
        .returning('*');
    } catch (err) {
      if (isUniqueViolation(err, 'panel_packages_owner_name')) throw taken(input.name);
      throw err;
    }
    await audit(trx, actor, { org: owner, action: 'package.create', target: { type: 'package', id: pkg.id }, after: packageView(pkg) });
    return packageView(pkg, 0);
  });
}

/**
 * Edits a package; every org using it sees the change at once (they reference the one row), so
 * the edit is all or nothing: refused whole if its limits exceed the owner's own, or if its
 * required region contradicts one set above the owner or above any org using it.
 */
export async function updatePackage(db: Db, actor: Actor, id: string, patch: Partial<PackageInput>, cascade: LimitsCascade = async () => {}) {
  return db.transaction(async (trx) => {
    const { pkg, chain, orgsUsing } = await editablePackage(trx, actor, id);
    if (patch.limits) refuseAboveOwn(patch.limits, chain);
    if (patch.required_region) await checkRegionOfUsers(trx, pkg.id, chain, patch.required_region);
    const changes = given(patch);
    let updated: PackageRow;
    try {
      [updated] = await withCapacityCheck(trx, () =>
        trx('panel_packages')
          .where({ id: pkg.id })
          .update({ ...changes, ...(changes.limits ? { limits: JSON.stringify(changes.limits) } : {}), updated_at: trx.fn.now() })
          .returning('*'),
      );
    } catch (err) {
      if (isUniqueViolation(err, 'panel_packages_owner_name')) throw taken(String(patch.name));
      throw err;
    }
    const owner = chain[chain.length - 1];
    await audit(trx, actor, { org: owner, action: 'package.update', target: { type: 'package', id: pkg.id }, before: packageView(pkg), after: packageView(updated) });
    if (changes.limits) for (const u of await trx('panel_orgs').where({ package_id: pkg.id }).orderBy('path').select('path')) await cascade(trx, u.path);
    return packageView(updated, orgsUsing);
  });
}

/** A required region must agree with one set above the owner and above every org using the package. */
async function checkRegionOfUsers(trx: Knex.Transaction, packageId: string, ownerChain: ChainLevel[], region: string) {
  checkRequiredRegion(ownerChain, region, 'required_region');
  const users: Array<{ path: string }> = await trx('panel_orgs').where({ package_id: packageId }).select('path');
  for (const parentPath of new Set(users.map((u) => u.path.replace(/[^/]+\/$/, '')))) {
    checkRequiredRegion(await loadChain(trx, parentPath), region, 'required_region');
  }
}

/** Deletes a package no org uses. */
export async function deletePackage(db: Db, actor: Actor, id: string) {
  await db.transaction(async (trx) => {
    const { pkg, chain } = await editablePackage(trx, actor, id);
    const used = await trx('panel_orgs').where({ package_id: pkg.id }).first(trx.raw('count(*)::int AS n'));
    if (used.n > 0) throw new PanelError('conflict', { detail: `the package is assigned to ${used.n} organisation(s); assign them another package or custom limits first` });
    await trx('panel_packages').where({ id: pkg.id }).delete();
    await audit(trx, actor, { org: chain[chain.length - 1], action: 'package.delete', target: { type: 'package', id: pkg.id }, before: packageView(pkg) });
  });
}

/**
 * Assigns a package listed above an org below the caller (its own limits become the package's;
 * custom limits are dropped), or with null returns it to custom limits, empty. Needs no power.
 */
export async function assignPackage(db: Db, actor: Actor, orgId: string, packageId: string | null, cascade: LimitsCascade = async () => {}) {
  return db.transaction(async (trx) => {
    const { org, chain } = await lockedChain(trx, actor, orgId, { strictlyBelow: true });
    const above = chain.slice(0, -1);
    const pkg = packageId === null ? undefined : await listedPackage(trx, above, packageId);
    await withCapacityCheck(trx, () => trx('panel_orgs').where({ id: org.id }).update({ package_id: packageId, limits: '{}', updated_at: trx.fn.now() }));
    await audit(trx, actor, {
      org,
      action: 'org.assign_package',
      target: { type: 'org', id: org.id },
      before: { package_id: org.package_id, limits: ownLimits(org) },
      after: { package_id: packageId, limits: pkg?.limits ?? {} },
    });
    await cascade(trx, org.path);
    return limitsView(trx, await loadChain(trx, org.path));
  });
}
