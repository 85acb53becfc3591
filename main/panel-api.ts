import { Client, Connection } from '@temporalio/client';
import type { ClientConfig } from 'pg';
import { createPanelApp } from '../api/panel/app';
import { createNodeApp } from '../api/panel/nodes/node-app';
import type { Db } from '../platform/db';
import { listen, type Listening } from '../platform/http-server';
import type { Logger } from '../platform/logger';
import type { PanelFlags } from '../platform/panel-flags';
import { startController, type ControllerBounds, type NodeController } from '../services/panel/controller';
import { ensureHostingNode, OperationWakeups } from '../services/panel/nodes';
import { pruneAttempts, THROTTLE_DEFAULTS, type ThrottleSettings } from '../services/panel/throttle';

export interface PanelRuntimeOptions {
  db: Db;
  temporalAddress: string;
  namespace: string;
  logger: Logger;
  port: number;
  host?: string;
  flags: PanelFlags;
  sealingKey: Buffer;
  sessionIdleMs: number;
  sessionMaxMs: number;
  throttle?: Partial<ThrottleSettings>;
  /** for the LISTEN and controller lock connections; default: the connection `db` was made with */
  databaseUrl?: string | ClientConfig;
  /** -controller-state: tick and heartbeat-age bounds (tests shorten them) */
  controller?: Partial<ControllerBounds>;
  /** -node-api-listen: heartbeat interval told to agents, fallback poll of waiting long polls */
  nodeApi?: { heartbeatSeconds?: number; pollFallbackMs?: number };
}

export interface PanelRuntime {
  url: string;
  /** the node API's URL with -node-api-listen, else null */
  nodeApiUrl: string | null;
  /** the controller with -controller-state, else null */
  controller: NodeController | null;
  close(): Promise<void>;
}

/** How to open connections of our own (LISTEN, the controller's lock) to the database of `db`. */
function connectionOf(db: Db): string | ClientConfig {
  // knex keeps the parsed connection string (its password as a hidden property).
  const c = (db.client as { config: { connection?: unknown } }).config.connection;
  if (typeof c === 'string') return c;
  const p = c as { user?: string; password?: string; host?: string; port?: string | number; database?: string; ssl?: ClientConfig['ssl'] };
  return { user: p.user, password: p.password, host: p.host, port: p.port === undefined ? undefined : Number(p.port), database: p.database, ssl: p.ssl };
}

/** Wires one panel API process (`panel-api serve`): Temporal client, Koa app, HTTP server. */
export async function startPanelApi(o: PanelRuntimeOptions): Promise<PanelRuntime> {
  const connection = await Connection.connect({ address: o.temporalAddress });
  const temporal = new Client({ connection, namespace: o.namespace });
  const throttle = { ...THROTTLE_DEFAULTS, ...o.throttle };
  // Sign-in counts of every address that ever signed in would pile up: prune the stale ones hourly.
  const prune = setInterval(() => pruneAttempts(o.db, throttle).catch((err) => o.logger.warn({ err }, 'pruning sign-in counts failed')), 3_600_000);
  prune.unref();
  const app = createPanelApp({
    db: o.db,
    temporal,
    logger: o.logger,
    auth: { sealingKey: o.sealingKey, sessionIdleMs: o.sessionIdleMs, sessionMaxMs: o.sessionMaxMs, throttle },
    requireTwoFactorRoles: o.flags.requireTwoFactorRoles,
    issuer: 'Hosting panel',
    secureCookies: false,
    controllerState: o.flags.controllerState,
  });
  // What has been started, stopped newest first on close (or when a later start fails).
  const stops: Array<() => Promise<unknown>> = [async () => clearInterval(prune), () => connection.close()];
  const stopAll = async () => {
    for (let stop = stops.pop(); stop; stop = stops.pop()) await stop().catch((err) => o.logger.error({ err }, 'panel: error while stopping'));
  };
  try {
    // The panel's own hosting node has a record from the start (sites and operations refer to it).
    await ensureHostingNode(o.db);
    let controller: NodeController | null = null;
    if (o.flags.controllerState) {
      const c = await startController({ databaseUrl: o.databaseUrl ?? connectionOf(o.db), logger: o.logger, ...o.controller });
      stops.push(() => c.stop());
      controller = c;
    }
    let nodeApi: Listening | null = null;
    if (o.flags.nodeApiListen) {
      const wakeups = new OperationWakeups(o.databaseUrl ?? connectionOf(o.db), o.logger);
      await wakeups.start();
      stops.push(() => wakeups.stop());
      const nodeApp = createNodeApp({ db: o.db, logger: o.logger, wakeups, ...o.nodeApi });
      const n = await listen(nodeApp.callback(), o.flags.nodeApiListen.port, o.flags.nodeApiListen.host);
      stops.push(() => n.close());
      nodeApi = n;
    }
    const http = await listen(app.callback(), o.port, o.host);
    stops.push(() => http.close());
    return { url: http.url, nodeApiUrl: nodeApi?.url ?? null, controller, close: stopAll };
  } catch (err) {
    await stopAll();
    throw err;
  }
}
