import { startGatewayApi } from '../../../main/gateway';
import { loadConfig, poolSize } from '../../../platform/config';
import { databaseUrl } from '../../../platform/database-url';
import { checkDatabase, createDb } from '../../../platform/db';
import { createLogger } from '../../../platform/logger';
import { checkTemporalTls, temporalSecurity } from '../../../platform/temporal-connection';

// A gateway host's API process in `npm run topology`, until the `gateway` role command lands:
// main/gateway.ts wired from the environment alone (DATABASE_URL, TEMPORAL_ADDRESS and their TLS
// settings, GATEWAY_PORT), listening on every address of its host. Prints `ready <url>`.

async function main() {
  const config = loadConfig();
  if (!config.TEMPORAL_ADDRESS || !config.DATABASE_URL) throw new Error('DATABASE_URL and TEMPORAL_ADDRESS are required');
  const log = createLogger(config.LOG_LEVEL);
  const url = databaseUrl(config);
  const db = createDb(url, poolSize(config, 'gateway'));
  await checkDatabase(db);
  const security = temporalSecurity(config);
  await checkTemporalTls(config.TEMPORAL_ADDRESS, security);
  const gateway = await startGatewayApi({
    db,
    databaseUrl: url,
    temporalAddress: config.TEMPORAL_ADDRESS,
    temporalSecurity: security,
    namespace: config.TEMPORAL_NAMESPACE,
    logger: log,
    port: config.GATEWAY_PORT,
    host: '0.0.0.0',
    upstreamTimeoutMs: config.UPSTREAM_TIMEOUT_MS,
    keyCacheTtlMs: config.KEY_CACHE_TTL_MS,
    variant: config.GATEWAY_VARIANT,
    adminToken: config.ADMIN_TOKEN ?? null,
  });
  const stop = async () => {
    await gateway.drain(config.GATEWAY_DRAIN_SECONDS * 1000).catch(() => {});
    await db.destroy().catch(() => {});
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
  process.stdout.write(`ready ${gateway.url}\n`);
}

main().catch((err) => {
  process.stderr.write(`gateway failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
