import { Client, Connection } from '@temporalio/client';
import { createPanelApp } from '../api/panel/app';
import type { Db } from '../platform/db';
import { listen } from '../platform/http-server';
import type { Logger } from '../platform/logger';
import type { PanelFlags } from '../platform/panel-flags';
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
}

export interface PanelRuntime {
  url: string;
  close(): Promise<void>;
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
  });
  const http = await listen(app.callback(), o.port, o.host);
  return {
    url: http.url,
    async close() {
      clearInterval(prune);
      await http.close();
      await connection.close();
    },
  };
}
