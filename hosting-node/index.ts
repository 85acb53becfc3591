import fs from 'node:fs';
import { listenAddress, sitePaths } from '../domain/panel/node-config';
import type { CronRun } from '../domain/panel/cron';
import type { NodeFacts, NodeMetrics, NodeOperation, OperationResult, SiteUsage } from '../domain/panel/node-ops';
import type { OwnNode } from '../domain/panel/own-node';
import type { Listening } from '../platform/http-server';
import type { Logger } from '../platform/logger';
import { startBuiltinWeb } from './builtin-web';
import { openCgroups } from './cgroups';
import { startCronDaemon } from './cron';
import { writeFileAtomic } from './files';
import { reservedDbName, startMariaDb, type MariaDb } from './mariadb';
import { createMetricsSampler } from './metrics';
import { listManagedFiles, readManagedFile } from './managed-files';
import { startNginx, type Nginx } from './nginx';
import { openNodeState } from './node-state';
import { createOperationQueue, Refusal } from './operation-queue';
import { createSitePhp, installedPhpVersions, type SitePhp } from './php-fpm';
import { findBinary } from './processes';
import { createReconcileRewrite } from './reconcile-rewrite';
import { createDatabaseReconcile } from './database-reconcile';
import { createSiteApply, limitsOf, settleSiteUsers, siteIndex, type SiteInspection } from './site-apply';
import { createSiteBackups } from './site-backups';
import { docrootUsage, nodeFiles } from './site-files';
import { siteOwner } from './site-users';
import { sftpUnavailable, startSftp, type Sftp } from './sftp';

// A hosting node (PANEL.md section 2): a directory tree under `root` plus the real services that
// serve it. The panel applies operations to its own node directly; every other node's agent
// (`panel-host serve`) applies the operations it pulls. This file starts the services and composes
// the node's parts: its state (node-state.ts), the sites' control groups (cgroups.ts), site apply (site-apply.ts), the operation queue that
// runs everything one at a time and idempotently by id (operation-queue.ts) and the reconciliation
// rewrite (reconcile-rewrite.ts).

export interface HostingNodeOptions {
  root: string;
  webPort: number;
  /** where nginx serves attached certificates (HTTPS by SNI, same address); null or absent: no TLS (the built-in server never serves TLS) */
  webTlsPort?: number | null;
  /** address the web server listens on; default all addresses */
  webHost?: string;
  /** run PHP-FPM for the installed PHP versions (default true; only with nginx) */
  phpFpm?: boolean;
  /** run MariaDB on this port (the `db` role); null or absent: no MariaDB */
  mariadbPort?: number | null;
  /** how long MariaDB may take to come up before the node runs without it (default 30 s) */
  mariadbTimeoutMs?: number;
  /** serve with the built-in static server even where nginx is installed */
  builtinWebServer?: boolean;
  /** where backups of this node's sites go; null: the node refuses backups */
  backupDir?: string | null;
  /** a site cron run is killed after this long (default 15 minutes) */
  cronTimeoutMs?: number;
  /** SFTP for the sites: the node's own sshd on this port (web host); null or absent: none */
  sftpPort?: number | null;
  logger: Logger;
}

/** The node as its agent and the panel's own process drive it: what the panel may ask (OwnNode) and the node's own reports. */
export interface HostingNode extends OwnNode {
  /** the port MariaDB listens on (127.0.0.1) while it runs, else null */
  readonly mariadbPort: number | null;
  facts(): NodeFacts;
  metrics(): Promise<NodeMetrics>;
  /** disk (MB, allocated) and inodes of each site's docroot */
  usage(): Promise<SiteUsage[]>;
  /** the last runs of a site's cron lines, newest first */
  cronRuns(siteId: string): CronRun[];
  /** cron runs started or finished after `seq` (for the next report) and the seq to ask from next */
  cronRunsSince(seq: number): { runs: CronRun[]; seq: number };
  /** what the node applied for a site and the digests of its managed files on disk (reconciliation); null: not on this node */
  inspectSite(siteId: string): Promise<SiteInspection | null>;
  /** stops the web server, PHP-FPM and MariaDB (after the operation in progress) */
  stop(): Promise<void>;
}

