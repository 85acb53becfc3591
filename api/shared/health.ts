// GET /healthz (alive: 200 while the process answers, with what it sees of PostgreSQL and Temporal)
// and GET /readyz (ready: both answer and the process is not draining, else 503), on every HTTP
// role's port. Supervisors restart on /healthz; load balancers route on /readyz (docs/deploy.md).
import type { Client } from '@temporalio/client';
import type Koa from 'koa';
import { pingDatabase, type Db } from '../../platform/db';
import { isDraining } from '../../platform/readiness';

export interface HealthDeps {
  db: Db;
  temporal: Client;
}

const CHECK_TIMEOUT_MS = 2000;

async function within<T>(p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('timeout')), CHECK_TIMEOUT_MS)))]);
  } finally {
    clearTimeout(timer);
  }
}

async function dependencies(deps: HealthDeps): Promise<{ postgres: 'up' | 'down'; temporal: 'up' | 'down' }> {
  const [pg, temporal] = await Promise.allSettled([within(pingDatabase(deps.db)), within(deps.temporal.workflowService.getSystemInfo({}))]);
  return { postgres: pg.status === 'fulfilled' ? 'up' : 'down', temporal: temporal.status === 'fulfilled' ? 'up' : 'down' };
}

/** GET /healthz: 200 whenever the process answers; a dependency down is reported, not a 503 (that is /readyz). */
export function aliveCheck(deps: HealthDeps) {
  return async (ctx: Koa.Context) => {
    ctx.body = { ok: true, ...(await dependencies(deps)) };
  };
}

/** GET /readyz: 200 only when PostgreSQL and Temporal answer and no SIGTERM has come. */
export function readyCheck(deps: HealthDeps) {
  return async (ctx: Koa.Context) => {
    const seen = await dependencies(deps);
    const draining = isDraining();
    const ready = !draining && seen.postgres === 'up' && seen.temporal === 'up';
    ctx.status = ready ? 200 : 503;
    ctx.body = { ready, ...seen, draining };
  };
}
