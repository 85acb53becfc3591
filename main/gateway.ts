import path from 'node:path';
import type http from 'node:http';
import { markDraining } from '../platform/readiness';
import { Client, Connection } from '@temporalio/client';
import type { Config } from '../platform/config';
import type { Db } from '../platform/db';
import { listen } from '../platform/http-server';
import type { Logger } from '../platform/logger';
import { adminRoutes } from '../api/gateway/admin/routes';
import { AuthStore } from '../services/keys/auth-store';
import { CacheInvalidation } from '../platform/cache-invalidation';
import { Catalog } from '../services/catalog/catalog';
import { createGatewayApp } from '../api/gateway/app';
import { Drain } from '../api/gateway/shared/client-watch';
import { gatewayClientError } from '../api/shared/http';
import type { CorsOrigins } from '../api/gateway/shared/cors';
import { KEYED_DEFAULTS, startKeyedVariant, startRequestLog, type KeyedSettings, type KeyedVariant } from '../api/gateway/keyed/variant';
import { Reservations } from '../services/credits/holds';
import { OutcomeLine } from '../services/credits/outcome-line';
import { JOURNAL_DEFAULTS, OutcomeJournal, type JournalSettings } from '../services/credits/outcome-journal';
import { registerApiProcess } from '../services/credits/processes';
import { createDashboard } from '../api/gateway/dashboard/app';
import { clientIpResolver } from '../api/gateway/keyed/client-ip';
import { DASHBOARD_AUTH_DEFAULTS, type DashboardAuthSettings } from '../services/dashboard/sessions';
import { loadSealingKey } from '../platform/secret-box';
import { observedClientOptions } from '../platform/temporal-client';
import { temporalConnectOptions, temporalSecurity, type TemporalSecurity } from '../platform/temporal-connection';
import { BREAKER_DEFAULTS, CircuitBreakers, type BreakerSettings } from '../domain/catalog/routing';
import { ROUTING_DEFAULTS, UpstreamHealth, type RoutingSettings } from '../api/gateway/text/routing';
import { REFUSAL_LOG_DEFAULTS, RefusalLog, type RefusalLogSettings } from '../api/shared/refusal-log';
import { RESPONSE_CACHE_DEFAULTS, ResponseCache, type CacheBounds } from '../services/cache/responses';

export interface GatewayRuntimeOptions {
  db: Db;
  databaseUrl: string;
  temporalAddress: string;
  /** TLS and API key of the Temporal connection (platform/temporal-connection); absent: plain gRPC */
  temporalSecurity?: TemporalSecurity;
  namespace: string;
  logger: Logger;
  port: number;
  host?: string;
  upstreamTimeoutMs: number;
  keyCacheTtlMs: number;
  /** how often this process proves it is alive (api_processes); default 5 s */
  heartbeatMs?: number;
  /** GATEWAY_VARIANT: `credits` (spec 1, default) or `keyed` (spec 3 A) */
  variant?: 'credits' | 'keyed';
  /** ADMIN_TOKEN of the admin HTTP API; absent: it answers 401 to everything */
  adminToken?: string | null;
  /** settings of the keyed variant; defaults in KEYED_DEFAULTS */
  keyed?: Partial<KeyedSettings>;
  /** the dashboard's sign-in settings; the sealing key defaults to TESTRUN_SECRET's (platform/secret-box) */
  dashboardAuth?: Partial<DashboardAuthSettings>;
  /** CORS_ORIGINS; absent: no CORS */
  corsOrigins?: CorsOrigins;
  /** ROUTE_BREAKER_*: when a model's route is skipped after failures; absent: BREAKER_DEFAULTS */
  routeBreaker?: Partial<BreakerSettings>;
  /** ROUTE_RETRY_BUDGET_MS, UPSTREAM_KEY_COOLDOWN_MS; absent: ROUTING_DEFAULTS */
  routing?: Partial<RoutingSettings>;
  /** GATEWAY_WEBHOOK_ALLOW_TARGETS: internal addresses account webhooks may target */
  webhookAllowTargets?: string[];
  /** where outcomes PostgreSQL cannot take wait (DATA_DIR/outcome-journal) and its bounds; absent: in memory */
  outcomeJournal?: Partial<JournalSettings>;
  /** REFUSAL_LOG_LINES_PER_MINUTE: the info lines of 4xx answers per client; defaults in REFUSAL_LOG_DEFAULTS */
  refusalLog?: Partial<RefusalLogSettings>;
  /** RESPONSE_CACHE_MAX_ROWS / _BYTES; defaults in RESPONSE_CACHE_DEFAULTS */
  responseCache?: Partial<CacheBounds>;
}

