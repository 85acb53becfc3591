import Router from '@koa/router';
import { z } from 'zod';
import { createSite, deleteSite, editSite, getPlacement, getSite, listSites, offeredPhpVersions, setPhpSettings, setSiteSuspended, type SitesDeps } from '../../../services/panel/sites/sites';
import { listCronRuns } from '../../../services/panel/sites/cron-runs';
import { principalOf } from '../shared/auth';
import { bodyOf, parse } from '../shared/http';
import { pageLimit } from '../shared/schemas';

// Websites of customer accounts (spec 2 sections 2.6, 4.1, 4.2 "Add website", 4.4.1-4.4.2): create
// (201 with status pending; the node operation follows), read, edit (aliases, PHP version, cron
// lines: a node operation as creation is), list per org or subtree, the placement reason, suspend and unsuspend, operator PHP settings, delete (202; the rows go once
// the node removed the site).

export const createBody = z.strictObject({
  domain: z.string().max(253),
  aliases: z.array(z.string().max(253)).max(100).optional(),
  php_version: z.string().max(8).nullable().optional(),
  cron: z.array(z.string().max(1000)).max(100).optional(),
  php_values: z.record(z.string().max(64), z.number()).optional(),
  quota_mb: z.number().int().min(1).max(100_000_000).optional(),
  node: z.string().max(63).optional(),
});

export const editBody = z.strictObject({
  aliases: z.array(z.string().max(253)).max(100).optional(),
  php_version: z.string().max(8).nullable().optional(),
  cron: z.array(z.string().max(1000)).max(100).optional(),
  php_values: z.record(z.string().max(64), z.number().nullable()).optional(),
});

export const listQuery = z.strictObject({
  subtree: z.enum(['true', 'false']).optional(),
  status: z.enum(['pending', 'active', 'suspended', 'failed']).optional(),
  suspended: z.enum(['true', 'false']).optional(),
  limit: pageLimit,
  after: z.string().max(253).optional(),
});

export const phpBody = z.strictObject({
  allow_url_fopen: z.boolean().optional(),
  disabled_functions: z.string().max(64 * 65).optional(),
});

export function siteRoutes(deps: SitesDeps): Router {
  const r = new Router({ prefix: '/v1' });
  r.post('/orgs/:id/sites', async (ctx) => {
    const b = await bodyOf(ctx, createBody);
    ctx.status = 201;
    ctx.body = await createSite(deps, principalOf(ctx), ctx.params.id, b);
  });
  r.get('/orgs/:id/sites', async (ctx) => {
    const q = parse(listQuery, ctx.query);
    // placement: where a new site without a named node goes (the console offers the scheduler only when it runs)
    ctx.body = {
      ...(await listSites(deps.db, principalOf(ctx), ctx.params.id, { ...q, subtree: q.subtree === 'true', suspended: q.suspended === 'true' })),
      placement: deps.placement.mode === 'scheduled' ? 'scheduled' : 'hosting',
      // what a new site may choose (the console's PHP select)
      php_versions: await offeredPhpVersions(deps.db, deps.placement.mode),
    };
  });
  r.get('/sites/:id', async (ctx) => {
    ctx.body = await getSite(deps.db, principalOf(ctx), ctx.params.id);
  });
  r.patch('/sites/:id', async (ctx) => {
    const b = await bodyOf(ctx, editBody);
    ctx.body = await editSite(deps, principalOf(ctx), ctx.params.id, b);
  });
  r.get('/sites/:id/cron/runs', async (ctx) => {
    ctx.body = await listCronRuns(deps.db, principalOf(ctx), ctx.params.id);
  });
  r.get('/sites/:id/placement', async (ctx) => {
    ctx.body = await getPlacement(deps.db, principalOf(ctx), ctx.params.id);
  });
  r.post('/sites/:id/suspend', async (ctx) => {
    ctx.body = await setSiteSuspended(deps, principalOf(ctx), ctx.params.id, true);
  });
  r.post('/sites/:id/unsuspend', async (ctx) => {
    ctx.body = await setSiteSuspended(deps, principalOf(ctx), ctx.params.id, false);
  });
  r.patch('/sites/:id/php', async (ctx) => {
    const b = await bodyOf(ctx, phpBody);
    ctx.body = await setPhpSettings(deps, principalOf(ctx), ctx.params.id, b);
  });
  r.delete('/sites/:id', async (ctx) => {
    ctx.status = 202;
    ctx.body = await deleteSite(deps, principalOf(ctx), ctx.params.id);
  });
  return r;
}
