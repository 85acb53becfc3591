import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection } from '@temporalio/worker';
import { ConfigError, loadConfig, poolSize } from '../platform/config';
import { databaseUrl } from '../platform/database-url';
import { createDb, migrate } from '../platform/db';
import { checkTemporalTls, temporalConnectOptions, temporalSecurity } from '../platform/temporal-connection';
import { createLogger, type Logger } from '../platform/logger';
import { observedClientOptions } from '../platform/temporal-client';
import { installTemporalRuntime } from '../platform/temporal-metrics';
import { startTracing, stopTracing } from '../platform/tracing';
import { parseQueues, scheduleGroupsOf, startQueues, WORKER_QUEUES } from './queues';

// `worker [--queues credits,media,testruns,panel-billing]`: workflow workers (and, with credits, the
// settlement and account-event relays) against DATABASE_URL and TEMPORAL_ADDRESS. Any number on any
// host; one of those running a queue group keeps its schedules (workers/schedules.ts), another takes
// over within seconds when it dies. SIGTERM or SIGINT stops it after the activities in flight.

const USAGE = `usage: worker [--queues ${WORKER_QUEUES.join(',')}]   (default: all of them)`;

const stops: Array<() => Promise<unknown>> = [];

async function stopAll(log: Logger): Promise<void> {
  for (let stop = stops.pop(); stop; stop = stops.pop()) await stop().catch((err) => log.error({ err }, 'error while stopping'));
}

async function main(argv: string[]) {
  let queuesFlag: string;
  try {
    queuesFlag = parseArgs({ args: argv, options: { queues: { type: 'string', default: WORKER_QUEUES.join(',') } }, strict: true }).values.queues;
  } catch (err) {
    throw new ConfigError(`${err instanceof Error ? err.message : String(err)}\n${USAGE}`);
  }
  let queues;
  try {
    queues = parseQueues(queuesFlag);
  } catch (err) {
    throw new ConfigError(`${(err as Error).message}\n${USAGE}`);
  }
  const config = loadConfig();
  const log = createLogger(config.LOG_LEVEL).child({ role: 'worker' });
  const temporalAddress = config.TEMPORAL_ADDRESS ?? `127.0.0.1:${config.TEMPORAL_PORT}`;
  log.info({ roles: ['worker'], queues, schedules: scheduleGroupsOf(queues), temporal: temporalAddress, namespace: config.TEMPORAL_NAMESPACE }, 'starting');
  installTemporalRuntime({ logger: new DefaultLogger(config.LOG_LEVEL === 'debug' || config.LOG_LEVEL === 'trace' ? 'INFO' : 'WARN'), metrics: config.METRICS === 'on', prometheusAddress: config.TEMPORAL_METRICS_ADDR });
  startTracing({ endpoint: config.OTEL_EXPORTER_OTLP_ENDPOINT, serviceName: config.OTEL_SERVICE_NAME });
  stops.push(stopTracing);
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'stopping');
    await stopAll(log);
    process.exit(0);
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));

  const url = databaseUrl(config);
  const db = createDb(url, poolSize(config, 'worker'));
  stops.push(() => db.destroy());
  await migrate(db);
  const security = temporalSecurity(config);
  if (config.TEMPORAL_ADDRESS) await checkTemporalTls(temporalAddress, security);
  const connection = await NativeConnection.connect(temporalConnectOptions(temporalAddress, security));
  const clientConnection = await Connection.connect(temporalConnectOptions(temporalAddress, security));
  stops.push(() => clientConnection.close());
  stops.push(() => connection.close()); // closed after every worker using it has stopped
  const temporal = new Client({ connection: clientConnection, namespace: config.TEMPORAL_NAMESPACE, ...observedClientOptions() });
  await startQueues(queues, { config, db, databaseUrl: url, temporalAddress, temporalSecurity: security, connection, temporal, logger: log }, stops);
  log.info({ queues, pid: process.pid }, 'worker ready');
}

main(process.argv.slice(2)).catch(async (err) => {
  process.stderr.write(err instanceof ConfigError ? `${err.message}\n` : `worker failed: ${err instanceof Error ? err.message : String(err)}\n`);
  await stopAll(createLogger('error'));
  process.exit(1);
});
