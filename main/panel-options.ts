import path from 'node:path';
import { DEFAULT_NAMESERVERS, type Config } from '../platform/config';
import { databaseUrl } from '../platform/database-url';
import type { Db } from '../platform/db';
import type { Logger } from '../platform/logger';
import { parsePanelFlags, splitFlags, type PanelFlags } from '../platform/panel-flags';
import { loadSealingKey } from '../platform/secret-box';
import { zoneCheckerAvailable } from '../platform/zone-files';
import { temporalSecurity } from '../platform/temporal-connection';
import type { PanelRuntimeOptions } from './panel-api';

/**
 * `npm start`'s panel flags: metrics 60s, billing meter, reconcile dry-run, controller state, the
 * node API on PANEL_NODE_API_PORT; then PANEL_FLAGS (validated by loadConfig), whose flags win.
 */
export function npmStartPanelFlags(config: Config): PanelFlags {
  const own = ['-metrics-interval', '60s', '-billing-meter', '-reconcile', 'dry-run', '-controller-state', '-node-api-listen', `127.0.0.1:${config.PANEL_NODE_API_PORT}`];
  return parsePanelFlags([...own, ...splitFlags(config.PANEL_FLAGS)]);
}

/**
 * The options of a panel process from the configuration, shared by `npm start` and
 * `panel-api serve`: its port, secrets and sessions, its own hosting node under DATA_DIR/hosting
 * (nginx where installed, else the built-in server; MariaDB on PANEL_HOSTING_DB_PORT where installed)
 * and the zone files there (with named-checkzone); with -no-hosting-node neither (another process has them).
 */
export async function panelOptions(config: Config, o: { db: Db; logger: Logger; temporalAddress: string; flags: PanelFlags }): Promise<PanelRuntimeOptions> {
  const hostingRoot = path.join(config.dataDir, 'hosting');
  return {
    db: o.db,
    databaseUrl: databaseUrl(config),
    temporalAddress: o.temporalAddress,
    temporalSecurity: temporalSecurity(config),
    namespace: config.TEMPORAL_NAMESPACE,
    logger: o.logger,
    port: config.PANEL_PORT,
    host: '0.0.0.0',
    flags: o.flags,
    sealingKey: loadSealingKey(process.env, 'panel'),
    sessionIdleMs: config.PANEL_SESSION_IDLE_MINUTES * 60_000,
    sessionMaxMs: config.PANEL_SESSION_MAX_HOURS * 3_600_000,
    webhooks: { allowTargets: config.PANEL_WEBHOOK_ALLOW_TARGETS },
    hosting: o.flags.noHostingNode ? undefined : { root: hostingRoot, webPort: config.PANEL_HOSTING_WEB_PORT, webTlsPort: config.PANEL_HOSTING_TLS_PORT, webHost: '0.0.0.0', mariadbPort: config.PANEL_HOSTING_DB_PORT, sftpPort: config.PANEL_HOSTING_SFTP_PORT || null, backupDir: path.join(hostingRoot, 'backups') },
    dns: {
      zonesDir: !o.flags.noHostingNode && (await zoneCheckerAvailable()) ? path.join(hostingRoot, 'etc', 'bind', 'zones') : null,
      nameservers: config.PANEL_DNS_NAMESERVERS.length ? config.PANEL_DNS_NAMESERVERS : DEFAULT_NAMESERVERS,
    },
  };
}
