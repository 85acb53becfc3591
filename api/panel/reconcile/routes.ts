import Router from '@koa/router';
import type { Client } from '@temporalio/client';
import type { Context, Next } from 'koa';
import { z } from 'zod';
import { PanelError } from '../../../domain/panel/errors';
import type { Db } from '../../../platform/db';
import { nextReconcilePass, type ReconcileSettings } from '../../../services/panel/reconcile/client';
import { runPassNow } from '../../../services/panel/reconcile/run';
import { listReconcileDatabases } from '../../../services/panel/reconcile/databases';
import { RECONCILE_STATUSES } from '../../../domain/panel/reconcile';
import { changePolicy, listReconcileSites, passReport, reconcileSiteView, reconcileSummary } from '../../../services/panel/reconcile/views';
import { principalOf } from '../shared/auth';
import { bodyOf, parse } from '../shared/http';

// Reconciliation of the hosting node (spec 2 sections 2.6, 3, 4.1): the cluster summary, a pass
// now, a pass's report, each site's view and its policy (review, then confirm with the token).
// Cluster pages: logins of any other org get the answer of an unknown route; platform logins
// read, only a platform_admin runs passes and changes policies (403 otherwise).

export interface ReconcileRouteOptions {
  db: Db;
  temporal: Client;
  settings: ReconcileSettings;
}

function platformOnly(ctx: Context, next: Next) {
  if (principalOf(ctx).orgType !== 'platform') throw new PanelError('route_not_found', { method: ctx.method, path: ctx.path });
  return next();
}

export const listQuery = z.strictObject({
  status: z.enum([...RECONCILE_STATUSES, 'not_checked']).optional(),
  policy: z.enum(['observe', 'remediate']).optional(),
  limit: z.coerce.number().int().min(1).max(500).default(100),
  after: z.uuid().optional(),
});

export const policyBody = z.strictObject({ policy: z.enum(['observe', 'remediate']), confirmation_token: z.string().min(1).max(200).optional() });

export function reconcileRoutes(o: ReconcileRouteOptions): Router {
  const r = new Router({ prefix: '/v1/reconcile' });
  r.use(platformOnly);
  r.get('/', async (ctx) => {
    const nextPassAt = o.settings.mode ? await nextReconcilePass(o.temporal) : null;
    ctx.body = await reconcileSummary(o.db, principalOf(ctx), { mode: o.settings.mode, nextPassAt, intervalMs: o.settings.mode ? o.settings.intervalMs : null });
  });
  r.post('/run', async (ctx) => {
    const run = await runPassNow({ db: o.db, temporal: o.temporal, settings: o.settings }, principalOf(ctx));
    ctx.status = run.started ? 202 : 200;
    ctx.body = run;
  });
  r.get('/passes/:id', async (ctx) => {
    ctx.body = await passReport(o.db, principalOf(ctx), ctx.params.id);
  });
  r.get('/sites', async (ctx) => {
    ctx.body = await listReconcileSites(o.db, principalOf(ctx), parse(listQuery, ctx.query));
  });
  r.get('/databases', async (ctx) => {
    ctx.body = await listReconcileDatabases(o.db, principalOf(ctx));
  });
  r.get('/sites/:id', async (ctx) => {
    ctx.body = await reconcileSiteView(o.db, principalOf(ctx), ctx.params.id);
  });
  r.post('/sites/:id/policy', async (ctx) => {
    const b = await bodyOf(ctx, policyBody);
    ctx.body = await changePolicy(o.db, principalOf(ctx), ctx.params.id, b);
  });
  return r;
}
