import Router from '@koa/router';
import type { Client } from '@temporalio/client';
import { z } from 'zod';
import type { Db } from '../../../platform/db';
import type { WebhookSettings } from '../../../services/panel/alerts/client';
import { allowList } from '../../../services/shared/webhook-targets';
import { changeEndpoint, createEndpoint, deleteEndpoint, getDelivery, listDeliveries, listEndpoints, redeliver } from '../../../services/panel/alerts/webhooks';
import { principalOf } from '../shared/auth';
import { bodyOf, parse } from '../shared/http';

// Webhooks (spec 2 section 6, issue 17 item 4), for the org and everything below the caller's:
//   POST   /v1/orgs/{id}/webhooks {url, events, description?}   → 201 with the secret (shown once)
//   GET    /v1/orgs/{id}/webhooks
//   PATCH  /v1/webhooks/{id} {url?, events?, description?, enabled?}
//   DELETE /v1/webhooks/{id}
//   GET    /v1/webhooks/{id}/deliveries[?limit]
//   GET    /v1/webhook-deliveries/{id}                          with its attempts
//   POST   /v1/webhook-deliveries/{id}/redeliver                → 202, a new delivery

export interface WebhookRouteOptions {
  db: Db;
  temporal: Client;
  sealingKey: Buffer;
  /** internal addresses the operator allows as targets */
  allowTargets: string[];
  settings: WebhookSettings;
}

export const endpointBody = z.strictObject({ url: z.string().min(1).max(2000), events: z.array(z.string()).min(1).max(20), description: z.string().max(200).optional() });
export const endpointChange = z.strictObject({ url: z.string().min(1).max(2000).optional(), events: z.array(z.string()).max(20).optional(), description: z.string().max(200).nullable().optional(), enabled: z.boolean().optional() });
export const limitQuery = z.object({ limit: z.coerce.number().int().min(1).max(500).default(100) });

export function webhookRoutes(o: WebhookRouteOptions): Router {
  const r = new Router({ prefix: '/v1' });
  const deps = { db: o.db, sealingKey: o.sealingKey, allowed: allowList(o.allowTargets) };
  r.post('/orgs/:id/webhooks', async (ctx) => {
    const b = await bodyOf(ctx, endpointBody);
    ctx.status = 201;
    ctx.body = await createEndpoint(deps, principalOf(ctx), ctx.params.id, b);
  });
  r.get('/orgs/:id/webhooks', async (ctx) => {
    ctx.body = await listEndpoints(o.db, principalOf(ctx), ctx.params.id);
  });
  r.patch('/webhooks/:id', async (ctx) => {
    ctx.body = await changeEndpoint(deps, principalOf(ctx), ctx.params.id, await bodyOf(ctx, endpointChange));
  });
  r.delete('/webhooks/:id', async (ctx) => {
    await deleteEndpoint(o.db, principalOf(ctx), ctx.params.id);
    ctx.status = 204;
  });
  r.get('/webhooks/:id/deliveries', async (ctx) => {
    ctx.body = await listDeliveries(o.db, principalOf(ctx), ctx.params.id, parse(limitQuery, ctx.query).limit);
  });
  r.get('/webhook-deliveries/:id', async (ctx) => {
    ctx.body = await getDelivery(o.db, principalOf(ctx), ctx.params.id);
  });
  r.post('/webhook-deliveries/:id/redeliver', async (ctx) => {
    ctx.status = 202;
    ctx.body = await redeliver(o.db, o.temporal, o.settings, principalOf(ctx), ctx.params.id);
  });
  return r;
}
