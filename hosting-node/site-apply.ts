import fs from 'node:fs';
import { renderCron, renderNginxSiteIndex, renderPhpPool, renderVhost, renderWelcomePage, sitePaths } from '../domain/panel/node-config';
import type { ArchiveInfo, RenderedFile } from '../domain/panel/own-node';
import { NO_SITE_LIMITS, type OperationResult, type SiteSpec } from '../domain/panel/node-ops';
import type { Logger } from '../platform/logger';
import { readIfExists, restoreFile, sha256, writeFileAtomic } from './files';
import type { NodeState } from './node-state';
import type { Nginx } from './nginx';
import { Refusal } from './operation-queue';
import type { Cgroups } from './cgroups';
import type { SitePhp } from './php-fpm';
import { removeSiteTls, withoutKey, writeSiteTls } from './site-tls';
import { chownTree, ensureSiteUser, pruneSiteUsers, removeSiteUser, siteUserName } from './site-users';

// Applying a site on the node: its control group with its limits (cgroups.ts), its managed files
// (vhost, PHP pool, cron file) rendered from its spec, its docroot and temp folder given to its
// user, and its deletion. Files are changed in one
// step (commitFiles): written, tested with nginx and PHP-FPM, reloaded only when both pass, else
// every file is put back as it was, so a bad spec never leaves the node half changed.

/** A managed file of a site: what the node's last applied spec renders, and what is on disk. */
export interface ManagedFile {
  kind: RenderedFile['kind'];
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

/** The site index once `wanted` is written: every known site's vhost on disk, with what `wanted` writes or removes. */
export function siteIndex(state: NodeState, wanted: Map<string, string | null> = new Map()): string {
  const vhosts = new Set(Object.values(state.sites).map((s) => sitePaths(state.root, s.domain).vhost).filter((f) => fs.existsSync(f)));
  for (const [f, text] of wanted) {
    if (!f.startsWith(`${state.paths.nginxSites}/`)) continue;
    if (text === null) vhosts.delete(f);
    else vhosts.add(f);
  }
  return renderNginxSiteIndex([...vhosts]);
}

/**
 * Creates the site's user and gives it the docroot (group www-data, 2750: nginx reads through the
 * group, other sites' users cannot enter) and the temp folder. A docroot not yet the user's (a new
 * site, a restored or pre-existing one) is root's, so its tree cannot change while it is handed over.
 */
async function giveToSiteUser(state: NodeState, s: SiteSpec, sp: ReturnType<typeof sitePaths>): Promise<void> {
  const owner = await ensureSiteUser(state.root, s.id, sp.siteDir);
  if (fs.lstatSync(sp.docroot).uid !== owner.uid) chownTree(sp.docroot, owner.uid, state.webUserIds!.gid);
  fs.chmodSync(sp.docroot, 0o2750);
  fs.lchownSync(sp.tmp, owner.uid, owner.gid);
  fs.chmodSync(sp.tmp, 0o700);
}

/**
 * At start: removes the users of sites this node no longer has nor has files of (a site folder is
 * kept with its user: its pool may name it), and gives sites from before this node had site users
 * (or whose user went missing) theirs; their pool and cron files follow at the next apply or rewrite.
 */
export async function settleSiteUsers(state: NodeState, log: Logger): Promise<void> {
  if (!state.siteUsers) return;
  const pruned = await pruneSiteUsers({ root: state.root, keep: (id, home) => Object.hasOwn(state.sites, id) || fs.existsSync(home) });
  if (pruned.length) log.warn({ users: pruned }, 'removed the system users of sites this node does not have');
  for (const s of Object.values(state.sites)) {
    const sp = sitePaths(state.root, s.domain);
    if (!fs.existsSync(sp.docroot)) continue;
    fs.mkdirSync(sp.tmp, { recursive: true, mode: 0o700 });
    await giveToSiteUser(state, s, sp);
  }
}

export interface SiteApplyOptions {
  state: NodeState;
  /** the running web server (null: the built-in one, which has no config files) */
  nginx: Nginx | null;
  /** the sites' PHP-FPM masters (one per site, in its group); null: no PHP on this node */
  php: SitePhp | null;
  /** the sites' control groups */
  groups: Cgroups;
  listen: string;
  tlsListen: string | null;
  /** archives a site about to be deleted (site-backups.ts), null: not archived */
  archiveBeforeDelete(siteId: string): Promise<ArchiveInfo | null>;
}

export type SiteApply = ReturnType<typeof createSiteApply>;

/** The limits a site's group binds (none recorded: unlimited). */
export const limitsOf = (s: SiteSpec) => s.limits ?? NO_SITE_LIMITS;

export function createSiteApply(o: SiteApplyOptions) {
  const { state, nginx, php, groups, listen, tlsListen } = o;
  const { root, paths: p, sites, siteUsers, webUser, webUserIds, sharedUser } = state;

  // A site's certificate files are not managed files: the panel never holds the private key in
  // clear, so reconciliation could not rewrite it; the vhost that names them is compared instead.
  const managedFiles = (s: SiteSpec): RenderedFile[] => {
    const sp = sitePaths(root, s.domain);
    const out: RenderedFile[] = [];
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
    if (nginx) wanted.set(p.nginxSiteIndex, siteIndex(state, wanted));
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
    if (siteUsers) await giveToSiteUser(state, s, sp);
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
    state.saveSites();
    return { ok: true, detail: { generation: s.generation, files: Object.fromEntries(files.map((f) => [f.kind, sha256(f.text)])) } };
  };

  const deleteSite = async (siteId: string, domain: string): Promise<OperationResult> => {
    const owner = Object.values(sites).find((s) => s.domain === domain);
    if (owner && owner.id !== siteId) throw new Refusal(`${domain} belongs to site ${owner.id} on this node, not ${siteId}`);
    // with -backup-dir a deleted site is archived first (spec 4.4.5); a failed archive keeps the site
    const archive = await o.archiveBeforeDelete(siteId);
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
    state.saveSites();
    return { ok: true, detail: { existed, ...(archive ? { archive: { file: archive.file, sha256: archive.sha256, bytes: archive.bytes } } : {}) } };
  };

  /** What the node applied for a site and the digests of its managed files on disk; null: not on this node. */
  const inspectSite = async (siteId: string): Promise<SiteInspection | null> => {
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
  };

  return { managedFiles, possibleFiles, commitFiles, makeSiteDirs, applySite, deleteSite, inspectSite };
}
