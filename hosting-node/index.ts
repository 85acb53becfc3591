import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isSafeRoot, listenAddress, nodePaths, renderCron, renderNginxSiteIndex, renderPhpPool, renderVhost, renderWelcomePage, sitePaths, validateOperation, validateSite } from '../domain/panel/node-config';
import type { CronRun } from '../domain/panel/cron';
import { NO_SITE_LIMITS, type NodeFacts, type NodeMetrics, type NodeOperation, type OperationResult, type SiteSpec, type SiteUsage } from '../domain/panel/node-ops';
import type { Listening } from '../platform/http-server';
import type { Logger } from '../platform/logger';
import { startBuiltinWeb } from './builtin-web';
import { openCgroups } from './cgroups';
import { startCronDaemon } from './cron';
import { readIfExists, readJson, restoreFile, sha256, writeFileAtomic, writeJson } from './files';
import { reservedDbName, startMariaDb, type MariaDb } from './mariadb';
import { createMetricsSampler, treeUsage } from './metrics';
import { startNginx, type Nginx } from './nginx';
import { createSitePhp, installedPhpVersions, type SitePhp } from './php-fpm';
import { findBinary } from './processes';
import { listManagedFiles, readManagedFile, type ManagedRead } from './managed-files';
import { createSiteBackups, type NodeBackups } from './site-backups';
import { removeSiteTls, withoutKey, writeSiteTls } from './site-tls';
import { canCreateSiteUsers, chownTree, ensureSiteUser, pruneSiteUsers, removeSiteUser, siteOwner, siteUserName } from './site-users';

// A hosting node (PANEL.md section 2): a directory tree under `root` plus the real services that
// serve it. The panel applies operations to its own node directly; every other node's agent
// (`panel-host serve`) applies the operations it pulls. Operations are applied one at a time and
// idempotently by id: the result of every applied id is kept under <root>/state/ and a repeated
// id returns it without doing anything.

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
  logger: Logger;
}

/** A managed file of a site: what the node's last applied spec renders, and what is on disk. */
export interface ManagedFile {
  /** `cgroup`: the site's control group, its settings read from the kernel (hosting-node/cgroups.ts) */
  kind: 'vhost' | 'pool' | 'cron' | 'cgroup';
  path: string;
  /** SHA-256 of the file as rendered from the applied spec */
  expected: string;
  /** SHA-256 of the file on disk; null: missing */
  actual: string | null;
}

export interface SiteInspection {
  siteId: string;
  domain: string;
  /** the generation the node applied */
  generation: number;
  suspended: boolean;
  docroot: boolean;
  files: ManagedFile[];
}

export interface HostingNode {
  root: string;
  /** the port MariaDB listens on (127.0.0.1) while it runs, else null */
  readonly mariadbPort: number | null;
  /** applies one operation (queued behind any other); a repeated id returns the first result */
  apply(op: NodeOperation): Promise<OperationResult>;
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
  /** archives of deleted sites, restores, inspection folders and cleanup (`-backup-dir`), run in the operation queue */
  backups: NodeBackups;
  /** stops the web server, PHP-FPM and MariaDB (after the operation in progress) */
  stop(): Promise<void>;
  // ---- reconciliation (services/panel/reconcile) ----
  /** the managed files a spec renders on this node (what the panel expects on disk) */
  renderSite(s: SiteSpec): RenderedFile[];
  /** the spec the node last applied for a site, null: it has no record of it */
  appliedSite(siteId: string): SiteSpec | null;
  /** a site's docroot and whether it is on disk */
  docroot(domain: string): { path: string; present: boolean };
  /** one managed file as it is on disk; an unreadable file is reported, never thrown */
  readManaged(file: string): ManagedRead;
  /** every managed file on disk (vhosts, pools, cron files), known sites' or not */
  listManaged(): string[];
  /**
   * Rewrites the managed files of sites the node already serves to match their specs, in one
   * config test and one reload for the whole batch; idempotent by each rewrite's id (a repeated
   * id returns its first result). Each rewrite appends what it overwrote to <root>/state/reconcile.log.
   */
  rewriteSites(batch: Array<{ opId: string; site: SiteSpec }>): Promise<OperationResult[]>;
}

