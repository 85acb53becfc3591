import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { RESERVATION_TASK_QUEUE } from '../../../domain/credits/reservation';
import { loadConfig, poolSize } from '../../../platform/config';
import { databaseUrl } from '../../../platform/database-url';
import { checkDatabase, createDb } from '../../../platform/db';
import { createLogger } from '../../../platform/logger';
import { checkTemporalTls, temporalConnectOptions, temporalSecurity } from '../../../platform/temporal-connection';
import { startSettlementRelay } from '../../../services/credits/relay';
import { createCreditsWorker } from '../../../workers/credits';
import { creditsSchedules, keepSchedules } from '../../../workers/schedules';

// A worker host's process in `npm run topology`, until the `worker --queues` role command lands:
// the credits worker and the settlement relay, wired as main/start.ts wires them, from the
// environment alone; TOPO_SCHEDULES=1 also keeps the schedules. Prints `ready`.

async function main() {
  const config = loadConfig();
  if (!config.TEMPORAL_ADDRESS || !config.DATABASE_URL) throw new Error('DATABASE_URL and TEMPORAL_ADDRESS are required');
  const log = createLogger(config.LOG_LEVEL);
  const url = databaseUrl(config);
  const db = createDb(url, poolSize(config, 'worker'));
  await checkDatabase(db);
  const security = temporalSecurity(config);
  await checkTemporalTls(config.TEMPORAL_ADDRESS, security);
  const connection = await NativeConnection.connect(temporalConnectOptions(config.TEMPORAL_ADDRESS, security));
  const temporal = new Client({ connection: await Connection.connect(temporalConnectOptions(config.TEMPORAL_ADDRESS, security)), namespace: config.TEMPORAL_NAMESPACE });
  const credits = await createCreditsWorker({
    connection,
    temporal,
    namespace: config.TEMPORAL_NAMESPACE,
    taskQueue: RESERVATION_TASK_QUEUE,
    db,
    abandonment: { deadAfterMs: config.API_PROCESS_DEAD_AFTER_SECONDS * 1000, unrecordedOlderThanMs: config.HOLD_TIMEOUT_SECONDS * 1000 + config.UPSTREAM_TIMEOUT_MS + 60_000 },
  });
  const keeper = process.env.TOPO_SCHEDULES === '1' ? await keepSchedules({ ...creditsSchedules(temporal), databaseUrl: url, logger: log }) : null;
  const running = credits.run();
  const relay = await startSettlementRelay({
    db,
    databaseUrl: url,
    temporal,
    taskQueue: RESERVATION_TASK_QUEUE,
    logger: log,
    holdTimeoutMs: config.HOLD_TIMEOUT_SECONDS * 1000,
    uncertainGraceMs: config.UPSTREAM_TIMEOUT_MS,
  });
  running.catch((err) => {
    process.stderr.write(`credits worker failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(2);
  });
  const stop = async () => {
    await relay.stop().catch(() => {});
    await keeper?.stop().catch(() => {});
    if (credits.getState() === 'RUNNING') credits.shutdown();
    await running.catch(() => {});
    await db.destroy().catch(() => {});
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
  process.stdout.write('ready\n');
}

main().catch((err) => {
  process.stderr.write(`worker failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
