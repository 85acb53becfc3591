import cluster from 'node:cluster';
import os from 'node:os';
import { DefaultLogger } from '@temporalio/worker';
import { ConfigError, loadConfig, poolSize, type Config } from '../platform/config';
import { superviseCluster } from '../platform/cluster';
import { databaseUrl } from '../platform/database-url';
import { createDb, migrate } from '../platform/db';
import { checkTemporalTls, temporalSecurity } from '../platform/temporal-connection';
import { createLogger, type Logger } from '../platform/logger';
import { installTemporalRuntime } from '../platform/temporal-metrics';
import { startTracing, stopTracing } from '../platform/tracing';
import { gatewayOptions, startGatewayApi } from './gateway';

// `gateway`: the gateway's API (spec 1 and 3, and the test-run API) on GATEWAY_PORT against
// DATABASE_URL and TEMPORAL_ADDRESS, stateless. GATEWAY_PROCESSES (default: one per core) API
// processes share the port through node:cluster; each has its own liveness row (api_processes), and
// the primary starts again one that dies. `npm start` runs the same children when GATEWAY_PROCESSES > 1.

/** One API process: serves until SIGTERM/SIGINT (or its cluster primary goes away), then drains and exits. */
async function serveGateway(config: Config, log: Logger): Promise<void> {
  const url = databaseUrl(config);
  const db = createDb(url, poolSize(config, 'gateway'));
  if (config.TEMPORAL_ADDRESS) await checkTemporalTls(config.TEMPORAL_ADDRESS, temporalSecurity(config));
  // A lone process migrates; cluster children find the schema their primary brought up to date.
  if (cluster.isPrimary) await migrate(db);
  const gateway = await startGatewayApi(gatewayOptions(config, { db, databaseUrl: url, temporalAddress: temporalAddressOf(config), logger: log }));
  log.info({ url: gateway.url, pid: process.pid }, 'gateway process ready');
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'stopping');
    await gateway.drain(config.GATEWAY_DRAIN_SECONDS * 1000);
    await stopTracing();
    await db.destroy();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
  // a cluster child whose primary died (kill -9) would serve on unsupervised: it drains and stops
  process.on('disconnect', () => void stop('primary gone'));
}

/** TEMPORAL_ADDRESS, else the embedded dev server's default address (a first look on one machine). */
const temporalAddressOf = (config: Config): string => config.TEMPORAL_ADDRESS ?? `127.0.0.1:${config.TEMPORAL_PORT}`;

/** The primary of N > 1 processes: migrates once, starts the children, stops them at a signal. */
async function supervise(config: Config, log: Logger, count: number): Promise<void> {
  const db = createDb(databaseUrl(config), 2);
  await migrate(db);
  await db.destroy();
  const children = await superviseCluster({ count, exec: __filename, logger: log, name: 'gateway' });
  log.info({ processes: count, port: config.GATEWAY_PORT, pids: children.pids() }, 'gateway ready');
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'stopping the gateway processes'); // each child turns /readyz 503 and drains
    await children.stop();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
}

async function main() {
  const config = loadConfig();
  const log = createLogger(config.LOG_LEVEL).child({ role: 'gateway' });
  const count = config.GATEWAY_PROCESSES ?? os.availableParallelism();
  if (cluster.isPrimary) log.info({ roles: ['gateway'], processes: count, queues: [], schedules: [], temporal: temporalAddressOf(config), namespace: config.TEMPORAL_NAMESPACE }, 'starting');
  if (cluster.isPrimary && count > 1) return supervise(config, log, count);
  // Children of a cluster cannot share TEMPORAL_METRICS_ADDR: their SDK metrics go to each one's /metrics.
  installTemporalRuntime({ logger: new DefaultLogger('WARN'), metrics: config.METRICS === 'on', prometheusAddress: cluster.isWorker ? undefined : config.TEMPORAL_METRICS_ADDR });
  startTracing({ endpoint: config.OTEL_EXPORTER_OTLP_ENDPOINT, serviceName: config.OTEL_SERVICE_NAME });
  await serveGateway(config, log);
}

main().catch((err) => {
  process.stderr.write(err instanceof ConfigError ? `${err.message}\n` : `gateway failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
