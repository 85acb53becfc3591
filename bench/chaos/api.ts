import path from 'node:path';
import { startGatewayApi } from '../../main/gateway';
import { loadConfig } from '../../platform/config';
import { databaseUrl } from '../../platform/database-url';
import { createDb } from '../../platform/db';
import { createLogger } from '../../platform/logger';

// One gateway API process of the chaos run (bench/chaos.ts), wired as main/start.ts wires the
// gateway, from the same environment variables (GATEWAY_VARIANT, GATEWAY_PORT, DATABASE_URL,
// TEMPORAL_ADDRESS, …). A process of its own, so the run can kill it (kill -9) alone.
// Prints `ready <url>` once it listens; SIGTERM drains it.

async function main() {
  const config = loadConfig();
  if (!config.TEMPORAL_ADDRESS || !config.DATABASE_URL) throw new Error('DATABASE_URL and TEMPORAL_ADDRESS are required');
  const log = createLogger(config.LOG_LEVEL);
  const url = databaseUrl(config);
  const db = createDb(url, config.DB_POOL_MAX);
  const gateway = await startGatewayApi({
    db,
    databaseUrl: url,
    temporalAddress: config.TEMPORAL_ADDRESS,
    namespace: config.TEMPORAL_NAMESPACE,
    logger: log,
    port: config.GATEWAY_PORT,
    host: '127.0.0.1',
    upstreamTimeoutMs: config.UPSTREAM_TIMEOUT_MS,
    keyCacheTtlMs: config.KEY_CACHE_TTL_MS,
    outcomeJournal: { dir: path.join(config.dataDir, 'outcome-journal'), maxEntries: config.OUTCOME_JOURNAL_MAX_ENTRIES, maxBytes: config.OUTCOME_JOURNAL_MAX_BYTES },
    variant: config.GATEWAY_VARIANT,
    adminToken: config.ADMIN_TOKEN ?? null,
    keyed: { requestLogFlushMs: config.REQUEST_LOG_FLUSH_MS, requestLogRetentionDays: config.REQUEST_LOG_RETENTION_DAYS },
  });
  // SIGTERM drains as the gateway of npm start does (GATEWAY_DRAIN_SECONDS); SIGINT stops at once.
  const stop = async (drain: boolean) => {
    await (drain ? gateway.drain(config.GATEWAY_DRAIN_SECONDS * 1000) : gateway.close()).catch(() => {});
    await db.destroy().catch(() => {});
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop(true));
  process.once('SIGINT', () => void stop(false));
  process.stdout.write(`ready ${gateway.url}\n`);
}

main().catch((err) => {
  process.stderr.write(`chaos api failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
