import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { invalid, PanelError } from '../../../domain/panel/errors';
import type { Limits } from '../../../domain/panel/limits';
import { ADMIN_ROLE, childTypes, DELEGABLE_POWERS, type DelegablePower, type OrgType } from '../../../domain/panel/tree';
import type { Db } from '../../../platform/db';
import type { Actor } from '../shared/actor';
import { audit } from '../shared/audit';
import { checkCounted, checkRequiredRegion, countedUsage, effectiveLimits, effectiveRegions, findInScope, listedPackage, loadChain, powersOf, refuseAboveOwn, type ChainLevel, type OrgRow } from '../shared/chain';
import { withCapacityCheck } from '../nodes/capacity';
import { checkPassword, checkUsername, insertLogin } from '../logins/logins';
import { hashPassword } from '../logins/passwords';

// The org tree (spec 2 sections 1.1-1.4, 2.2, 3): create, list, read, rename, suspend, reactivate,
// delete. Lock order: org rows along a path, root first (loadChain with lock), then logins.

export const NAME_MAX = 80;

export function checkName(name: unknown, field = 'name'): string {
  if (typeof name !== 'string') throw invalid(field, 'must be a string');
  const trimmed = name.trim();
  if (trimmed.length < 1 || trimmed.length > NAME_MAX) throw invalid(field, `must be 1 to ${NAME_MAX} characters`);
  return trimmed;
}

export interface CreateOrgInput {
  parent_id?: string;
  type: Exclude<OrgType, 'platform'>;
  name: string;
  login: { username: string; password: string };
  limits?: Limits;
  package_id?: string;
  powers?: DelegablePower[];
  preferred_region?: string;
  required_region?: string;
}

export function orgView(o: OrgRow) {
  return {
    id: o.id,
    parent_id: o.parent_id,
    type: o.type,
    name: o.name,
    status: o.status,
    depth: o.depth,
    package_id: o.package_id,
    suspended_at: o.suspended_at,
    created_at: o.created_at,
    updated_at: o.updated_at,
  };
}

export async function createOrg(db: Db, actor: Actor, input: CreateOrgInput) {
  const name = checkName(input.name);
  checkUsername(input.login?.username, 'login.username');
  checkPassword(input.login?.password, 'login.password');
  if (input.limits && input.package_id) throw invalid('limits', 'give a package or custom limits, not both');
  const passwordHash = await hashPassword(input.login.password);
  return db.transaction(async (trx) => {
    const parent = await findInScope(trx, actor, input.parent_id ?? actor.orgId);
    const chain = await loadChain(trx, parent.path, true);
    if (!childTypes(parent.type).includes(input.type)) throw invalid('type', `a ${parent.type} has no ${input.type} below it (allowed: ${childTypes(parent.type).join(', ') || 'none'})`);
    const parentPowers = powersOf(chain);
    if (input.type === 'reseller' && parent.type === 'reseller' && !parentPowers.includes('create_subresellers')) {
      throw new PanelError('power_missing', { power: 'create_subresellers', holder: `reseller "${parent.name}"` });
    }
    if (input.limits) refuseAboveOwn(input.limits, chain);
    const pkg = input.package_id ? await listedPackage(trx, chain, input.package_id) : null;
    checkRequiredRegion(chain, input.required_region, 'required_region');
    const powers = input.type === 'reseller' ? grantable(input.powers ?? [], parentPowers, parent) : [];
    if (input.type === 'customer') await checkCounted(trx, chain, 'customer_accounts');
    if (input.type === 'reseller') await checkCounted(trx, chain, 'resellers');

    const id = randomUUID();
    // A new customer account adds its caps to the committed capacity.
    const [org]: OrgRow[] = await withCapacityCheck(trx, () =>
      trx('panel_orgs')
        .insert({
          id,
          parent_id: parent.id,
          path: `${parent.path}${id}/`,
          depth: parent.depth + 1,
          type: input.type,
          name,
          package_id: pkg?.id ?? null,
          limits: JSON.stringify(input.limits ?? {}),
          powers,
          preferred_region: input.preferred_region ?? null,
          required_region: input.required_region ?? null,
        })
        .returning('*'),
    );
    const login = await insertLogin(trx, org, { username: input.login.username, passwordHash, role: ADMIN_ROLE[input.type] });
    await audit(trx, actor, { org, action: 'org.create', target: { type: 'org', id }, after: { ...orgView(org), limits: input.limits ?? {}, powers, first_login: login.username } });
    return { ...orgView(org), first_login: login };
  });
}

/** Powers granted to a reseller: only delegable ones the granting level itself holds. */
export function grantable(powers: string[], held: DelegablePower[], granter: { type: string; name: string }): DelegablePower[] {
  for (const p of powers) {
    if (!(DELEGABLE_POWERS as readonly string[]).includes(p)) throw invalid('powers', `unknown power "${p}" (delegable: ${DELEGABLE_POWERS.join(', ')})`);
    if (!held.includes(p as DelegablePower)) throw new PanelError('power_missing', { power: p, holder: `${granter.type} "${granter.name}"` });
  }
  return [...new Set(powers)] as DelegablePower[];
}

export interface ListOrgsQuery {
  /** the org whose subtree is listed (default: the actor's own org) */
  root?: string;
  /** only the direct children of root */
  children?: boolean;
  type?: OrgType;
  status?: 'active' | 'suspended';
  q?: string;
  limit: number;
  /** the opaque cursor of the previous page */
  after?: string;
}

