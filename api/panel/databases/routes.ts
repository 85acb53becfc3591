import Router from '@koa/router';
import { z } from 'zod';
import { createDatabase, deleteDatabase, getDatabase, listDatabases, resetDatabasePassword, type DatabasesDeps } from '../../../services/panel/databases/databases';
import { principalOf } from '../shared/auth';
import { bodyOf } from '../shared/http';

// Customer databases (spec 2 sections 2.3, 2.6): create under a customer account (201 pending with
// the password, shown once; the node operation follows), list per org subtree, read, delete (202;
// the row goes once the node dropped the database), reset its user's password (202 with the new
// password, shown once; the body repeats the database id to confirm).

export const createBody = z.strictObject({
  name: z.string().min(1).max(64),
  user: z.string().min(1).max(32).optional(),
  node: z.string().max(63).optional(),
});

export const resetBody = z.strictObject({ confirm: z.string().max(64) });

export function databaseRoutes(deps: DatabasesDeps): Router {
  const r = new Router({ prefix: '/v1' });
  r.post('/orgs/:id/databases', async (ctx) => {
    const b = await bodyOf(ctx, createBody);
    const created = await createDatabase(deps, principalOf(ctx), ctx.params.id, b);
    ctx.status = 201;
    ctx.set('cache-control', 'no-store');
    ctx.body = created;
  });
  r.get('/orgs/:id/databases', async (ctx) => {
    ctx.body = { databases: await listDatabases(deps.db, principalOf(ctx), ctx.params.id) };
  });
  r.get('/databases/:id', async (ctx) => {
    ctx.body = await getDatabase(deps.db, principalOf(ctx), ctx.params.id);
  });
  r.delete('/databases/:id', async (ctx) => {
    const out = await deleteDatabase(deps, principalOf(ctx), ctx.params.id);
    ctx.status = 202;
    ctx.body = out;
  });
  r.post('/databases/:id/password', async (ctx) => {
    const b = await bodyOf(ctx, resetBody);
    ctx.set('cache-control', 'no-store');
    ctx.status = 202;
    ctx.body = await resetDatabasePassword(deps, principalOf(ctx), ctx.params.id, b.confirm);
  });
  return r;
}
