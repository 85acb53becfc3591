import { startGatewayApi } from '../../main/gateway';
import { createDb } from '../../platform/db';
import { createLogger } from '../../platform/logger';

// A gateway API in a process of its own, so that a test can kill it (SIGKILL) mid-request.
// Settings from the environment (DATABASE_URL, TEMPORAL_ADDRESS, HEARTBEAT_MS, DB_POOL_MAX,
// GATEWAY_DRAIN_SECONDS, OUTCOME_JOURNAL_DIR, OUTCOME_JOURNAL_MAX_ENTRIES,
// CHILD_OUTCOME_BATCH_INTERVAL_MS: not the configuration's name, whose bound a test exceeds); prints `ready <url>` once it listens. SIGTERM drains it, then it exits.

async function main() {
  const e = process.env;
  const gateway = await startGatewayApi({
    db: createDb(e.DATABASE_URL!, Number(e.DB_POOL_MAX ?? 5)),
    databaseUrl: e.DATABASE_URL!,
    temporalAddress: e.TEMPORAL_ADDRESS!,
    namespace: 'default',
    logger: createLogger('error'),
    port: 0,
    upstreamTimeoutMs: 60_000,
    keyCacheTtlMs: 60_000,
    heartbeatMs: Number(e.HEARTBEAT_MS ?? 5000),
    outcomeJournal: e.OUTCOME_JOURNAL_DIR ? { dir: e.OUTCOME_JOURNAL_DIR, maxEntries: Number(e.OUTCOME_JOURNAL_MAX_ENTRIES ?? 100_000), batchIntervalMs: Number(e.CHILD_OUTCOME_BATCH_INTERVAL_MS ?? 50) } : undefined,
  });
  process.once('SIGTERM', () => void gateway.drain(Number(e.GATEWAY_DRAIN_SECONDS ?? 30) * 1000).then(() => process.exit(0)));
  process.stdout.write(`ready ${gateway.url}\n`);
}

main().catch((err) => {
  process.stderr.write(String(err instanceof Error ? err.stack : err) + '\n');
  process.exit(1);
});
