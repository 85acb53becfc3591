import { createHash, timingSafeEqual } from 'node:crypto';
import Router from '@koa/router';
import type { Context, Next } from 'koa';
import { z } from 'zod';
import { createKey, getKey, keySettingsSchema, listKeyRequests, listKeys, requestListQuery, revokeKey, updateKey, uuid, type GatewayVariant } from '../../../services/keys/keys';
import { GatewayError } from '../../../domain/shared/errors';
import type { KeyFormat } from '../../../services/keys/key-format';
import type { Db } from '../../../platform/db';
import { uncoveredQuery, uncoveredReport } from '../../../services/credits/uncovered';
import { catalogAdminRoutes } from './catalog-routes';
import { accountEventRoutes } from './event-routes';
import { KeyChangeAcks } from '../../../services/keys/change-acks';
import type { CacheInvalidation } from '../../../platform/cache-invalidation';
import { readJsonObject } from '../../shared/http';
import { serviceErrors } from '../../shared/service-errors';
import type { UpstreamHealth } from '../text/routing';
import { validate } from '../../shared/validate';

export interface AdminDeps {
  db: Db;
  /** ADMIN_TOKEN; null: the admin API refuses everything */
  token: string | null;
  /** format of keys created without one: `mt` in the keyed variant */
  defaultKeyFormat: KeyFormat;
  /** the running variant: keys of formats it rejects are refused */
  variant: GatewayVariant;
  invalidation: CacheInvalidation;
  /** GATEWAY_WEBHOOK_ALLOW_TARGETS */
  webhookAllowTargets?: string[];
  /** this process's route measures and cooled provider keys (GET /admin/upstream-health); absent: none shown */
  health?: UpstreamHealth;
}

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Authorization: Bearer <ADMIN_TOKEN> (or x-admin-token), compared in constant time. */
function adminAuth(token: string | null) {
  const expected = token === null ? null : digest(token);
  return async (ctx: Context, next: Next) => {
    if (expected === null) throw new GatewayError('admin_unauthorized', { detail: ' (ADMIN_TOKEN is not set on this server)' });
    const presented = /^Bearer\s+(\S+)\s*$/i.exec(ctx.get('authorization'))?.[1] ?? ctx.get('x-admin-token');
    if (!presented || !timingSafeEqual(digest(presented), expected)) throw new GatewayError('admin_unauthorized', { detail: '' });
    await next();
  };
}


export const createBody = keySettingsSchema
  .extend({
    account_id: uuid,
    label: z.string().max(200).optional(),
    format: z.enum(['gw_ai', 'rk_live', 'mt']).optional(),
  })
  .strict();

export const updateBody = keySettingsSchema.extend({ label: z.string().max(200).optional() }).strict();

/**
 * The admin HTTP API under /admin (README "Admin HTTP API"): keys with their per-key settings,
 * and each key's request log — the data behind the dashboard.
 */
export function adminRoutes(deps: AdminDeps): Router {
  const acks = new KeyChangeAcks(deps.db, deps.invalidation);
  const r = new Router({ prefix: '/admin' });
  r.use(adminAuth(deps.token), serviceErrors);

  // What this process learnt of its upstreams (issue 36 part 3): keys cooling down, route measures.
  r.get('/upstream-health', (ctx) => {
    const h = deps.health;
    ctx.body = {
      cooled_keys: (h?.keys.list() ?? []).map((c) => ({ provider: c.provider, key: c.key, status: c.status, until: new Date(c.until).toISOString() })),
      routes: (h?.measures.entries() ?? []).map(([k, m]) => ({ route: k, latency_ms: m.latencyMs === null ? null : Math.round(m.latencyMs), tokens_per_second: m.tokensPerSecond })),
    };
  });

  r.post('/keys', async (ctx) => {
    const b = validate(createBody, await readJsonObject(ctx));
    const { account_id, label, format, ...settings } = b;
    ctx.status = 201;
    ctx.body = await createKey(deps.db, { accountId: account_id, label, format: format ?? deps.defaultKeyFormat, settings, variant: deps.variant });
  });

  r.get('/keys/:id', async (ctx) => {
    ctx.body = await getKey(deps.db, ctx.params.id);
  });

  r.patch('/keys/:id', async (ctx) => {
    const b = validate(updateBody, await readJsonObject(ctx));
    const update = () => updateKey(deps.db, ctx.params.id, b);
    ctx.body = Object.keys(b).length > 0 ? await acks.change(ctx.params.id, update) : await update();
  });

  const revoke = async (ctx: Context) => {
    await acks.change(ctx.params.id, () => revokeKey(deps.db, ctx.params.id));
    ctx.body = await getKey(deps.db, ctx.params.id);
  };
  r.post('/keys/:id/revoke', revoke);
  r.delete('/keys/:id', revoke);

  r.get('/keys/:id/requests', async (ctx) => {
    const q = validate(requestListQuery, ctx.query);
    ctx.body = await listKeyRequests(deps.db, ctx.params.id, q);
  });

  catalogAdminRoutes(r, deps.db);
  accountEventRoutes(r, deps.db, deps.webhookAllowTargets ?? []);

  r.get('/reports/uncovered', async (ctx) => {
    ctx.body = await uncoveredReport(deps.db, validate(uncoveredQuery, ctx.query));
  });

  r.get('/accounts/:id/keys', async (ctx) => {
    ctx.body = { data: await listKeys(deps.db, ctx.params.id) };
  });

  return r;
}
