import Router from '@koa/router';
import { z } from 'zod';
import { withLimitsCascade } from '../../../services/panel/sites/site-limits';
import type { SitesDeps } from '../../../services/panel/sites/sites';
import { assignPackage, createPackage, deletePackage, getPackage, listPackages, updatePackage } from '../../../services/panel/orgs/packages';
import { principalOf } from '../shared/auth';
import { bodyOf } from '../shared/http';
import { limitsSchema, regionSchema } from '../shared/schemas';

// Packages (spec 2 section 2.4): those listed to an org, create, read, edit (limits are replaced
// whole), delete when unused, and assigning one to an org below (or null for custom limits).

export const packageBody = z.strictObject({
  name: z.string().trim().min(1).max(80),
  limits: limitsSchema,
  preferred_region: regionSchema.nullable().optional(),
  required_region: regionSchema.nullable().optional(),
});

export const assignBody = z.strictObject({ package_id: z.string().max(64).nullable() });
export const packagePatchBody = packageBody.partial();

export function packageRoutes(sites: SitesDeps): Router {
  const db = sites.db;
  const r = new Router({ prefix: '/v1' });
  r.get('/orgs/:id/packages', async (ctx) => {
    ctx.body = await listPackages(db, principalOf(ctx), ctx.params.id);
  });
  r.post('/orgs/:id/packages', async (ctx) => {
    const b = await bodyOf(ctx, packageBody);
    ctx.status = 201;
    ctx.body = await createPackage(db, principalOf(ctx), ctx.params.id, b);
  });
  r.put('/orgs/:id/package', async (ctx) => {
    const b = await bodyOf(ctx, assignBody);
    ctx.body = await withLimitsCascade(sites, (cascade) => assignPackage(db, principalOf(ctx), ctx.params.id, b.package_id, cascade));
  });
  r.get('/packages/:id', async (ctx) => {
    ctx.body = await getPackage(db, principalOf(ctx), ctx.params.id);
  });
  r.patch('/packages/:id', async (ctx) => {
    const patch = await bodyOf(ctx, packagePatchBody);
    ctx.body = await withLimitsCascade(sites, (cascade) => updatePackage(db, principalOf(ctx), ctx.params.id, patch, cascade));
  });
  r.delete('/packages/:id', async (ctx) => {
    await deletePackage(db, principalOf(ctx), ctx.params.id);
    ctx.status = 204;
  });
  return r;
}
