import type { Client } from '@temporalio/client';
import Koa from 'koa';
import type { Db } from '../../../platform/db';
import type { Logger } from '../../../platform/logger';
import type { OperationWakeups } from '../../../services/panel/nodes/queue';
import { panelContext } from '../shared/http';
import { agentRoutes } from './agent-routes';

export interface NodeApiDeps {
  db: Db;
  temporal: Client;
  logger: Logger;
  wakeups: OperationWakeups;
  /** told to agents at enrolment; default 10 s (a node is alive while its last heartbeat is ≤ 30 s old) */
  heartbeatSeconds?: number;
  /** how often a waiting long poll re-reads the queue besides NOTIFY wake-ups; default 5 s */
  pollFallbackMs?: number;
  /**
   * an operation handed out and neither reported nor expired within this lease is handed out again
   * (its answer may have been lost); default 30 s. Agents report each batch before they poll again.
   */
  operationLeaseMs?: number;
}

/** The node API (`panel-api serve -node-api-listen ADDR`), on a listener of its own: what agents call. */
export function createNodeApp(d: NodeApiDeps): Koa {
  const app = new Koa();
  app.proxy = false;
  app.use(panelContext(d.logger));
  const routes = agentRoutes({ db: d.db, temporal: d.temporal, logger: d.logger, wakeups: d.wakeups, heartbeatSeconds: d.heartbeatSeconds ?? 10, pollFallbackMs: d.pollFallbackMs ?? 5000, operationLeaseMs: d.operationLeaseMs ?? 30_000 });
  app.use(routes.routes());
  app.use(routes.allowedMethods());
  return app;
}
