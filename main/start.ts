import fs from 'node:fs';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection } from '@temporalio/worker';
import { createAccount } from '../services/accounts/accounts';
import { createKey } from '../services/keys/keys';
import { seedSimulatorCatalog } from '../simulator/seed';
import { startGatewayApi } from './gateway';
import { startPanelApi } from './panel-api';
import { npmStartPanelFlags, panelOptions } from './panel-options';
import { ensurePlatform } from '../services/panel/orgs/bootstrap';
import { RESERVATION_TASK_QUEUE } from '../domain/credits/reservation';
import { MEDIA_TASK_QUEUE } from '../domain/media/video';
import { startSimulator } from '../simulator/server';
import { runWorker } from '../workers/base';
import { createCreditsWorker } from '../workers/credits';
import { startSettlementRelay } from '../services/credits/relay';
import { startAccountEventRelay } from '../services/accounts/event-relay';
import { createMediaWorker } from '../workers/media';
import { ensureSchedules } from '../workers/schedules';
import { startTestRunWorker } from '../workers/testruns';
import { hashKey, keyFormatOf, type KeyFormat } from '../services/keys/key-format';
import { ConfigError, loadConfig } from '../platform/config';
import { databaseUrl, EMBEDDED_DATABASE } from '../platform/database-url';
import { createDb, migrate, type Db } from '../platform/db';
import { createLogger, type Logger } from '../platform/logger';
import { startEmbeddedPostgres } from '../platform/postgres';
import { startTemporalDevServer } from '../platform/temporal-server';
import { ensureDemoUser } from '../services/dashboard/users';
import { loadSealingKey } from '../platform/secret-box';
import { writeRunningSettings } from '../platform/running-settings';
import { markDraining } from '../platform/readiness';
import { startTracing, stopTracing } from '../platform/tracing';
import { observedClientOptions } from '../platform/temporal-client';
import { installTemporalRuntime } from '../platform/temporal-metrics';

// `npm start`: the whole system on embedded defaults, stopped cleanly by Ctrl-C / SIGTERM.

/** What has been started, in order; stopped newest first on a signal or a failed start. */
const stops: Array<() => Promise<unknown>> = [];

async function stopAll(log: Logger | null): Promise<void> {
  for (let stop = stops.pop(); stop; stop = stops.pop()) {
    await stop().catch((err) => (log ? log.error({ err }, 'error while stopping') : process.stderr.write(`error while stopping: ${String(err)}\n`)));
  }
}

