import Router from '@koa/router';
import { z } from 'zod';
import { createImport, getImport, runImport, type ImportsDeps } from '../../../services/panel/imports/imports';
import { listImports } from '../../../services/panel/imports/list';
import { principalOf } from '../shared/auth';
import { parse } from '../shared/http';

// Legacy account imports (spec 2 sections 4.2 "Legacy import", 4.4.4; needs `migration.run`):
// upload an archive into a customer account (the raw body; 201 with plan, report and quota check,
// or refused with the copy deleted), read its progress, run it (again).

export const uploadQuery = z.strictObject({ name: z.string().min(1).max(200).optional() });

export function importRoutes(deps: ImportsDeps): Router {
  const r = new Router({ prefix: '/v1' });
  r.post('/orgs/:id/imports', async (ctx) => {
    const q = parse(uploadQuery, ctx.query);
    try {
      ctx.body = await createImport(deps, principalOf(ctx), ctx.params.id, ctx.req, q.name ?? 'archive.tar.gz');
    } catch (err) {
      // refused before the body was read whole: this connection cannot carry another request
      if (ctx.req.readableDidRead && !ctx.req.complete) ctx.set('connection', 'close');
      throw err;
    }
    ctx.status = 201;
  });
  r.get('/orgs/:id/imports', async (ctx) => {
    ctx.set('cache-control', 'no-store');
    ctx.body = await listImports(deps, principalOf(ctx), ctx.params.id);
  });
  r.get('/imports/:id', async (ctx) => {
    ctx.set('cache-control', 'no-store');
    ctx.body = await getImport(deps.db, principalOf(ctx), ctx.params.id);
  });
  r.post('/imports/:id/run', async (ctx) => {
    ctx.body = await runImport(deps, principalOf(ctx), ctx.params.id);
    ctx.status = 202;
  });
  return r;
}