/** A page of the subtree below `root` in tree order (parents before their children), with counts per org. */
export async function listOrgs(db: Db, actor: Actor, query: ListOrgsQuery) {
  const root = await findInScope(db, actor, query.root ?? actor.orgId);
  const q = db('panel_orgs as o').where('o.path', 'like', `${root.path}%`).whereNot('o.id', root.id).orderBy('o.path').limit(query.limit);
  if (query.children) q.where('o.parent_id', root.id);
  if (query.type) q.where('o.type', query.type);
  if (query.status) q.where('o.status', query.status);
  if (query.q) q.whereILike('o.name', `%${query.q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
  if (query.after) {
    const after = Buffer.from(query.after, 'base64url').toString('utf8');
    if (!after.startsWith(root.path)) throw invalid('after', 'not a cursor of this listing');
    q.where('o.path', '>', after);
  }
  const rows = await q.select(
    'o.*',
    db.raw('(SELECT count(*)::int FROM panel_orgs c WHERE c.parent_id = o.id) AS children'),
    db.raw('(SELECT count(*)::int FROM panel_logins l WHERE l.org_id = o.id) AS logins'),
  );
  return {
    orgs: rows.map((r) => ({ ...orgView(r), counts: { children: r.children, logins: r.logins } })),
    next: rows.length === query.limit ? Buffer.from(rows[rows.length - 1].path).toString('base64url') : null,
  };
}

/** One org with its effective limits and usage, powers, regions, branding and counts. */
export async function getOrg(db: Db, actor: Actor, id: string) {
  const org = await findInScope(db, actor, id);
  const chain = await loadChain(db, org.path);
  const [usage, logins, children] = await Promise.all([
    countedUsage(db, org),
    db('panel_logins').where({ org_id: org.id }).first(db.raw('count(*)::int AS n')),
    db('panel_orgs').where({ parent_id: org.id }).first(db.raw('count(*)::int AS n')),
  ]);
  return { ...orgView(org), ...detailsOf(chain), counts: { children: children.n, logins: logins.n, ...usage } };
}

export function detailsOf(chain: ChainLevel[]) {
  const self = chain[chain.length - 1];
  const effective = effectiveLimits(chain);
  return {
    limits: {
      source: self.package_id ? 'package' : 'custom',
      own: self.package_id ? (self.package_limits ?? {}) : self.limits,
      effective: Object.fromEntries(Object.entries(effective).map(([k, v]) => [k, { value: v.value, set_by: v.setBy }])),
    },
    powers: { granted: self.powers, effective: powersOf(chain) },
    regions: { own: { preferred_region: self.preferred_region, required_region: self.required_region }, ...effectiveRegions(chain) },
  };
}

export async function renameOrg(db: Db, actor: Actor, id: string, rawName: unknown) {
  const name = checkName(rawName);
  return db.transaction(async (trx) => {
    const org = await findInScope(trx, actor, id);
    if (org.id === actor.orgId && org.type === 'customer') throw new PanelError('forbidden', { detail: 'customers cannot rename their own account' });
    const [updated] = await trx('panel_orgs').where({ id: org.id }).update({ name, updated_at: trx.fn.now() }).returning('*');
    await audit(trx, actor, { org, action: 'org.rename', target: { type: 'org', id: org.id }, before: { name: org.name }, after: { name } });
    return orgView(updated);
  });
}

/**
 * Suspends or reactivates an org (only from above): its logins and everything below stop on their
 * next request. `cascade` runs in the same transaction after the change (the sites and databases
 * below it, services/panel/sites/org-suspension.ts) and its result is returned for after the commit.
 */
export async function setOrgStatus<T>(db: Db, actor: Actor, id: string, status: 'active' | 'suspended', cascade: (trx: Knex.Transaction, path: string) => Promise<T>) {
  return db.transaction(async (trx) => {
    const org = await findInScope(trx, actor, id, { strictlyBelow: true });
    const [updated] = await trx('panel_orgs')
      .where({ id: org.id })
      .update({ status, suspended_at: status === 'suspended' ? trx.fn.now() : null, updated_at: trx.fn.now() })
      .returning('*');
    const below = await cascade(trx, org.path);
    await audit(trx, actor, { org, action: status === 'suspended' ? 'org.suspend' : 'org.reactivate', target: { type: 'org', id: org.id }, before: { status: org.status }, after: { status } });
    return { org: orgView(updated), below };
  });
}

/** Deletes an org with nothing below it (confirmed by repeating its id), its logins and its unused packages. */
export async function deleteOrg(db: Db, actor: Actor, id: string, confirm: unknown) {
  return db.transaction(async (trx) => {
    const org = await findInScope(trx, actor, id, { strictlyBelow: true });
    await loadChain(trx, org.path, true);
    if (confirm !== org.id) throw invalid('confirm', 'repeat the id of the organisation to delete it');
    const below = await trx('panel_orgs').where({ parent_id: org.id }).first(trx.raw('count(*)::int AS n'));
    if (below.n > 0) throw new PanelError('conflict', { detail: `the organisation has ${below.n} organisation(s) below it; delete them first` });
    const used = await trx('panel_orgs as o').join('panel_packages as p', 'p.id', 'o.package_id').where('p.owner_org_id', org.id).first(trx.raw('count(*)::int AS n'));
    if (used.n > 0) throw new PanelError('conflict', { detail: 'packages of this organisation are still assigned' });
    const held = await countedUsage(trx, org);
    if (held.websites + held.databases + held.dns_zones > 0) {
      throw new PanelError('conflict', { detail: `the organisation still has ${held.websites} website(s), ${held.databases} database(s) and ${held.dns_zones} DNS zone(s); delete them first` });
    }
    await trx('panel_logins').where({ org_id: org.id }).delete();
    await trx('panel_packages').where({ owner_org_id: org.id }).delete();
    await trx('panel_orgs').where({ id: org.id }).delete();
    await audit(trx, actor, { org, action: 'org.delete', target: { type: 'org', id: org.id }, before: orgView(org) });
  });
}
