import type { Knex } from 'knex';
import { PanelError } from '../../../domain/panel/errors';
import { COUNTED, type Limits } from '../../../domain/panel/limits';
import type { DelegablePower } from '../../../domain/panel/tree';
import type { Db } from '../../../platform/db';
import type { Actor } from '../shared/actor';
import { audit } from '../shared/audit';
import { withCapacityCheck } from '../nodes/capacity';
import { checkRequiredRegion, countedUsage, editorChain, findInScope, loadChain, lockedChain, ownLimits, powersOf, refuseAboveOwn, requirePower, type ChainLevel, type OrgRow } from '../shared/chain';
import { detailsOf, grantable } from './orgs';

// An org's settings (spec 2 sections 2.1-2.3, 2.7): limits, delegated powers and regions are
// decided from above (never by the org itself); branding by the org itself or above, if it holds
// set_branding. Every change locks the org's path root first (loadChain) and is audited.

type Q = Knex | Knex.Transaction;

/** The fields of a patch that are given (null clears; absent keeps). */
export const given = <T extends object>(patch: T): Partial<T> => Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined)) as Partial<T>;

/** Whether `err` is PostgreSQL's unique violation of `constraint` (the race-free check for taken names). */
export const isUniqueViolation = (err: unknown, constraint: string): boolean => {
  const e = err as { code?: string; constraint?: string };
  return e?.code === '23505' && e.constraint === constraint;
};

// ---- limits (2.3) ----

/** Own limits and their source, the effective value of each with the level that sets it, and counted usage. */
export async function limitsView(q: Q, chain: ChainLevel[]) {
  const self = chain[chain.length - 1];
  const { limits } = detailsOf(chain);
  const used = await countedUsage(q, self);
  const usage = Object.fromEntries(
    COUNTED.map((item) => {
      const limit = limits.effective[item].value;
      // a limit of 0 is reached from the start
      const percent = limit === null ? null : limit === 0 ? 100 : Math.round((used[item] * 1000) / limit) / 10;
      return [item, { used: used[item], limit, percent }];
    }),
  );
  return { org_id: self.id, package_id: self.package_id, ...limits, usage };
}

export async function limitsOf(db: Db, actor: Actor, id: string) {
  const org = await findInScope(db, actor, id);
  return limitsView(db, await loadChain(db, org.path));
}

/** Brings the sites below the org at `orgPath` to their new effective limits, in the change's transaction (services/panel/sites/site-limits.ts). */
export type LimitsCascade = (trx: Knex.Transaction, orgPath: string) => Promise<void>;

/** Sets custom limits from above; this detaches the org from its package. Never above the editor's own limits. */
export async function setLimits(db: Db, actor: Actor, id: string, limits: Limits, cascade: LimitsCascade = async () => {}) {
  return db.transaction(async (trx) => {
    const { org, chain } = await lockedChain(trx, actor, id, { strictlyBelow: true });
    refuseAboveOwn(limits, editorChain(chain, actor));
    await withCapacityCheck(trx, () => trx('panel_orgs').where({ id: org.id }).update({ package_id: null, limits: JSON.stringify(limits), updated_at: trx.fn.now() }));
    await audit(trx, actor, {
      org,
      action: 'org.set_limits',
      target: { type: 'org', id: org.id },
      before: { package_id: org.package_id, limits: ownLimits(org) },
      after: { package_id: null, limits },
    });
    await cascade(trx, org.path);
    return limitsView(trx, await loadChain(trx, org.path));
  });
}

// ---- delegated powers (2.1) ----

