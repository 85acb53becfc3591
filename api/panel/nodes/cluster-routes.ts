import Router from '@koa/router';
import type { Context, Next } from 'koa';
import { z } from 'zod';
import { PanelError } from '../../../domain/panel/errors';
import type { Db } from '../../../platform/db';
import { addNode, clusterNode, clusterNodes, deleteNode, STATE_UNAVAILABLE } from '../../../services/panel/nodes/nodes';
import { relocationPlan } from '../../../services/panel/nodes/relocation';
import type { SitesDeps } from '../../../services/panel/sites/sites';
import { principalOf } from '../shared/auth';
import { bodyOf } from '../shared/http';

// The cluster pages of the platform's logins (spec 2 sections 2.6, 4.1): node records. Logins of
// any other org get the answer of an unknown route (cluster pages belong to logins at the root);
// a platform read_only login reads, only a platform_admin changes. Without -controller-state this
// process has no node records access: reads say so (200), changes are refused.

export interface ClusterRouteOptions {
  db: Db;
  controllerState: boolean;
  /** placement settings, for the relocation advice */
  sites: Pick<SitesDeps, 'db' | 'placement' | 'logger'>;
}

function platformOnly(ctx: Context, next: Next) {
  if (principalOf(ctx).orgType !== 'platform') throw new PanelError('route_not_found', { method: ctx.method, path: ctx.path });
  return next();
}

export const nodeBody = z.strictObject({ name: z.string().max(63) });

export function clusterRoutes(o: ClusterRouteOptions): Router {
  const r = new Router({ prefix: '/v1/cluster' });
  r.use(platformOnly);
  const withRecords = (ctx: Context) => {
    if (o.controllerState) return true;
    if (ctx.method === 'GET') ctx.body = STATE_UNAVAILABLE;
    else throw new PanelError('conflict', { detail: STATE_UNAVAILABLE.message });
    return false;
  };

  r.get('/nodes', async (ctx) => {
    if (withRecords(ctx)) ctx.body = await clusterNodes(o.db);
  });
  r.post('/nodes', async (ctx) => {
    const b = await bodyOf(ctx, nodeBody);
    if (!withRecords(ctx)) return;
    ctx.status = 201;
    ctx.body = { ...(await addNode(o.db, principalOf(ctx), b.name)), message: 'the node token is shown once: give it to the node agent (-token-file)' };
  });
  r.get('/nodes/:name/relocation-plan', async (ctx) => {
    if (withRecords(ctx)) ctx.body = await relocationPlan(o.sites, ctx.params.name);
  });
  r.get('/nodes/:name', async (ctx) => {
    if (withRecords(ctx)) ctx.body = await clusterNode(o.db, ctx.params.name);
  });
  r.delete('/nodes/:name', async (ctx) => {
    if (!withRecords(ctx)) return;
    await deleteNode(o.db, principalOf(ctx), ctx.params.name);
    ctx.status = 204;
  });
  return r;
}
