import Router from '@koa/router';
import { z } from 'zod';
import type { Actor } from '../../../services/panel/shared/actor';
import { cascadeOrgStatus, startCascade } from '../../../services/panel/sites/org-suspension';
import type { SitesDeps } from '../../../services/panel/sites/sites';
import { listAudit } from '../../../services/panel/shared/audit';
import { findInScope } from '../../../services/panel/shared/chain';
import { createOrg, deleteOrg, getOrg, listOrgs, renameOrg, setOrgStatus } from '../../../services/panel/orgs/orgs';
import { principalOf } from '../shared/auth';
import { bodyOf, parse } from '../shared/http';
import { limitsSchema, pageLimit, powersSchema, regionSchema } from '../shared/schemas';

// The org tree (spec 2 sections 1, 2.2, 3): list and read the subtree, create below, rename,
// suspend and reactivate from above, delete with confirmation, and the subtree's audit log.

export const createBody = z.strictObject({
  parent_id: z.string().optional(),
  type: z.enum(['provider', 'reseller', 'customer']),
  name: z.string(),
  login: z.strictObject({ username: z.string().max(64), password: z.string().max(256) }),
  limits: limitsSchema.optional(),
  package_id: z.string().optional(),
  powers: powersSchema.optional(),
  preferred_region: regionSchema.optional(),
  required_region: regionSchema.optional(),
});

export const listQuery = z.strictObject({
  root: z.string().optional(),
  children: z.enum(['true', 'false']).optional(),
  type: z.enum(['platform', 'provider', 'reseller', 'customer']).optional(),
  status: z.enum(['active', 'suspended']).optional(),
  q: z.string().max(80).optional(),
  limit: pageLimit,
  after: z.string().max(4000).optional(),
});

export const renameBody = z.strictObject({ name: z.string() });
export const deleteBody = z.strictObject({ confirm: z.string() });

export const auditQuery = z.strictObject({ limit: pageLimit, before: z.coerce.number().int().positive().optional() });

/** Suspends or reactivates an org and, after the commit, starts the node operations of everything below it. */
async function changeStatus(deps: SitesDeps, actor: Actor, id: string, status: 'active' | 'suspended') {
  const { org, below } = await setOrgStatus(deps.db, actor, id, status, cascadeOrgStatus);
  await startCascade(deps, below);
  return { ...org, applying: { sites: below.sites.length, databases: below.databases.length } };
}

export function orgRoutes(sites: SitesDeps): Router {
  const db = sites.db;
  const r = new Router({ prefix: '/v1/orgs' });
  r.get('/', async (ctx) => {
    const q = parse(listQuery, ctx.query);
    ctx.body = await listOrgs(db, principalOf(ctx), { ...q, children: q.children === 'true' });
  });
  r.post('/', async (ctx) => {
    const b = await bodyOf(ctx, createBody);
    ctx.status = 201;
    ctx.body = await createOrg(db, principalOf(ctx), b);
  });
  r.get('/:id', async (ctx) => {
    ctx.body = await getOrg(db, principalOf(ctx), ctx.params.id);
  });
  r.patch('/:id', async (ctx) => {
    const b = await bodyOf(ctx, renameBody);
    ctx.body = await renameOrg(db, principalOf(ctx), ctx.params.id, b.name);
  });
  r.post('/:id/suspend', async (ctx) => {
    ctx.body = await changeStatus(sites, principalOf(ctx), ctx.params.id, 'suspended');
  });
  r.post('/:id/reactivate', async (ctx) => {
    ctx.body = await changeStatus(sites, principalOf(ctx), ctx.params.id, 'active');
  });
  r.delete('/:id', async (ctx) => {
    const b = await bodyOf(ctx, deleteBody);
    await deleteOrg(db, principalOf(ctx), ctx.params.id, b.confirm);
    ctx.status = 204;
  });
  r.get('/:id/audit', async (ctx) => {
    const q = parse(auditQuery, ctx.query);
    const org = await findInScope(db, principalOf(ctx), ctx.params.id);
    ctx.body = await listAudit(db, org.path, q);
  });
  return r;
}