export interface GatewayRuntime {
  url: string;
  server: http.Server;
  close(): Promise<void>;
  /**
   * SIGTERM: stops accepting connections, reports not ready, lets the requests in flight finish
   * for up to `graceMs`, cuts what is left (a server-side cut, not billed: docs/credits.md), then closes.
   */
  drain(graceMs: number): Promise<void>;
}

/** Wires one gateway API process: Temporal client, caches, Koa app, HTTP server. */
export async function startGatewayApi(o: GatewayRuntimeOptions): Promise<GatewayRuntime> {
  const connection = await Connection.connect(temporalConnectOptions(o.temporalAddress, o.temporalSecurity));
  const temporal = new Client({ connection, namespace: o.namespace, ...observedClientOptions() });
  const invalidation = new CacheInvalidation(o.databaseUrl, o.logger);
  await invalidation.start();
  const catalog = new Catalog(o.db, invalidation);
  const authStore = new AuthStore(o.db, invalidation, o.keyCacheTtlMs);
  const isKeyed = o.variant === 'keyed';
  const liveness = await registerApiProcess(o.db, o.logger, o.heartbeatMs);
  // Outcomes leave the process before the answer's last byte (services/credits/outcome-line.ts).
  const outcomeLine = new OutcomeLine(o.databaseUrl, o.logger);
  await outcomeLine.start();
  // The hold statements (one batch at a time) on a connection of their own, off the pool (services/credits/holds.ts).
  const holdLine = new OutcomeLine(o.databaseUrl, o.logger, 1, 'hold line');
  await holdLine.start();
  const journal = new OutcomeJournal(o.db, o.logger, { dir: null, ...JOURNAL_DEFAULTS, ...o.outcomeJournal });
  journal.open(); // replays what processes that are gone left in it
  const reservations = new Reservations(o.db, {
    processId: liveness.id,
    outcomeLine,
    holdLine,
    journal,
    logger: o.logger,
    // Keyed variant: every hold also takes part in its key's spend limit.
    trackKeySpend: isKeyed,
  });
  const keyed: KeyedVariant | undefined = isKeyed
    ? await startKeyedVariant({ db: o.db, logger: o.logger, authStore, invalidation, settings: { ...KEYED_DEFAULTS, ...o.keyed } })
    : undefined;
  // The credits variant keeps the same request log (REQUEST_LOG_*), keyed by its request ids.
  const creditsLog = isKeyed ? undefined : startRequestLog(o.db, o.logger, { ...KEYED_DEFAULTS, ...o.keyed });
  const routing = { ...ROUTING_DEFAULTS, ...o.routing };
  const health = new UpstreamHealth(routing, Date.now);
  const admin = adminRoutes({ health, db: o.db, token: o.adminToken ?? null, defaultKeyFormat: isKeyed ? 'mt' : 'gw_ai', variant: isKeyed ? 'keyed' : 'credits', invalidation, webhookAllowTargets: o.webhookAllowTargets ?? [] });
  const dashboard = createDashboard({
    db: o.db,
    logger: o.logger,
    invalidation,
    variant: isKeyed ? 'keyed' : 'credits',
    // Sign-in throttling per client IP believes X-Forwarded-For from TRUSTED_PROXIES only, as the keyed lockout does.
    clientIp: clientIpResolver({ ...KEYED_DEFAULTS, ...o.keyed }.trustedProxies),
    auth: { ...DASHBOARD_AUTH_DEFAULTS, sealingKey: o.dashboardAuth?.sealingKey ?? loadSealingKey(), ...o.dashboardAuth },
  });
  const responseCache = new ResponseCache(o.db, o.logger, { ...RESPONSE_CACHE_DEFAULTS, ...o.responseCache });
  responseCache.startPruning();
  const drain = new Drain();
  const refusals = new RefusalLog(o.logger, { ...REFUSAL_LOG_DEFAULTS, ...o.refusalLog });
  const app = createGatewayApp({ db: o.db, temporal, logger: o.logger, authStore, catalog, reservations, upstreamTimeoutMs: o.upstreamTimeoutMs, keyed, admin, dashboard, requestLogging: creditsLog?.middleware, corsOrigins: o.corsOrigins, breakers: new CircuitBreakers({ ...BREAKER_DEFAULTS, ...o.routeBreaker }, Date.now), health, retryBudgetMs: routing.retryBudgetMs, refusals, drain, responseCache });
  const listening = await listen(app.callback(), o.port, o.host, gatewayClientError);
  // Settled once nothing has been in flight for 200 ms: a client whose stream began before the
  // drain may still send one more request on its connection (answered with Connection: close).
  const settle = async (untilMs: number) => {
    for (let quietSince = Date.now(); Date.now() - quietSince < 200 && Date.now() < untilMs; ) {
      await new Promise((r) => setTimeout(r, 50));
      if (listening.inFlight() > 0) quietSince = Date.now();
    }
  };
  // Then idle keep-alive connections get a few seconds to be used once more or closed by their
  // clients: closing one under a client that is sending on it loses that request.
  const IDLE_WAIT_MS = 5000;
  const runtime: GatewayRuntime = {
    url: listening.url,
    server: listening.server,
    async drain(graceMs) {
      drain.draining = true;
      markDraining(); // /readyz: 503 from now on
      listening.stopAccepting(); // answers say Connection: close from now on
      o.logger.info({ inFlight: listening.inFlight(), graceMs }, 'draining: requests in flight may finish');
      const end = Date.now() + graceMs;
      await settle(end);
      const idleEnd = Math.min(end, Date.now() + IDLE_WAIT_MS);
      while (listening.openConnections() > 0 && Date.now() < idleEnd) {
        await new Promise((r) => setTimeout(r, 50));
        if (listening.inFlight() > 0) await settle(end);
      }
      if (listening.inFlight() > 0) {
        o.logger.warn({ inFlight: listening.inFlight() }, 'drain grace over: cutting the requests still in flight');
        drain.cutAll();
        await settle(Date.now() + 2000); // their error events and outcome reports go out
      }
      await runtime.close();
    },
    async close() {
      await listening.close();
      refusals.close(); // the suppressed counts of open windows
      responseCache.close();
      await keyed?.close();
      await creditsLog?.log.close();
      await liveness.stop();
      await reservations.flushOutcomes(); // outcomes queued for their batch's interval go out now
      await outcomeLine.stop();
      await holdLine.stop();
      journal.stop();
      await invalidation.stop();
      await connection.close();
    },
  };
  return runtime;
}

