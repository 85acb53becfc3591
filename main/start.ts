import fs from 'node:fs';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection } from '@temporalio/worker';
import { createAccount } from '../services/accounts/accounts';
import { createKey } from '../services/keys/keys';
import { seedSimulatorCatalog } from '../simulator/seed';
import { gatewayOptions, startGatewayApi } from './gateway';
import { startQueues, type WorkerQueue } from './queues';
import { superviseCluster } from '../platform/cluster';
import { startPanelApi } from './panel-api';
import { npmStartPanelFlags, panelOptions } from './panel-options';
import { ensurePlatform } from '../services/panel/orgs/bootstrap';
import { startSimulator } from '../simulator/server';
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
import { checkTemporalTls, temporalConnectOptions, temporalSecurity } from '../platform/temporal-connection';

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

  const security = temporalSecurity(config);
  if (config.TEMPORAL_ADDRESS) await checkTemporalTls(temporalAddress, security);
  const connection = await NativeConnection.connect(temporalConnectOptions(temporalAddress, security));
  const clientConnection = await Connection.connect(temporalConnectOptions(temporalAddress, security));
  stops.push(() => clientConnection.close());
  const temporal = new Client({ connection: clientConnection, namespace: config.TEMPORAL_NAMESPACE, ...observedClientOptions() });
  // The connection closes after every worker using it has stopped (stops run in reverse).
  stops.push(() => connection.close());
  // The workers of `worker --queues credits,media,testruns` (main/queues.ts), with the credits relays.
  const queues: WorkerQueue[] = ['credits', 'media', 'testruns'];
  await startQueues(queues, { config, db, databaseUrl: url, temporalAddress, temporalSecurity: security, connection, temporal, logger: log }, stops);

  // The gateway in this process, or GATEWAY_PROCESSES > 1 processes of the `gateway` role on its port.
  const gatewayProcesses = config.GATEWAY_PROCESSES ?? 1;
  if (gatewayProcesses > 1) {
    const children = await superviseCluster({ count: gatewayProcesses, exec: path.join(__dirname, `gateway-cli${path.extname(__filename)}`), env: { DATABASE_URL: url, TEMPORAL_ADDRESS: temporalAddress }, logger: log, name: 'gateway' });
    stops.push(children.stop); // each child drains for up to GATEWAY_DRAIN_SECONDS
  } else {
    const gateway = await startGatewayApi(gatewayOptions(config, { db, databaseUrl: url, temporalAddress, logger: log }));
    // Streams in flight finish (up to GATEWAY_DRAIN_SECONDS) before the gateway and what it needs stop.
    stops.push(() => gateway.drain(config.GATEWAY_DRAIN_SECONDS * 1000));
  }

  // The hosting panel (spec 2) on PANEL_PORT, with the flags of PANEL.md section 1 and PANEL_FLAGS.
  const panelLogin = await ensurePlatform(db);
  const panel = await startPanelApi(await panelOptions(config, { db, logger: log, temporalAddress, flags: npmStartPanelFlags(config) }));
  stops.push(panel.close);

  const gatewayUrl = `http://127.0.0.1:${config.GATEWAY_PORT}`;
  writeRunningSettings(config.dataDir, { DATABASE_URL: url, GATEWAY_VARIANT: config.GATEWAY_VARIANT, TEMPORAL_ADDRESS: temporalAddress, TEMPORAL_NAMESPACE: config.TEMPORAL_NAMESPACE, GATEWAY_URL: gatewayUrl });
  log.info({ ms: Date.now() - t0, roles: ['gateway', 'worker', 'panel-api'], gatewayProcesses, queues: [...queues, 'panel', 'panel-billing'], schedules: ['creditsSchedules', 'panelSchedules', 'billingSchedules'] }, 'ready');
  process.stdout.write(
    [
      '',
      `  Gateway      ${gatewayUrl}   (OpenAI SDK base URL: ${gatewayUrl}/v1)`,
      config.TEMPORAL_ADDRESS ? `  Temporal     ${temporalAddress}` : `  Temporal UI  http://127.0.0.1:${config.TEMPORAL_UI_PORT}`,
      `  Simulator    ${sim.url}`,
      `  Demo key     ${demoKey}`,
      `  Dashboard    ${gatewayUrl}/dashboard   (sign in as ${demoUser.email} / ${demoUser.password})`,
      `  Panel        http://127.0.0.1:${config.PANEL_PORT}   (API under /v1; docs/panel/README.md)`,
      `  Console      http://127.0.0.1:${config.PANEL_PORT}/sign-in   (the panel's web console: sign in with the panel login)`,
      `  Hosting node http://127.0.0.1:${config.PANEL_HOSTING_WEB_PORT}   (websites by their Host header; ${panel.hostingNode?.facts().webServer ?? 'not running'})`,
      `  Node API     ${panel.nodeApiUrl}   (panel-host agents pull from it: docs/panel/nodes.md)`,
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