export async function startHostingNode(opts: HostingNodeOptions): Promise<HostingNode> {
  const log = opts.logger;
  const state = openNodeState(opts.root, opts.backupDir);
  const { root, sites } = state;
  const webHost = opts.webHost ?? '0.0.0.0';
  const listen = listenAddress(webHost, opts.webPort);
  const tlsListen = opts.webTlsPort == null ? null : listenAddress(webHost, opts.webTlsPort);
  const probeHost = webHost === '0.0.0.0' ? '127.0.0.1' : webHost === '::' ? '::1' : webHost;
  await settleSiteUsers(state, log);
  // each site's control group, with its limits, before anything of the site runs
  const groups = openCgroups({ root, logger: log });
  for (const s of Object.values(sites)) groups.apply(s.domain, limitsOf(s));
  // groups of sites this node no longer has (a node that stopped without removing them)
  const domains = new Set(Object.values(sites).map((s) => s.domain));
  for (const g of groups.names()) if (!domains.has(g)) await groups.remove(g);

  // ---- services ----
  const nginxBin = opts.builtinWebServer ? null : findBinary('nginx');
  let nginx: Nginx | null = null;
  let builtin: Listening | null = null;
  let php: SitePhp | null = null;
  let mariadb: MariaDb | null = null;
  const stopAll = async () => {
    await Promise.allSettled([nginx?.stop(), builtin?.close(), php?.stop(), mariadb?.stop()]);
  };
  const startMariaDbIfAsked = async () => {
    if (opts.mariadbPort == null) return;
    try {
      mariadb = await startMariaDb({ root, port: opts.mariadbPort, logger: log, timeoutMs: opts.mariadbTimeoutMs });
    } catch (err) {
      // a node without MariaDB does not claim the db role; the web side still runs
      log.error({ err: (err as Error).message }, 'MariaDB did not start; this node runs without the db role');
    }
  };
  try {
    if (nginxBin) {
      writeFileAtomic(state.paths.nginxSiteIndex, siteIndex(state));
      const versions = opts.phpFpm === false ? [] : installedPhpVersions();
      const sitePhp = createSitePhp({ root, versions, asRoot: state.webUser !== null, procsFiles: (domain) => groups.procsFiles(domain), logger: log });
      php = sitePhp;
      const pools = Object.values(sites).flatMap((s) => (s.phpVersion ? [sitePaths(root, s.domain).pool(s.phpVersion)] : []));
      const started = await Promise.allSettled([
        sitePhp.sync(pools),
        startNginx({ bin: nginxBin, root, listen, tlsListen, probe: { host: probeHost, port: opts.webPort }, user: state.webUser, logger: log }).then((n) => void (nginx = n)),
        startMariaDbIfAsked(),
      ]);
      const failed = started.find((r) => r.status === 'rejected');
      if (failed) throw (failed as PromiseRejectedResult).reason;
    } else {
      log.warn({ root }, opts.builtinWebServer ? 'built-in web server chosen' : 'nginx is not installed: serving static sites with the built-in web server (no PHP)');
      builtin = await startBuiltinWeb({
        host: webHost,
        port: opts.webPort,
        site: (host) => {
          const s = Object.values(sites).find((x) => x.domain === host || x.aliases.includes(host));
          return s ? { docroot: sitePaths(root, s.domain).docroot, suspended: s.suspended } : null;
        },
      });
      await startMariaDbIfAsked();
    }
  } catch (err) {
    await stopAll();
    throw err;
  }

  const cron = startCronDaemon({
    root,
    sites: () => Object.values(sites),
    userOf: (siteId) => (state.siteUsers ? siteOwner(root, siteId) : state.sharedUser),
    procsFiles: (s) => groups.procsFiles(s.domain),
    timeoutMs: opts.cronTimeoutMs,
    logger: log,
  });

  // ---- SFTP (issue 34 §2): the node's own sshd where it can chroot its sites; a node without it still serves ----
  const startSftpIfAsked = async (): Promise<Sftp | null> => {
    if (opts.sftpPort == null) return null;
    const why = sftpUnavailable(root, state.siteUsers);
    if (why) {
      log.warn({ why }, 'this node offers no SFTP');
      return null;
    }
    try {
      const server = await startSftp({ root, host: webHost, port: opts.sftpPort, sites: () => Object.values(sites), procsFiles: (d) => groups.procsFiles(d), logger: log });
      for (const s of Object.values(sites)) await server.apply(s);
      return server;
    } catch (err) {
      log.error({ err: (err as Error).message }, 'sshd did not start; this node offers no SFTP');
      return null;
    }
  };
  const sftp = await startSftpIfAsked();

  const facts = (): NodeFacts => ({
    webServer: nginx ? 'nginx' : 'builtin',
    phpVersions: php?.versions ?? [],
    mariadb: mariadb !== null,
    roles: mariadb ? ['web', 'db'] : ['web'],
    webAddress: listen,
    backups: !!opts.backupDir,
    tls: !!nginx && tlsListen !== null,
    siteUsers: state.siteUsers,
    limits: groups.enforced,
    ...(sftp ? { sftp: { host: sftp.host, port: sftp.port, users: sftp.users() } } : {}),
  });

  const siteApply = createSiteApply({ state, nginx, php, groups, listen, tlsListen, archiveBeforeDelete: (siteId) => siteBackups.archiveBeforeDelete(siteId) });
  // a site's SFTP keys follow each apply of it; a deleted site's go with it
  const site: typeof siteApply = {
    ...siteApply,
    async applySite(s) {
      const r = await siteApply.applySite(s);
      await sftp?.apply(s);
      return r;
    },
    async deleteSite(siteId, domain) {
      const r = await siteApply.deleteSite(siteId, domain);
      sftp?.remove(siteId);
      return r;
    },
  };
  const siteBackups = createSiteBackups({
    root,
    backupDir: opts.backupDir ?? null,
    sites,
    mariadb: () => mariadb,
    applySite: (s) => site.applySite(s),
    refuse: (message) => new Refusal(message),
    logger: log,
  });

  const applyOne = async (op: NodeOperation): Promise<OperationResult> => {
    switch (op.kind) {
      case 'site.apply':
        return site.applySite(op.site);
      case 'site.delete':
        return site.deleteSite(op.siteId, op.domain);
      case 'database.create':
      case 'database.delete':
      case 'database.password':
      case 'database.lock': {
        if (!mariadb) throw new Refusal('this node runs no MariaDB (no db role)');
        const reserved = reservedDbName(op.database, op.user);
        if (reserved) throw new Refusal(reserved);
        if (op.kind === 'database.create') await mariadb.createDatabase(op.database, op.user, op.password);
        else if (op.kind === 'database.password') await mariadb.setPassword(op.user, op.password);
        else if (op.kind === 'database.lock') await mariadb.setLocked(op.user, op.locked);
        else await mariadb.dropDatabase(op.database, op.user);
        // reconciliation recreates a vanished user with the password it has now
        if (op.kind === 'database.create' || op.kind === 'database.password') await databases.remember(op.user);
        return { ok: true, detail: { database: op.database, user: op.user } };
      }
      case 'backup.create':
      case 'backup.delete':
      case 'backup.restore':
        return siteBackups.apply(op);
    }
  };

  const databases = createDatabaseReconcile({ state, mariadb: () => mariadb, logger: log });
  const queue = createOperationQueue({ state, applyOne, logger: log });
  const rewriteBatch = createReconcileRewrite({ state, site, php, groups, logger: log });

  const sample = createMetricsSampler();
  return {
    root,
    get mariadbPort() {
      return (mariadb as MariaDb | null)?.port ?? null;
    },
    apply: queue.apply,
    facts,
    metrics: sample,
    async usage() {
      const out: SiteUsage[] = [];
      for (const s of Object.values(sites)) {
        const group = groups.usage(s.domain);
        out.push({ siteId: s.id, ...(await docrootUsage(sitePaths(root, s.domain).docroot)), ...(group ? { group } : {}) });
      }
      return out;
    },
    inspectSite: site.inspectSite,
    renderSite: (s) => [...site.managedFiles(s), ...(groups.layout ? [{ kind: 'cgroup' as const, path: groups.pathOf(s.domain), text: groups.render(limitsOf(s)) }] : [])],
    appliedSite: (siteId) => (Object.hasOwn(sites, siteId) ? sites[siteId] : null),
    docroot: (domain) => {
      const d = sitePaths(root, domain).docroot;
      return { path: d, present: fs.existsSync(d) };
    },
    readManaged: (file) => {
      const group = groups.nameOf(file);
      if (group === null) return readManagedFile(file);
      const text = groups.read(group);
      return text === null ? { missing: true } : { text };
    },
    listManaged: () => listManagedFiles(root),
    rewriteSites: (batch) => queue.whileRunning(() => rewriteBatch(batch)),
    databaseInventory: () => queue.inQueue(() => databases.inventory()),
    recreateDatabases: (batch) => queue.whileRunning(() => databases.recreate(batch)),
    backups: {
      backupDir: opts.backupDir ?? null,
      listSiteArchives: () => siteBackups.listSiteArchives(),
      restoreSiteArchive: (siteId) => queue.inQueue(() => siteBackups.restoreSiteArchive(siteId)),
      inspect: (siteId, backupId, inspectionId, sha) => queue.inQueue(() => siteBackups.inspect(siteId, backupId, inspectionId, sha)),
      removeInspection: (id) => siteBackups.removeInspection(id),
      cleanup: (expired) => queue.inQueue(() => siteBackups.cleanup(expired)),
    },
    cronRuns: (siteId) => cron.runs(siteId),
    cronRunsSince: (seq) => cron.changedSince(seq),
    ...nodeFiles(root),
    async stop() {
      await queue.stop();
      await cron.stop();
      await sftp?.stop();
      await stopAll();
      for (const s of Object.values(sites)) await groups.remove(s.domain);
      groups.close();
      log.info({ root }, 'hosting node stopped');
    },
  };
}
