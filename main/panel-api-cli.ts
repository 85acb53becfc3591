import { loadConfig, ConfigError, poolSize } from '../platform/config';
import { checkTemporalTls, temporalSecurity } from '../platform/temporal-connection';
import { databaseUrl } from '../platform/database-url';
import { createDb, migrate } from '../platform/db';
import { createLogger } from '../platform/logger';
import { parsePanelFlags, serveFlags } from '../platform/panel-flags';
import { ensurePlatform } from '../services/panel/orgs/bootstrap';
import { startPanelApi } from './panel-api';
import { panelOptions } from './panel-options';
import { DefaultLogger } from '@temporalio/worker';
import { installTemporalRuntime } from '../platform/temporal-metrics';
import { markDraining } from '../platform/readiness';
import { startTracing, stopTracing } from '../platform/tracing';

// `panel-api serve [flags of spec 2 section 4.3]`: one panel API process on PANEL_PORT, against
// the database and Temporal of `npm start` (or DATABASE_URL / TEMPORAL_ADDRESS).

const USAGE = `usage: panel-api serve [-metrics-interval 60s] [-reconcile dry-run|on|off] [-reconcile-interval 15m] [-placement scheduled]
                       [-placement-node-facts FILE] [-node-api-listen HOST:PORT] [-billing-meter]
                       [-require-2fa-roles ROLE,...] [-controller-state] [-no-hosting-node]`;

async function main(argv: string[]) {
  const flags = serveFlags('panel-api', USAGE, argv, parsePanelFlags);
  const config = loadConfig();
  const log = createLogger(config.LOG_LEVEL);
  // What this process runs (docs/deploy.md): the panel worker beside its hosting node (not with
  // -no-hosting-node), billing with -billing-meter.
  const own = !flags.noHostingNode;
  log.info({ roles: ['panel-api'], hostingNode: own, queues: [...(own ? ['panel'] : []), ...(flags.billingMeter ? ['panel-billing'] : [])], schedules: [...(own ? ['panelSchedules'] : []), ...(flags.billingMeter ? ['billingSchedules'] : [])], controller: flags.controllerState }, 'starting');
  // Temporal SDK metrics into /metrics (or on TEMPORAL_METRICS_ADDR); traces when OTEL_EXPORTER_OTLP_ENDPOINT is set.
  installTemporalRuntime({ logger: new DefaultLogger('WARN'), metrics: config.METRICS === 'on', prometheusAddress: config.TEMPORAL_METRICS_ADDR });
  startTracing({ endpoint: config.OTEL_EXPORTER_OTLP_ENDPOINT, serviceName: config.OTEL_SERVICE_NAME });
  const url = databaseUrl(config);
  const db = createDb(url, poolSize(config, 'panel'));
  await migrate(db); // a database that cannot be reached (or whose TLS fails) is named here
  const temporalAddress = config.TEMPORAL_ADDRESS ?? `127.0.0.1:${config.TEMPORAL_PORT}`;
  await checkTemporalTls(temporalAddress, temporalSecurity(config));
  const initial = await ensurePlatform(db);
  const panel = await startPanelApi(await panelOptions(config, { db, logger: log, temporalAddress, flags }));
  log.info({ url: panel.url, flags }, 'panel ready');
  process.stdout.write(`  Panel        http://127.0.0.1:${config.PANEL_PORT}\n`);
  if (panel.nodeApiUrl) process.stdout.write(`  Node API     ${panel.nodeApiUrl}   (on ${flags.nodeApiListen!.host}; what panel-host agents pull from)\n`);
  if (initial) process.stdout.write(`  Panel login  ${initial.username} / ${initial.password}   (temporary: change it at first sign-in; shown once)\n`);
  const stop = async () => {
    markDraining(); // /readyz answers 503 from here on
    await panel.close();
    await stopTracing();
    await db.destroy();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop());
  process.on('SIGTERM', () => void stop());
}

main(process.argv.slice(2)).catch((err) => {
  process.stderr.write(err instanceof ConfigError ? `${err.message}\n` : `panel-api failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
