import Router from '@koa/router';
import type { Client } from '@temporalio/client';
import Koa from 'koa';
import type { Db } from '../../platform/db';
import type { Logger } from '../../platform/logger';
import { authenticate } from '../auth';
import type { AuthStore } from '../auth-store';
import type { Catalog } from '../catalog';
import { requestContext } from '../http';
import type { Reservations } from '../reservations';
import { chatCompletions } from './chat';
import { credits, generation, keyInfo, models, usage } from './reads';

export interface GatewayDeps {
  db: Db;
  temporal: Client;
  logger: Logger;
  authStore: AuthStore;
  catalog: Catalog;
  reservations: Reservations;
  upstreamTimeoutMs: number;
}

/** The gateway of spec 1: inference dialects and the billing reads. */
export function createGatewayApp(deps: GatewayDeps): Koa {
  const app = new Koa();
  app.proxy = false;
  app.use(requestContext(deps.logger, null));

  const health = new Router();
  health.get('/healthz', healthCheck(deps));
  app.use(health.routes());

  const v1 = new Router({ prefix: '/v1' });
  v1.use(authenticate(deps.authStore));
  v1.post('/chat/completions', chatCompletions(deps));
  v1.get('/credits', credits(deps.db));
  v1.get('/key', keyInfo(deps.db));
  v1.get('/generation', generation(deps.db));
  v1.get('/usage', usage(deps.db));
  v1.get('/models', models(deps.catalog));
  app.use(v1.routes());
  return app;
}

/** 200 only when PostgreSQL and Temporal both answer. */
export function healthCheck(deps: { db: Db; temporal: Client }) {
  return async (ctx: Koa.Context) => {
    const timeout = <T>(p: Promise<T>) => Promise.race([p, new Promise<never>((_, rej) => setTimeout(() => rej(new Error('timeout')), 2000))]);
    const [pg, temporal] = await Promise.allSettled([
      timeout(deps.db.raw('SELECT 1')),
      timeout(deps.temporal.workflowService.getSystemInfo({})),
    ]);
    const ok = pg.status === 'fulfilled' && temporal.status === 'fulfilled';
    ctx.status = ok ? 200 : 503;
    ctx.body = { ok, postgres: pg.status === 'fulfilled' ? 'up' : 'down', temporal: temporal.status === 'fulfilled' ? 'up' : 'down' };
  };
}