/** Grants a reseller below the caller its delegable powers: only those its parent holds. */
export async function setPowers(db: Db, actor: Actor, id: string, powers: DelegablePower[]) {
  return db.transaction(async (trx) => {
    const { org, chain } = await lockedChain(trx, actor, id, { strictlyBelow: true });
    if (org.type !== 'reseller') throw new PanelError('validation_failed', { field: 'powers', detail: `powers: only resellers are granted powers (a ${org.type} holds ${org.type === 'customer' ? 'none' : 'them all'})` });
    const parent = chain[chain.length - 2];
    const granted = grantable(powers, powersOf(chain.slice(0, -1)), parent);
    await trx('panel_orgs').where({ id: org.id }).update({ powers: granted, updated_at: trx.fn.now() });
    await audit(trx, actor, { org, action: 'org.set_powers', target: { type: 'org', id: org.id }, before: { powers: org.powers }, after: { powers: granted } });
    // Below it, effective powers intersect along the chain, so sub-resellers lose what it lost.
    return detailsOf([...chain.slice(0, -1), { ...org, powers: granted }]).powers;
  });
}

// ---- regions (2.2) ----

export interface RegionsInput {
  preferred_region?: string | null;
  required_region?: string | null;
}

/** Sets an org's own regions from above (null clears); a required region set above cannot be changed below (400). */
export async function setRegions(db: Db, actor: Actor, id: string, input: RegionsInput) {
  return db.transaction(async (trx) => {
    const { org, chain } = await lockedChain(trx, actor, id, { strictlyBelow: true });
    checkRequiredRegion(chain.slice(0, -1), input.required_region, 'required_region');
    const before = { preferred_region: org.preferred_region, required_region: org.required_region };
    const after = { ...before, ...given(input) };
    await trx('panel_orgs').where({ id: org.id }).update({ ...after, updated_at: trx.fn.now() });
    await audit(trx, actor, { org, action: 'org.set_regions', target: { type: 'org', id: org.id }, before, after });
    return detailsOf([...chain.slice(0, -1), { ...org, ...after }]).regions;
  });
}

// ---- branding (2.7) ----

export const BRANDING_FIELDS = ['display_name', 'accent_color', 'support_email', 'login_hostname'] as const;
export type Branding = Record<(typeof BRANDING_FIELDS)[number], string | null>;

const brandingOf = (o: OrgRow): Branding => Object.fromEntries(BRANDING_FIELDS.map((f) => [f, o[f]])) as Branding;

/** Each field from the nearest level (the org itself first) that sets it. */
export function effectiveBranding(chain: OrgRow[]): Branding {
  return Object.fromEntries(BRANDING_FIELDS.map((f) => [f, chain.reduce<string | null>((v, l) => l[f] ?? v, null)])) as Branding;
}

const brandingView = (chain: ChainLevel[]) => ({ org_id: chain[chain.length - 1].id, own: brandingOf(chain[chain.length - 1]), effective: effectiveBranding(chain) });

export async function getBranding(db: Db, actor: Actor, id: string) {
  const org = await findInScope(db, actor, id);
  return brandingView(await loadChain(db, org.path));
}

/** Sets branding fields (null clears) of the caller's org or one below, if that org holds set_branding. */
export async function setBranding(db: Db, actor: Actor, id: string, input: Partial<Branding>) {
  return db.transaction(async (trx) => {
    const { org, chain } = await lockedChain(trx, actor, id);
    requirePower(chain, 'set_branding');
    const before = brandingOf(org);
    const after = { ...before, ...given(input) };
    try {
      await trx('panel_orgs').where({ id: org.id }).update({ ...after, updated_at: trx.fn.now() });
    } catch (err) {
      if (isUniqueViolation(err, 'panel_orgs_login_hostname_unique')) throw new PanelError('conflict', { field: 'login_hostname', detail: `the login hostname "${after.login_hostname}" is taken` });
      throw err;
    }
    await audit(trx, actor, { org, action: 'org.set_branding', target: { type: 'org', id: org.id }, before, after });
    return brandingView([...chain.slice(0, -1), { ...org, ...after }]);
  });
}

/** The sign-in page's branding (no sign-in): of the org whose login hostname is `hostname`, else the platform's. Only the four fields. */
export async function publicBranding(db: Db, hostname?: string): Promise<Branding> {
  const branded = hostname ? await db('panel_orgs').where({ login_hostname: hostname.toLowerCase() }).first('path') : undefined;
  const org = branded ?? (await db('panel_orgs').where({ type: 'platform' }).first('path'));
  return effectiveBranding(org ? await loadChain(db, org.path) : []);
}
