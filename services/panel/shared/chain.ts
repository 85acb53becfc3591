import type { Knex } from 'knex';
import { invalid, notFound, PanelError } from '../../../domain/panel/errors';
import { aboveOwn, resolveLimits, type CountedItem, type LevelLimits, type Limits } from '../../../domain/panel/limits';
import { effectivePowers, isBelow, pathIds, type DelegablePower, type OrgType } from '../../../domain/panel/tree';
import type { Actor } from './actor';

// An org and the levels above it (its chain, root first), and the checks every panel change makes
// against them: scope (the target lies in the caller's subtree, else 404), effective limits,
// powers and regions, and counted limits taken under a lock on the path.

type Q = Knex | Knex.Transaction;

export interface OrgRow {
  id: string;
  parent_id: string | null;
  path: string;
  depth: number;
  type: OrgType;
  name: string;
  status: 'active' | 'suspended';
  suspended_at: Date | null;
  package_id: string | null;
  limits: Limits;
  powers: string[];
  preferred_region: string | null;
  required_region: string | null;
  display_name: string | null;
  accent_color: string | null;
  support_email: string | null;
  login_hostname: string | null;
  created_at: Date;
  updated_at: Date;
}

export interface ChainLevel extends OrgRow {
  package_limits: Limits | null;
  package_preferred_region: string | null;
  package_required_region: string | null;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const isUuid = (s: string): boolean => UUID.test(s);

/** The chain of the org at `path`, root first; `lock` takes row locks root first (the lock order of the tree). */
export async function loadChain(q: Q, path: string, lock = false): Promise<ChainLevel[]> {
  const query = q('panel_orgs as o')
    .leftJoin('panel_packages as p', 'p.id', 'o.package_id')
    .whereIn('o.id', pathIds(path))
    .orderBy('o.depth')
    .select('o.*', 'p.limits as package_limits', 'p.preferred_region as package_preferred_region', 'p.required_region as package_required_region');
  if (lock) query.forUpdate('o');
  return query;
}

/** An org's own limits: its package's while it has one, else its custom limits. */
export const ownLimits = (level: ChainLevel): Limits => (level.package_id ? (level.package_limits ?? {}) : level.limits);

export const effectiveLimits = (chain: ChainLevel[]) =>
  resolveLimits(chain.map((l): LevelLimits => ({ orgId: l.id, name: l.name, limits: ownLimits(l) })));

export const powersOf = (chain: ChainLevel[]) => effectivePowers(chain);

/** Regions: the required region set highest up binds everything below; the preferred one is the nearest set. */
export function effectiveRegions(chain: ChainLevel[]) {
  let required: { region: string; org_id: string } | null = null;
  let preferred: string | null = null;
  for (const l of chain) {
    const req = l.required_region ?? l.package_required_region;
    if (req && !required) required = { region: req, org_id: l.id };
    preferred = l.preferred_region ?? l.package_preferred_region ?? preferred;
  }
  return { required_region: required?.region ?? null, required_by: required?.org_id ?? null, preferred_region: required?.region ?? preferred };
}

/**
 * The org `id` if it lies in the actor's subtree (`strictlyBelow`: below the actor's own org, for
 * decisions that belong to the level above); otherwise 404, so existence does not leak.
 */
export async function findInScope(q: Q, actor: Actor, id: string, opts: { strictlyBelow?: boolean } = {}): Promise<OrgRow> {
  if (!isUuid(id)) throw notFound('organisation');
  const org: OrgRow | undefined = await q('panel_orgs').where({ id }).first();
  if (!org || !(org.id === actor.orgId || isBelow(org.path, actor.orgPath))) throw notFound('organisation');
  if (opts.strictlyBelow && org.id === actor.orgId) {
    throw new PanelError('forbidden', { detail: 'decisions about an organisation belong to the level above it, not to the organisation itself' });
  }
  return org;
}

/** The item counts of an org's subtree (itself included for sites and the like; orgs strictly below). */
export async function countedUsage(q: Q, org: { id: string; path: string }): Promise<Record<CountedItem, number>> {
  const prefix = `${org.path}%`;
  const row = await q('panel_orgs')
    .where('path', 'like', prefix)
    .whereNot('id', org.id)
    .first(
      q.raw(`count(*) FILTER (WHERE type = 'customer')::int AS customer_accounts`),
      q.raw(`count(*) FILTER (WHERE type = 'reseller')::int AS resellers`),
      // every site's domain and each alias is one domain (panel_domains holds them all)
      q.raw(`(SELECT count(*)::int FROM panel_sites s JOIN panel_orgs so ON so.id = s.org_id WHERE so.path LIKE ?) AS websites`, [prefix]),
      q.raw(`(SELECT count(*)::int FROM panel_domains d JOIN panel_sites s ON s.id = d.site_id JOIN panel_orgs so ON so.id = s.org_id WHERE so.path LIKE ?) AS domains`, [prefix]),
      q.raw(`(SELECT count(*)::int FROM panel_dns_zones z JOIN panel_orgs zo ON zo.id = z.org_id WHERE zo.path LIKE ?) AS dns_zones`, [prefix]),
      // a database counts from its creation until its node dropped it (its row goes then)
      q.raw(`(SELECT count(*)::int FROM panel_databases b JOIN panel_orgs bo ON bo.id = b.org_id WHERE bo.path LIKE ?) AS databases`, [prefix]),
    );
  return { customer_accounts: row.customer_accounts, resellers: row.resellers, websites: row.websites, domains: row.domains, databases: row.databases, dns_zones: row.dns_zones };
}

/**
 * Takes `adding` of a counted item below the last level of `lockedChain` (which the caller locked
 * with loadChain(…, true) in this transaction, so concurrent creates wait and never overshoot):
 * refused with limit_reached naming the limit and the level that binds.
 */
export async function checkCounted(trx: Knex.Transaction, lockedChain: ChainLevel[], item: CountedItem, adding = 1): Promise<void> {
  for (const level of lockedChain) {
    const limit = ownLimits(level)[item];
    if (limit === undefined || limit === null) continue;
    const used = (await countedUsage(trx, level))[item];
    if (used + adding > limit) {
      throw new PanelError('limit_reached', {
        limit: item,
        level: `${level.type} "${level.name}"`,
        value: limit,
        org_id: level.id,
        used,
        detail: `${used} in use, so nothing more can be created below it`,
      });
    }
  }
}

/** A required region set above cannot be changed below: `region` must equal it when one is set. */
export function checkRequiredRegion(chainAbove: ChainLevel[], region: string | null | undefined, field: string): void {
  if (!region) return;
  const { required_region } = effectiveRegions(chainAbove);
  if (required_region && region !== required_region) {
    throw invalid(field, `a level above requires region "${required_region}"; it cannot be changed below`);
  }
}

/** The org `id` in the actor's scope and its chain, locked root first; 404 if it vanished meanwhile. */
export async function lockedChain(trx: Knex.Transaction, actor: Actor, id: string, opts: { strictlyBelow?: boolean } = {}) {
  const org = await findInScope(trx, actor, id, opts);
  const chain = await loadChain(trx, org.path, true);
  if (chain[chain.length - 1]?.id !== org.id) throw notFound('organisation');
  return { org: chain[chain.length - 1], chain };
}

/** The levels of `chain` from the root down to the actor's own org (the editor). */
export const editorChain = (chain: ChainLevel[], actor: Actor): ChainLevel[] => chain.slice(0, chain.findIndex((l) => l.id === actor.orgId) + 1);

/** Refuses limits above the effective limits of the last level of `chain`, naming the level whose value binds. */
export function refuseAboveOwn(limits: Limits, chain: ChainLevel[]): void {
  const own = effectiveLimits(chain);
  const [over] = aboveOwn(limits, own);
  if (!over) return;
  const binding = chain.find((l) => l.id === own[over.limit].setBy?.org_id)!;
  throw new PanelError('limit_reached', {
    limit: over.limit,
    level: `${binding.type} "${binding.name}"`,
    value: over.own,
    org_id: binding.id,
    field: `limits.${over.limit}`,
    detail: `${over.value} cannot be given below it`,
  });
}

/** Refuses unless the last level of `chain` holds the delegable `power`. */
export function requirePower(chain: ChainLevel[], power: DelegablePower): void {
  const holder = chain[chain.length - 1];
  if (!powersOf(chain).includes(power)) throw new PanelError('power_missing', { power, holder: `${holder.type} "${holder.name}"` });
}

/** A package listed to the org below `chainAbove` (owned by one of those levels), else 404 naming package_id. */
export async function listedPackage(trx: Knex.Transaction, chainAbove: ChainLevel[], packageId: string): Promise<{ id: string; limits: Limits; required_region: string | null; preferred_region: string | null }> {
  const pkg = isUuid(packageId) ? await trx('panel_packages').where({ id: packageId }).whereIn('owner_org_id', chainAbove.map((l) => l.id)).first() : undefined;
  if (!pkg) throw new PanelError('not_found', { what: 'package', field: 'package_id' });
  checkRequiredRegion(chainAbove, pkg.required_region, 'package_id');
  return pkg;
}
