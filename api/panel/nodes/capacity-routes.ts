import Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import { notFound } from '../../../domain/panel/errors';
import type { Db } from '../../../platform/db';
import { capacityView, clearCapacity, declareCapacity } from '../../../services/panel/nodes/capacity';
import { principalOf } from '../shared/auth';
import { bodyOf } from '../shared/http';

// Declared capacity (spec 2 section 4.2): a cluster page, so only for logins at the root of the tree
// (anything else answers 404, as for every cluster page).

const amount = z.number().int('must be a whole number').positive('must be more than 0').max(1e15).nullable().default(null);
export const declareBody = z
  .strictObject({ cpu_percent: amount, memory_mb: amount, disk_mb: amount, overcommit_percent: z.number().int().min(100, 'must be at least 100 (100 = no overcommit)').max(10_000).default(100) })
  .refine((b) => b.cpu_percent !== null || b.memory_mb !== null || b.disk_mb !== null, { message: 'declare at least one of cpu_percent, memory_mb, disk_mb (or DELETE to clear)', path: ['cpu_percent'] });

function platformOnly(ctx: Context) {
  const p = principalOf(ctx);
  if (p.orgType !== 'platform') throw notFound('page');
  return p;
}

export function capacityRoutes(db: Db): Router {
  const r = new Router({ prefix: '/v1/cluster/capacity' });
  r.get('/', async (ctx) => {
    platformOnly(ctx);
    ctx.body = await capacityView(db);
  });
  r.put('/', async (ctx) => {
    const p = platformOnly(ctx);
    ctx.body = await declareCapacity(db, p, await bodyOf(ctx, declareBody));
  });
  r.delete('/', async (ctx) => {
    ctx.body = await clearCapacity(db, platformOnly(ctx));
  });
  return r;
}
