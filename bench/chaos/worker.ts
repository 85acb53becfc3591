import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { RESERVATION_TASK_QUEUE } from '../../domain/credits/reservation';
import { loadConfig } from '../../platform/config';
import { databaseUrl } from '../../platform/database-url';
import { createDb } from '../../platform/db';
import { createLogger } from '../../platform/logger';
import { startSettlementRelay } from '../../services/credits/relay';
import { createCreditsWorker } from '../../workers/credits';
import { creditsSchedules, keepSchedules } from '../../workers/schedules';

// The credits worker and the settlement relay of the chaos run (bench/chaos.ts), wired as
// main/start.ts wires them, from the same environment variables: a process of its own, so the
// run can kill it (kill -9) between a claim and its workflow's start, or during settlement.
// Prints `ready` once the worker runs and the relay listens. A worker that fails (Temporal gone
// too long) ends the process; the run starts it again, as a supervisor would.

async function main() {
  const config = loadConfig();
  if (!config.TEMPORAL_ADDRESS || !config.DATABASE_URL) throw new Error('DATABASE_URL and TEMPORAL_ADDRESS are required');
  const log = createLogger(config.LOG_LEVEL);
  const url = databaseUrl(config);
  const db = createDb(url, config.DB_POOL_MAX);
  const connection = await NativeConnection.connect({ address: config.TEMPORAL_ADDRESS });
  const clientConnection = await Connection.connect({ address: config.TEMPORAL_ADDRESS });
  const temporal = new Client({ connection: clientConnection, namespace: config.TEMPORAL_NAMESPACE });
  const credits = await createCreditsWorker({
    connection,
    temporal,
    namespace: config.TEMPORAL_NAMESPACE,
    taskQueue: RESERVATION_TASK_QUEUE,
    db,
    abandonment: { deadAfterMs: config.API_PROCESS_DEAD_AFTER_SECONDS * 1000, unrecordedOlderThanMs: config.HOLD_TIMEOUT_SECONDS * 1000 + config.UPSTREAM_TIMEOUT_MS + 60_000 },
  });
  const keeper = await keepSchedules({ ...creditsSchedules(temporal), databaseUrl: url, logger: log });
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
    await keeper.stop();
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
  process.stderr.write(`chaos worker failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
