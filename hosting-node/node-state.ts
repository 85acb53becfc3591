import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isSafeRoot, nodePaths } from '../domain/panel/node-config';
import type { OperationResult, SiteSpec } from '../domain/panel/node-ops';
import { readIfExists, readJson, writeJson } from './files';
import { canCreateSiteUsers } from './site-users';

// What a hosting node knows of itself (PANEL.md section 2): its root and folders, the users its
// web, PHP and cron processes run as, the specs of the sites it applied (state/sites.json) and the
// result of every operation id it applied (state/applied-ops.json, the newest 2000). Both files are
// rewritten whole and atomically after every change, so a restarted node answers a repeated id alike.

const OPS_KEPT = 2000;

export interface AppliedOp {
  kind: string;
  at: string;
  result: OperationResult;
}

export interface NodeState {
  root: string;
  paths: ReturnType<typeof nodePaths>;
  /** the user nginx and PHP workers run as (www-data when run as root), else null: this process's user */
  webUser: string | null;
  webUserIds: { uid: number; gid: number } | null;
  /** who runs cron lines on a node without site users */
  sharedUser: { name: string; uid: number; gid: number };
  /** each site its own system user (site-users.ts), decided once */
  siteUsers: boolean;
  /** applied site specs by site id (without TLS private keys) */
  sites: Record<string, SiteSpec>;
  /** applied operations by id, in application order */
  ops: Record<string, AppliedOp>;
  saveSites(): void;
  /** records an operation's result under its id and saves the list */
  record(id: string, kind: string, result: OperationResult): void;
  /** saves the list of applied operations, dropping the oldest beyond 2000 */
  saveOps(): void;
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

/** Creates the node's folders under `root` (and the backup folder) and reads its saved state. */
export function openNodeState(rootDir: string, backupDir: string | null | undefined): NodeState {
  const root = path.resolve(rootDir);
  if (!isSafeRoot(root)) throw new Error(`node root ${root}: use a path of at most 72 letters, digits and . _ - (it is written unquoted into nginx and PHP-FPM configs, and sockets live under it)`);
  const p = nodePaths(root);
  for (const d of [p.sites, p.nginxSites, p.cronDir, p.state, `${root}/run`, `${root}/log`, `${root}/tmp`]) fs.mkdirSync(d, { recursive: true });
  if (backupDir) fs.mkdirSync(backupDir, { recursive: true, mode: 0o700 });
  // As root the sites' PHP and nginx workers run as www-data; otherwise as the node's own user.
  const webUser = process.getuid?.() === 0 && systemUser('www-data') ? 'www-data' : null;
  const webUserIds = webUser ? systemUser(webUser) : null;
  if (webUser) assertOthersCanEnter(root);
  // cron lines run as each site's user; on a node without site users, as www-data under root, else as this process's user
  const sharedUser = webUser && webUserIds ? { name: webUser, ...webUserIds } : { name: os.userInfo().username, uid: os.userInfo().uid, gid: os.userInfo().gid };
  const siteUsers = webUserIds !== null && canCreateSiteUsers();

  const sitesFile = `${p.state}/sites.json`;
  const opsFile = `${p.state}/applied-ops.json`;
  const sites = readJson<Record<string, SiteSpec>>(sitesFile, {});
  const ops = readJson<Record<string, AppliedOp>>(opsFile, {});
  const saveOps = () => {
    const ids = Object.keys(ops);
    // insertion order is application order: the oldest are dropped first
    for (const old of ids.slice(0, Math.max(0, ids.length - OPS_KEPT))) delete ops[old];
    writeJson(opsFile, ops);
  };
  return {
    root,
    paths: p,
    webUser,
    webUserIds,
    sharedUser,
    siteUsers,
    sites,
    ops,
    saveSites: () => writeJson(sitesFile, sites),
    record(id, kind, result) {
      ops[id] = { kind, at: new Date().toISOString(), result };
      saveOps();
    },
    saveOps,
  };
}
