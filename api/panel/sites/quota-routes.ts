import Router from '@koa/router';
import { z } from 'zod';
import { deleteSiteFile, listSiteFiles, uploadSiteFile, type SiteFilesDeps } from '../../../services/panel/sites/files';
import { accountUsage } from '../../../services/panel/sites/quotas';
import { siteResourceUsage } from '../../../services/panel/sites/resource-usage';
import { principalOf } from '../shared/auth';
import { parse } from '../shared/http';

// Soft quotas (spec 2 section 2.3 rules 3-4): the usage page of an org's accounts, a site's usage
// from its control group (issue 34), and the file
// manager of a website's docroot on the hosting node (list, upload the raw body, delete), whose
// uploads are refused at the disk and inode limits.

export const pathQuery = z.strictObject({ path: z.string().max(4096).default('') });

export function quotaRoutes(deps: SiteFilesDeps): Router {
  const r = new Router({ prefix: '/v1' });
  const poolMemory = async () => (await deps.hostingNode()?.poolMemoryMb()) ?? null;
  r.get('/orgs/:id/usage', async (ctx) => {
    ctx.body = await accountUsage(deps.db, principalOf(ctx), ctx.params.id, poolMemory);
  });
  r.get('/sites/:id/usage', async (ctx) => {
    ctx.body = await siteResourceUsage(deps.db, principalOf(ctx), ctx.params.id);
  });
  r.get('/sites/:id/files', async (ctx) => {
    const q = parse(pathQuery, ctx.query);
    ctx.body = await listSiteFiles(deps, principalOf(ctx), ctx.params.id, q.path);
  });
  r.put('/sites/:id/files', async (ctx) => {
    const q = parse(pathQuery, ctx.query);
    const declared = ctx.get('content-length');
    const length = /^\d+$/.test(declared) ? Number(declared) : null;
    let out;
    try {
      out = await uploadSiteFile(deps, principalOf(ctx), ctx.params.id, q.path, ctx.req, length);
    } catch (err) {
      // refused after reading began (the body cut): this connection cannot carry another request
      if (ctx.req.readableDidRead && !ctx.req.complete) ctx.set('connection', 'close');
      throw err;
    }
    ctx.status = out.replaced ? 200 : 201;
    ctx.body = out;
  });
  r.delete('/sites/:id/files', async (ctx) => {
    const q = parse(pathQuery, ctx.query);
    ctx.body = await deleteSiteFile(deps, principalOf(ctx), ctx.params.id, q.path);
  });
  return r;
}