async function main() {
  const t0 = Date.now();
  const config = loadConfig();
  const log = createLogger(config.LOG_LEVEL);
  // The SDK logs each workflow bundle's webpack report (~60 lines per worker) at INFO: only
  // warnings unless LOG_LEVEL=debug asks for everything.
  // Temporal SDK metrics into /metrics (or on TEMPORAL_METRICS_ADDR); traces when OTEL_EXPORTER_OTLP_ENDPOINT is set.
  installTemporalRuntime({ logger: new DefaultLogger(config.LOG_LEVEL === 'debug' || config.LOG_LEVEL === 'trace' ? 'INFO' : 'WARN'), metrics: config.METRICS === 'on', prometheusAddress: config.TEMPORAL_METRICS_ADDR });
  startTracing({ endpoint: config.OTEL_EXPORTER_OTLP_ENDPOINT, serviceName: config.OTEL_SERVICE_NAME });
  let stopping = false;
  const shutdown = async (signal: string, code = 0) => {
    if (stopping) return;
    stopping = true;
    markDraining(); // /readyz answers 503 from here on
    log.info({ signal }, 'stopping');
    await stopAll(log);
    log.info('stopped');
    process.exit(code);
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGHUP', () => void shutdown('SIGHUP'));
  // Whoever started us (npm, tsx, a supervisor) died without passing a signal on: stop too,
  // rather than leave PostgreSQL and Temporal running without anyone to stop them.
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) void shutdown('parent exited');
  }, 1000).unref();

  stops.push(stopTracing); // last to stop: flushes the spans of everything stopped before it
  fs.mkdirSync(config.dataDir, { recursive: true });
  if (!config.DATABASE_URL) {
    const pg = await startEmbeddedPostgres({ dir: path.join(config.dataDir, 'postgres'), port: config.PG_PORT, database: EMBEDDED_DATABASE, persistent: true, logger: log, statStatements: config.PG_STAT_STATEMENTS });
    stops.push(pg.stop);
  }
  let temporalAddress = config.TEMPORAL_ADDRESS;
  if (!temporalAddress) {
    const dev = await startTemporalDevServer({
      port: config.TEMPORAL_PORT,
      uiPort: config.TEMPORAL_UI_PORT,
      dbFile: path.join(config.dataDir, 'temporal.sqlite'),
      pidFile: path.join(config.dataDir, 'temporal.pid'),
      namespace: config.TEMPORAL_NAMESPACE,
      logger: log,
    });
    stops.push(dev.stop);
    temporalAddress = dev.address;
  }
  const url = databaseUrl(config);
  const db = createDb(url, config.DB_POOL_MAX);
  stops.push(() => db.destroy());
  await migrate(db);

  // SIMULATOR_URL: one running elsewhere (benchmarks give it a process of its own).
  const sim = config.SIMULATOR_URL ? { url: config.SIMULATOR_URL } : await startSimulator({ port: config.SIMULATOR_PORT });
  if ('close' in sim) stops.push(sim.close);
  await seedSimulatorCatalog(db, sim.url);
  const demoKey = await demoAccountKey(db, config.dataDir, config.GATEWAY_VARIANT === 'keyed' ? 'mt' : 'gw_ai');
  // The demo account's dashboard sign-in (api/gateway/dashboard), printed like the demo key.
  const demoUser = await ensureDemoUser(db, loadSealingKey(), (await db('api_keys').where({ key_hash: hashKey(demoKey) }).first('account_id')).account_id, path.join(config.dataDir, 'demo-dashboard-password'));

  const connection = await NativeConnection.connect({ address: temporalAddress });
  const clientConnection = await Connection.connect({ address: temporalAddress });
  stops.push(() => clientConnection.close());
  const temporal = new Client({ connection: clientConnection, namespace: config.TEMPORAL_NAMESPACE, ...observedClientOptions() });
  // The connection closes after every worker using it has stopped (stops run in reverse).
  stops.push(() => connection.close());
  const credits = await createCreditsWorker({
    connection,
    temporal,
    namespace: config.TEMPORAL_NAMESPACE,
    taskQueue: RESERVATION_TASK_QUEUE,
    db,
    // Holds of rows written before processes were recorded keep the old age rule.
    abandonment: { deadAfterMs: config.API_PROCESS_DEAD_AFTER_SECONDS * 1000, unrecordedOlderThanMs: config.HOLD_TIMEOUT_SECONDS * 1000 + config.UPSTREAM_TIMEOUT_MS + 60_000 },
    accountWebhooks: { allowTargets: config.GATEWAY_WEBHOOK_ALLOW_TARGETS },
  });
  await ensureSchedules(temporal);
  stops.push(runWorker(credits).stop);
  // Recorded outcomes to settlement workflows, in batches (services/credits/relay.ts).
  const relay = await startSettlementRelay({
    db,
    databaseUrl: url,
    temporal,
    taskQueue: RESERVATION_TASK_QUEUE,
    logger: log,
    holdTimeoutMs: config.HOLD_TIMEOUT_SECONDS * 1000,
    uncertainGraceMs: config.UPSTREAM_TIMEOUT_MS,
  });
  stops.push(relay.stop);
  // Account events (balance.low, key.spend_limit_reached) to their delivery workflows.
  stops.push((await startAccountEventRelay({ db, databaseUrl: url, temporal, taskQueue: RESERVATION_TASK_QUEUE, logger: log })).stop);
  // Video jobs (spec 1 section 3.1): one workflow per job on the media task queue.
  stops.push(runWorker(await createMediaWorker({ connection, namespace: config.TEMPORAL_NAMESPACE, taskQueue: MEDIA_TASK_QUEUE, db })).stop);
  // Test runs (spec 3 B): cases call this gateway; settings TESTRUN_* (workers/testruns.ts).
  stops.push((await startTestRunWorker({ connection, namespace: config.TEMPORAL_NAMESPACE, db, gatewayUrl: `http://127.0.0.1:${config.GATEWAY_PORT}` })).stop);

  const gateway = await startGatewayApi({
    db,
    databaseUrl: url,
    temporalAddress,
    namespace: config.TEMPORAL_NAMESPACE,
    logger: log,
    port: config.GATEWAY_PORT,
    host: '0.0.0.0',
    upstreamTimeoutMs: config.UPSTREAM_TIMEOUT_MS,
    keyCacheTtlMs: config.KEY_CACHE_TTL_MS,
    outcomeJournal: { dir: path.join(config.dataDir, 'outcome-journal'), maxEntries: config.OUTCOME_JOURNAL_MAX_ENTRIES, maxBytes: config.OUTCOME_JOURNAL_MAX_BYTES },
    variant: config.GATEWAY_VARIANT,
    adminToken: config.ADMIN_TOKEN ?? null,
    corsOrigins: config.CORS_ORIGINS,
    webhookAllowTargets: config.GATEWAY_WEBHOOK_ALLOW_TARGETS,
    refusalLog: { linesPerWindow: config.REFUSAL_LOG_LINES_PER_MINUTE },
    routeBreaker: { failures: config.ROUTE_BREAKER_FAILURES, windowMs: config.ROUTE_BREAKER_WINDOW_MS, cooldownMs: config.ROUTE_BREAKER_COOLDOWN_MS },
    keyed: {
      authFailureLimit: config.AUTH_FAILURE_LIMIT,
      authFailureWindowMs: config.AUTH_FAILURE_WINDOW_SECONDS * 1000,
      authLockoutMs: config.AUTH_LOCKOUT_SECONDS * 1000,
      trustedProxies: config.TRUSTED_PROXIES,
      requestLogFlushMs: config.REQUEST_LOG_FLUSH_MS,
      requestLogRetentionDays: config.REQUEST_LOG_RETENTION_DAYS,
    },
  });
  // Streams in flight finish (up to GATEWAY_DRAIN_SECONDS) before the gateway and what it needs stop.
  stops.push(() => gateway.drain(config.GATEWAY_DRAIN_SECONDS * 1000));

  // The hosting panel (spec 2) on PANEL_PORT, with the flags of PANEL.md section 1 and PANEL_FLAGS.
  const panelLogin = await ensurePlatform(db);
  const panel = await startPanelApi(await panelOptions(config, { db, logger: log, temporalAddress, flags: npmStartPanelFlags(config) }));
  stops.push(panel.close);

  const gatewayUrl = `http://127.0.0.1:${config.GATEWAY_PORT}`;
  writeRunningSettings(config.dataDir, { DATABASE_URL: url, GATEWAY_VARIANT: config.GATEWAY_VARIANT, TEMPORAL_ADDRESS: temporalAddress, TEMPORAL_NAMESPACE: config.TEMPORAL_NAMESPACE, GATEWAY_URL: gatewayUrl });
  log.info({ ms: Date.now() - t0 }, 'ready');
  process.stdout.write(
    [
      '',
      `  Gateway      ${gatewayUrl}   (OpenAI SDK base URL: ${gatewayUrl}/v1)`,
      config.TEMPORAL_ADDRESS ? `  Temporal     ${temporalAddress}` : `  Temporal UI  http://127.0.0.1:${config.TEMPORAL_UI_PORT}`,
      `  Simulator    ${sim.url}`,
      `  Demo key     ${demoKey}`,
      `  Dashboard    ${gatewayUrl}/dashboard   (sign in as ${demoUser.email} / ${demoUser.password})`,
      `  Panel        http://127.0.0.1:${config.PANEL_PORT}   (API under /v1; docs/panel.md)`,
      `  Console      http://127.0.0.1:${config.PANEL_PORT}/sign-in   (the panel's web console: sign in with the panel login)`,
      `  Hosting node http://127.0.0.1:${config.PANEL_HOSTING_WEB_PORT}   (websites by their Host header; ${panel.hostingNode?.facts().webServer ?? 'not running'})`,
      `  Node API     ${panel.nodeApiUrl}   (panel-host agents pull from it: docs/panel.md)`,
      panelLogin ? `  Panel login  ${panelLogin.username} / ${panelLogin.password}   (temporary: change it at first sign-in; shown once)` : `  Panel login  the platform's logins (the initial 'admin' password was shown at the first start)`,
      '',
      `  curl ${gatewayUrl}/v1/chat/completions -H "Authorization: Bearer ${demoKey}" \\`,
      `    -H 'content-type: application/json' -d '{"model":"sim-gpt","messages":[{"role":"user","content":"hello"}]}'`,
      '',
      `  Started in ${((Date.now() - t0) / 1000).toFixed(1)} s. Ctrl-C stops everything.`,
      '',
    ].join('\n'),
  );
}

/**
 * The demo account and key (an `mt-` key in the keyed variant). Only a hash of a key is stored in the database, so the demo key
 * itself is kept in DATA_DIR (mode 600) to be printed again by the next start.
 */
async function demoAccountKey(db: Db, dataDir: string, format: KeyFormat): Promise<string> {
  const file = path.join(dataDir, 'demo-key');
  if (fs.existsSync(file)) {
    const key = fs.readFileSync(file, 'utf8').trim();
    const usable = keyFormatOf(key) === format && (await db('api_keys').where({ key_hash: hashKey(key) }).whereNull('revoked_at').first('id'));
    if (usable) return key;
  }
  const account = await createAccount(db, { name: 'demo', tier: 'pro', credits: '100' });
  const { key } = await createKey(db, { accountId: account.id, label: 'demo', format });
  fs.writeFileSync(file, key + '\n', { mode: 0o600 });
  return key;
}

main().catch(async (err) => {
  process.stderr.write(err instanceof ConfigError ? `${err.message}\n` : `npm start failed: ${err instanceof Error ? err.message : String(err)}\n`);
  // A failed start stops what it had started, newest first.
  await stopAll(null);
  process.exit(1);
});