/** A gateway process's options from the configuration: shared by `npm start` and the `gateway` role. */
export function gatewayOptions(config: Config, d: { db: Db; databaseUrl: string; temporalAddress: string; logger: Logger }): GatewayRuntimeOptions {
  return {
    ...d,
    namespace: config.TEMPORAL_NAMESPACE,
    temporalSecurity: temporalSecurity(config),
    port: config.GATEWAY_PORT,
    host: '0.0.0.0',
    upstreamTimeoutMs: config.UPSTREAM_TIMEOUT_MS,
    keyCacheTtlMs: config.KEY_CACHE_TTL_MS,
    // one file per process; a process on the same DATA_DIR replays what a dead one left (docs/credits.md)
    outcomeJournal: { dir: path.join(config.dataDir, 'outcome-journal'), maxEntries: config.OUTCOME_JOURNAL_MAX_ENTRIES, maxBytes: config.OUTCOME_JOURNAL_MAX_BYTES, batchIntervalMs: config.OUTCOME_BATCH_INTERVAL_MS },
    variant: config.GATEWAY_VARIANT,
    adminToken: config.ADMIN_TOKEN ?? null,
    corsOrigins: config.CORS_ORIGINS,
    webhookAllowTargets: config.GATEWAY_WEBHOOK_ALLOW_TARGETS,
    refusalLog: { linesPerWindow: config.REFUSAL_LOG_LINES_PER_MINUTE },
    responseCache: { maxRows: config.RESPONSE_CACHE_MAX_ROWS, maxBytes: config.RESPONSE_CACHE_MAX_BYTES },
    routeBreaker: { failures: config.ROUTE_BREAKER_FAILURES, windowMs: config.ROUTE_BREAKER_WINDOW_MS, cooldownMs: config.ROUTE_BREAKER_COOLDOWN_MS },
    routing: { retryBudgetMs: config.ROUTE_RETRY_BUDGET_MS, keyCooldownMs: config.UPSTREAM_KEY_COOLDOWN_MS },
    keyed: {
      authFailureLimit: config.AUTH_FAILURE_LIMIT,
      authFailureWindowMs: config.AUTH_FAILURE_WINDOW_SECONDS * 1000,
      authLockoutMs: config.AUTH_LOCKOUT_SECONDS * 1000,
      trustedProxies: config.TRUSTED_PROXIES,
      requestLogFlushMs: config.REQUEST_LOG_FLUSH_MS,
      requestLogRetentionDays: config.REQUEST_LOG_RETENTION_DAYS,
    },
  };
}