export interface RenderedFile {
  kind: ManagedFile['kind'];
  path: string;
  text: string;
}

/** An operation the node will not apply as sent (bad value, not capable): reported with refused: true. */
class Refusal extends Error {}

const OPS_KEPT = 2000;

interface AppliedOp {
  kind: string;
  at: string;
  result: OperationResult;
}

/** uid and gid of a system user, from /etc/passwd. */
function systemUser(name: string): { uid: number; gid: number } | null {
  const line = (readIfExists('/etc/passwd') ?? '').split('\n').find((l) => l.startsWith(`${name}:`));
  if (!line) return null;
  const f = line.split(':');
  return { uid: Number(f[2]), gid: Number(f[3]) };
}

/** nginx and PHP workers run as www-data: every folder down to the root must be enterable by others. */
function assertOthersCanEnter(root: string): void {
  for (let d = root; ; d = path.dirname(d)) {
    if ((fs.statSync(d).mode & 0o001) === 0) throw new Error(`node root ${root}: www-data cannot enter ${d} (chmod o+x ${d}, or choose another root)`);
    if (d === path.dirname(d)) return;
  }
}

export async function startHostingNode(opts: HostingNodeOptions): Promise<HostingNode> {
  const log = opts.logger;
  const root = path.resolve(opts.root);
  if (!isSafeRoot(root)) throw new Error(`node root ${root}: use a path of at most 72 letters, digits and . _ - (it is written unquoted into nginx and PHP-FPM configs, and sockets live under it)`);
  const p = nodePaths(root);
  for (const d of [p.sites, p.nginxSites, p.cronDir, p.state, `${root}/run`, `${root}/log`, `${root}/tmp`]) fs.mkdirSync(d, { recursive: true });
  if (opts.backupDir) fs.mkdirSync(opts.backupDir, { recursive: true, mode: 0o700 });
  // As root the sites' PHP and nginx workers run as www-data; otherwise as the node's own user.
  const webUser = process.getuid?.() === 0 && systemUser('www-data') ? 'www-data' : null;
  const webUserIds = webUser ? systemUser(webUser) : null;
  if (webUser) assertOthersCanEnter(root);
  // cron lines run as each site's user; on a node without site users, as www-data under root, else as this process's user
  const sharedUser = webUser && webUserIds ? { name: webUser, ...webUserIds } : { name: os.userInfo().username, uid: os.userInfo().uid, gid: os.userInfo().gid };
  // each site its own system user where this process may create users (site-users.ts), decided once
  const siteUsers = webUserIds !== null && canCreateSiteUsers();
  const webHost = opts.webHost ?? '0.0.0.0';
  const listen = listenAddress(webHost, opts.webPort);
  const tlsListen = opts.webTlsPort == null ? null : listenAddress(webHost, opts.webTlsPort);
  const probeHost = webHost === '0.0.0.0' ? '127.0.0.1' : webHost === '::' ? '::1' : webHost;

  const sitesFile = `${p.state}/sites.json`;
  const opsFile = `${p.state}/applied-ops.json`;
  const sites = readJson<Record<string, SiteSpec>>(sitesFile, {});
  const ops = readJson<Record<string, AppliedOp>>(opsFile, {});

  /** The site index once `wanted` is written: every known site's vhost on disk, with what `wanted` writes or removes. */
  const siteIndex = (wanted: Map<string, string | null> = new Map()): string => {
    const vhosts = new Set(Object.values(sites).map((s) => sitePaths(root, s.domain).vhost).filter((f) => fs.existsSync(f)));
    for (const [f, text] of wanted) {
      if (!f.startsWith(`${p.nginxSites}/`)) continue;
      if (text === null) vhosts.delete(f);
      else vhosts.add(f);
    }
    return renderNginxSiteIndex([...vhosts]);
  };

  // users of sites this node no longer has nor has files of (a site folder is kept with its user: its pool may name it)
  if (siteUsers) {
    const pruned = await pruneSiteUsers({ root, keep: (id, home) => Object.hasOwn(sites, id) || fs.existsSync(home) });
    if (pruned.length) log.warn({ users: pruned }, 'removed the system users of sites this node does not have');
  }

  /**
   * Creates the site's user and gives it the docroot (group www-data, 2750: nginx reads through the
   * group, other sites' users cannot enter) and the temp folder. A docroot not yet the user's (a new
   * site, a restored or pre-existing one) is root's, so its tree cannot change while it is handed over.
   */
  const giveToSiteUser = async (s: SiteSpec, sp: ReturnType<typeof sitePaths>) => {
    const owner = await ensureSiteUser(root, s.id, sp.siteDir);
    if (fs.lstatSync(sp.docroot).uid !== owner.uid) chownTree(sp.docroot, owner.uid, webUserIds!.gid);
    fs.chmodSync(sp.docroot, 0o2750);
    fs.lchownSync(sp.tmp, owner.uid, owner.gid);
    fs.chmodSync(sp.tmp, 0o700);
  };
  // sites from before this node had site users (or whose user went missing) get theirs now; their
  // pool and cron files follow at the next apply or reconciliation rewrite
  if (siteUsers) {
    for (const s of Object.values(sites)) {
      const sp = sitePaths(root, s.domain);
      if (!fs.existsSync(sp.docroot)) continue;
      fs.mkdirSync(sp.tmp, { recursive: true, mode: 0o700 });
      await giveToSiteUser(s, sp);
    }
  }

  // ---- services ----
  const nginxBin = opts.builtinWebServer ? null : findBinary('nginx');
  let nginx: Nginx | null = null;
  let builtin: Listening | null = null;
  let php: SitePhp | null = null;
  let mariadb: MariaDb | null = null;
  // each site's control group, with its limits, before anything of the site runs
  const groups = openCgroups({ root, logger: log });
  const limitsOf = (s: SiteSpec) => s.limits ?? NO_SITE_LIMITS;
  for (const s of Object.values(sites)) groups.apply(s.domain, limitsOf(s));
  // groups of sites this node no longer has (a node that stopped without removing them)
  const domains = new Set(Object.values(sites).map((s) => s.domain));
  for (const g of groups.names()) if (!domains.has(g)) await groups.remove(g);
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
      writeFileAtomic(p.nginxSiteIndex, siteIndex());
      const versions = opts.phpFpm === false ? [] : installedPhpVersions();
      const sitePhp = createSitePhp({ root, versions, asRoot: webUser !== null, procsFiles: (domain) => groups.procsFiles(domain), logger: log });
      php = sitePhp;
      const pools = Object.values(sites).flatMap((s) => (s.phpVersion ? [sitePaths(root, s.domain).pool(s.phpVersion)] : []));
      const started = await Promise.allSettled([
        sitePhp.sync(pools),
        startNginx({ bin: nginxBin, root, listen, tlsListen, probe: { host: probeHost, port: opts.webPort }, user: webUser, logger: log }).then((n) => void (nginx = n)),
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
    userOf: (siteId) => (siteUsers ? siteOwner(root, siteId) : sharedUser),
    procsFiles: (site) => groups.procsFiles(site.domain),
    timeoutMs: opts.cronTimeoutMs,
    logger: log,
  });

  const facts = (): NodeFacts => ({
    webServer: nginx ? 'nginx' : 'builtin',
    phpVersions: php?.versions ?? [],
    mariadb: mariadb !== null,
    roles: mariadb ? ['web', 'db'] : ['web'],
    webAddress: listen,
    backups: !!opts.backupDir,
    tls: !!nginx && tlsListen !== null,
    siteUsers,
    limits: groups.enforced,
  });

  // ---- rendering of one site's managed files ----
  // A site's certificate files are not managed files: the panel never holds the private key in
  // clear, so reconciliation could not rewrite it; the vhost that names them is compared instead.
  const managedFiles = (s: SiteSpec): Array<{ kind: ManagedFile['kind']; path: string; text: string }> => {
    const sp = sitePaths(root, s.domain);
    const out: Array<{ kind: ManagedFile['kind']; path: string; text: string }> = [];
    if (nginx) out.push({ kind: 'vhost', path: sp.vhost, text: renderVhost(s, { root, listen, tlsListen }) });
    const siteUser = siteUsers ? siteUserName(root, s.id) : null;
    if (s.phpVersion && php?.has(s.phpVersion)) out.push({ kind: 'pool', path: sp.pool(s.phpVersion), text: renderPhpPool(s, { root, user: webUser, siteUser }) });
    out.push({ kind: 'cron', path: sp.cron, text: renderCron(s, { user: siteUser ?? sharedUser.name }) });
    return out;
  };
  /** every file a site may have under a domain (any PHP version), to remove what the new spec does not render */
  const possibleFiles = (domain: string) => {
    const sp = sitePaths(root, domain);
    return [...(nginx ? [sp.vhost] : []), ...(php?.versions ?? []).map((v) => sp.pool(v)), sp.cron];
  };

  /**
   * Writes `wanted` (file → text, null: remove), tests nginx and PHP-FPM with the new files and,
   * only when both pass, reloads what changed. A failed test puts every file back as it was.
   */
  const commitFiles = async (wanted: Map<string, string | null>) => {
    if (nginx) wanted.set(p.nginxSiteIndex, siteIndex(wanted));
    const before = new Map([...wanted.keys()].map((f) => [f, readIfExists(f)]));
    const changed = [...wanted].filter(([f, text]) => before.get(f) !== text).map(([f]) => f);
    if (changed.length === 0) return;
    for (const f of changed) restoreFile(f, wanted.get(f)!);
    const nginxChanged = !!nginx && changed.some((f) => f === p.nginxSiteIndex || f.startsWith(`${p.nginxSites}/`));
    const pools = php ? changed.filter((c) => c.startsWith(`${root}/etc/php/`)) : [];
    const problems = [...(nginxChanged ? [await nginx!.test()] : []), ...(pools.length ? await php!.test(pools) : [])].filter((x): x is string => x !== null);
    if (problems.length) {
      for (const f of changed) restoreFile(f, before.get(f)!);
      throw new Error(`config test failed, previous config kept: ${problems.join('; ')}`);
    }
    // PHP first, so the sockets a new vhost points at exist when nginx loads it
    if (pools.length) await php!.sync(pools);
    if (nginxChanged) await nginx!.reload();
  };

  const saveSites = () => writeJson(sitesFile, sites);

  /**
   * The site's docroot (with the welcome pages when `welcome`: a new site; a reconciliation
   * rewrite recreates it empty, files come back only from a restore point) and temp folder, given
   * to the site's user.
   */
  const makeSiteDirs = async (s: SiteSpec, welcome: boolean): Promise<void> => {
    const sp = sitePaths(root, s.domain);
    if (!fs.existsSync(sp.docroot)) {
      fs.mkdirSync(sp.docroot, { recursive: true, mode: 0o755 });
      fs.chmodSync(sp.siteDir, 0o755);
      fs.chmodSync(sp.docroot, 0o755);
      if (welcome) writeFileAtomic(`${sp.docroot}/index.html`, renderWelcomePage(s.domain, 'html'));
      if (welcome && s.phpVersion) writeFileAtomic(`${sp.docroot}/index.php`, renderWelcomePage(s.domain, 'php'));
    }
    // PHP's temp files, uploads and sessions: the pool's user only
    fs.mkdirSync(sp.tmp, { recursive: true, mode: 0o700 });
    if (siteUsers) await giveToSiteUser(s, sp);
    else if (webUserIds) fs.chownSync(sp.tmp, webUserIds.uid, webUserIds.gid);
  };

  const applySite = async (s: SiteSpec): Promise<OperationResult> => {
    if (s.phpVersion && !php?.has(s.phpVersion)) {
      throw new Refusal(`PHP ${s.phpVersion} is not available on this node (available: ${php?.versions.join(', ') || 'none'})`);
    }
    const prev = sites[s.id];
    if (prev && s.generation < prev.generation) throw new Refusal(`stale generation ${s.generation}: generation ${prev.generation} is applied`);
    const names = new Set([s.domain, ...s.aliases]);
    for (const other of Object.values(sites)) {
      if (other.id === s.id) continue;
      const taken = [other.domain, ...other.aliases].find((n) => names.has(n));
      if (taken) throw new Refusal(`${taken} is already served on this node by site ${other.id}`);
    }
    const sp = sitePaths(root, s.domain);
    // a changed domain moves the site's folder and removes the files of the old name
    if (prev && prev.domain !== s.domain && fs.existsSync(sitePaths(root, prev.domain).siteDir) && !fs.existsSync(sp.siteDir)) {
      fs.renameSync(sitePaths(root, prev.domain).siteDir, sp.siteDir);
    }
    await makeSiteDirs(s, true);
    const wanted = new Map<string, string | null>();
    for (const f of [...(prev && prev.domain !== s.domain ? possibleFiles(prev.domain) : []), ...possibleFiles(s.domain)]) wanted.set(f, null);
    const files = managedFiles(s);
    for (const f of files) wanted.set(f.path, f.text);
    // a new certificate is loaded by the reload of its vhost, which names the new generation in its header
    const undoTls = writeSiteTls(root, s, (message) => new Refusal(message));
    try {
      // the group first: a new PHP master starts inside it
      groups.apply(s.domain, limitsOf(s));
      await commitFiles(wanted);
    } catch (err) {
      undoTls();
      // a group made for a name the node does not serve goes again (a kept site keeps its limits until the next apply)
      if (!prev || prev.domain !== s.domain) await groups.remove(s.domain);
      throw err;
    }
    if (!s.tls) removeSiteTls(root, s.domain);
    if (prev && prev.domain !== s.domain) removeSiteTls(root, prev.domain);
    if (prev && prev.domain !== s.domain) await groups.remove(prev.domain);
    sites[s.id] = withoutKey(s);
    saveSites();
    return { ok: true, detail: { generation: s.generation, files: Object.fromEntries(files.map((f) => [f.kind, sha256(f.text)])) } };
  };

  const siteBackups = createSiteBackups({
    root,
    backupDir: opts.backupDir ?? null,
    sites,
    mariadb: () => mariadb,
    applySite: (s) => applySite(s),
    refuse: (message) => new Refusal(message),
    logger: log,
  });

  const deleteSite = async (siteId: string, domain: string): Promise<OperationResult> => {
    const owner = Object.values(sites).find((s) => s.domain === domain);
    if (owner && owner.id !== siteId) throw new Refusal(`${domain} belongs to site ${owner.id} on this node, not ${siteId}`);
    // with -backup-dir a deleted site is archived first (spec 4.4.5); a failed archive keeps the site
    const archive = await siteBackups.archiveBeforeDelete(siteId);
    const domains = new Set([domain, ...(sites[siteId] ? [sites[siteId].domain] : [])]);
    const wanted = new Map<string, string | null>();
    for (const d of domains) for (const f of possibleFiles(d)) wanted.set(f, null);
    await commitFiles(wanted);
    const existed = !!sites[siteId];
    // the user's processes end with it, so nothing of the site can change its files while they go
    if (siteUsers) await removeSiteUser(root, siteId);
    for (const d of domains) {
      fs.rmSync(sitePaths(root, d).siteDir, { recursive: true, force: true });
      fs.rmSync(`${p.nginxLogs}/${d}.access.log`, { force: true });
      removeSiteTls(root, d);
      await groups.remove(d);
    }
    delete sites[siteId];
    saveSites();
    return { ok: true, detail: { existed, ...(archive ? { archive: { file: archive.file, sha256: archive.sha256, bytes: archive.bytes } } : {}) } };
  };

  const applyOne = async (op: NodeOperation): Promise<OperationResult> => {
    switch (op.kind) {
      case 'site.apply':
        return applySite(op.site);
      case 'site.delete':
        return deleteSite(op.siteId, op.domain);
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
        return { ok: true, detail: { database: op.database, user: op.user } };
      }
      case 'backup.create':
      case 'backup.delete':
      case 'backup.restore':
        return siteBackups.apply(op);
    }
  };

  const record = (id: string, kind: string, result: OperationResult) => {
    ops[id] = { kind, at: new Date().toISOString(), result };
    saveOps();
  };
  const saveOps = () => {
    const ids = Object.keys(ops);
    // insertion order is application order: the oldest are dropped first
    for (const old of ids.slice(0, Math.max(0, ids.length - OPS_KEPT))) delete ops[old];
    writeJson(opsFile, ops);
  };

  let queue: Promise<unknown> = Promise.resolve();
  let stopped = false;
  const apply = (op: NodeOperation): Promise<OperationResult> => {
    const next = queue.then(async (): Promise<OperationResult> => {
      const id = typeof op?.id === 'string' ? op.id : '';
      const done = Object.hasOwn(ops, id) ? ops[id] : undefined;
      if (done) return done.result;
      const why = validateOperation(op);
      if (why) {
        const result: OperationResult = { ok: false, error: why, refused: true };
        if (/^[A-Za-z0-9_-]{1,64}$/.test(id)) record(id, String(op.kind), result);
        log.warn({ op: id, kind: op?.kind, why }, 'operation refused');
        return result;
      }
      if (stopped) return { ok: false, error: 'the node is stopping', refused: false };
      let result: OperationResult;
      try {
        result = await applyOne(op);
      } catch (err) {
        result = { ok: false, error: (err as Error).message, refused: err instanceof Refusal };
      }
      record(op.id, op.kind, result);
      log.info({ op: op.id, kind: op.kind, ok: result.ok, ...(result.ok ? {} : { error: result.error }) }, 'operation applied');
      return result;
    });
    queue = next.catch(() => {});
    return next;
  };

  /** The reconciliation rewrite of a batch (HostingNode.rewriteSites), run in the operation queue. */
  const rewriteLog = `${p.state}/reconcile.log`;
  /** op ids in reconcile.log (read once): a rewrite is logged once however often it is retried */
  let logged: Set<string> | null = null;
  const loggedRewrites = (): Set<string> => {
    logged ??= new Set((readIfExists(rewriteLog) ?? '').split('\n').filter(Boolean).map((l) => JSON.parse(l) as { op: string; failed?: string }).filter((l) => !l.failed).map((l) => l.op));
    return logged;
  };
  const rewriteBatch = async (batch: Array<{ opId: string; site: SiteSpec }>): Promise<OperationResult[]> => {
    const todo = batch.filter((b) => !Object.hasOwn(ops, b.opId));
    const refusal = (s: SiteSpec): string | null => {
      const prev = sites[s.id];
      if (!prev) return `the node has no record of site ${s.id}: it is created by an operation, not rewritten`;
      if (s.generation < prev.generation) return `stale generation ${s.generation}: generation ${prev.generation} is applied`;
      if (s.phpVersion && !php?.has(s.phpVersion)) return `PHP ${s.phpVersion} is not available on this node`;
      return validateSite(s);
    };
    const refused = new Map(todo.map((b) => [b.opId, refusal(b.site)]));
    const go = todo.filter((b) => refused.get(b.opId) === null);
    const wanted = new Map<string, string | null>();
    for (const { site } of go) for (const f of possibleFiles(site.domain)) wanted.set(f, null);
    for (const { site } of go) for (const f of managedFiles(site)) wanted.set(f.path, f.text);
    const before = new Map([...wanted.keys()].map((f) => [f, readIfExists(f)]));
    const at = new Date().toISOString();
    const planned = go.map((b) => {
      const rendered = managedFiles(b.site);
      const files = rendered.map((f) => ({ kind: f.kind, path: f.path, old_digest: before.get(f.path) == null ? null : sha256(before.get(f.path)!), new_digest: sha256(f.text) }));
      // files already as rendered (a retry after a crash that wrote them): nothing is overwritten now
      return { b, files, overwrites: rendered.some((f) => before.get(f.path) !== f.text) };
    });
    // written ahead of the files, so a crash after the rewrite cannot lose what it overwrote
    const ahead = planned.filter((x) => x.overwrites && !loggedRewrites().has(x.b.opId));
    const line = (x: (typeof planned)[number], extra: object = {}) => JSON.stringify({ op: x.b.opId, site: x.b.site.id, domain: x.b.site.domain, generation: x.b.site.generation, at, files: x.files, ...extra });
    if (ahead.length) fs.appendFileSync(rewriteLog, ahead.map((x) => `${line(x)}\n`).join(''));
    for (const x of ahead) loggedRewrites().add(x.b.opId);
    let failure: string | null = null;
    const recreated = new Set<string>();
    try {
      for (const { site } of go) {
        if (fs.existsSync(sitePaths(root, site.domain).docroot)) continue;
        await makeSiteDirs(site, false);
        recreated.add(site.id);
      }
      for (const { site } of go) groups.apply(site.domain, limitsOf(site));
      await commitFiles(wanted);
    } catch (err) {
      failure = (err as Error).message;
      fs.appendFileSync(rewriteLog, ahead.map((x) => `${line(x, { failed: failure })}\n`).join(''));
      for (const x of ahead) loggedRewrites().delete(x.b.opId);
    }
    for (const x of planned) if (!failure) sites[x.b.site.id] = x.b.site;
    for (const b of todo) {
      const why = refused.get(b.opId);
      const x = planned.find((y) => y.b === b);
      const result: OperationResult = why
        ? { ok: false, error: why, refused: true }
        : failure
          ? { ok: false, error: failure, refused: false }
          : { ok: true, detail: { generation: b.site.generation, files: x!.files, overwrote: x!.overwrites, docroot_recreated: recreated.has(b.site.id) } };
      ops[b.opId] = { kind: 'site.reconcile', at, result };
    }
    if (planned.length && !failure) saveSites();
    if (todo.length) saveOps();
    log.info({ rewritten: failure ? 0 : planned.filter((x) => x.overwrites).length, asked: batch.length, ...(failure ? { error: failure } : {}) }, 'reconciliation rewrite applied');
    return batch.map((b) => ops[b.opId].result);
  };

  /** Runs `fn` in the operation queue (after the operation in progress), like an operation. */
  const inQueue = <T>(fn: () => Promise<T> | T): Promise<T> => {
    const next = queue.then(fn);
    queue = next.catch(() => {});
    return next;
  };

  const sample = createMetricsSampler();
  return {
    root,
    get mariadbPort() {
      return (mariadb as MariaDb | null)?.port ?? null;
    },
    apply,
    facts,
    metrics: sample,
    async usage() {
      const out: SiteUsage[] = [];
      for (const s of Object.values(sites)) {
        const u = await treeUsage(sitePaths(root, s.domain).docroot);
        const group = groups.usage(s.domain);
        out.push({ siteId: s.id, diskMb: Math.round((u.bytes / 1048576) * 100) / 100, inodes: u.inodes, ...(group ? { group } : {}) });
      }
      return out;
    },
    async inspectSite(siteId) {
      const s = sites[siteId];
      if (!s) return null;
      return {
        siteId,
        domain: s.domain,
        generation: s.generation,
        suspended: s.suspended,
        docroot: fs.existsSync(sitePaths(root, s.domain).docroot),
        files: managedFiles(s).map((f) => {
          const actual = readIfExists(f.path);
          return { kind: f.kind, path: f.path, expected: sha256(f.text), actual: actual === null ? null : sha256(actual) };
        }),
      };
    },
    renderSite: (s) => [...managedFiles(s), ...(groups.layout ? [{ kind: 'cgroup' as const, path: groups.pathOf(s.domain), text: groups.render(limitsOf(s)) }] : [])],
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
    rewriteSites(batch) {
      const next = queue.then(() => {
        if (stopped) throw new Error('the node is stopping');
        return rewriteBatch(batch);
      });
      queue = next.catch(() => {});
      return next;
    },
    backups: {
      backupDir: opts.backupDir ?? null,
      listSiteArchives: () => siteBackups.listSiteArchives(),
      restoreSiteArchive: (siteId) => inQueue(() => siteBackups.restoreSiteArchive(siteId)),
      inspect: (siteId, backupId, inspectionId, sha) => inQueue(() => siteBackups.inspect(siteId, backupId, inspectionId, sha)),
      removeInspection: (id) => siteBackups.removeInspection(id),
      cleanup: (expired) => inQueue(() => siteBackups.cleanup(expired)),
    },
    cronRuns: (siteId) => cron.runs(siteId),
    cronRunsSince: (seq) => cron.changedSince(seq),
    async stop() {
      stopped = true;
      await queue;
      await cron.stop();
      await stopAll();
      for (const s of Object.values(sites)) await groups.remove(s.domain);
      groups.close();
      log.info({ root }, 'hosting node stopped');
    },
  };
}
