import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { readIfExists } from './files';
import { findBinary, run } from './processes';

// Per-site system users (PANEL.md section 2): where the node process may create users (root, with
// useradd and userdel, and www-data for the web server), each site gets its own user, which owns
// the site's docroot and temp folder and runs its PHP pool and cron lines, so one site's code cannot
// read another's files. The docroot's group is www-data (mode 2750) so nginx reads static files
// through the group while other sites' users, in no such group, cannot enter it. The site folder
// above it stays root's, so the path to the docroot can never be swapped for a link by the site.
//
// A user is named from the node root and the site id (two nodes on one machine never share one),
// and marked in its comment field: a user with the name but without the mark is never touched.

export interface SiteUser {
  name: string;
  uid: number;
  gid: number;
}

/** `s_` and 12 hex digits of SHA-256(root, site id): deterministic, 14 characters. */
export const siteUserName = (root: string, siteId: string): string => `s_${createHash('sha256').update(`${root}\0${siteId}`).digest('hex').slice(0, 12)}`;

/** The comment (GECOS) field that marks a user as a site's: `panel site <id> <root>` (no colons: ids and roots are plain). */
const mark = (root: string, siteId: string) => `panel site ${siteId} ${root}`;
const MARK = /^panel site ([A-Za-z0-9_-]{1,64}) (\/\S+)$/;

interface PasswdLine {
  name: string;
  uid: number;
  gid: number;
  comment: string;
  home: string;
}

function passwd(): PasswdLine[] {
  return (readIfExists('/etc/passwd') ?? '')
    .split('\n')
    .filter(Boolean)
    .map((l) => l.split(':'))
    .map((f) => ({ name: f[0], uid: Number(f[2]), gid: Number(f[3]), comment: f[4] ?? '', home: f[5] ?? '' }));
}

/** Whether this process may create site users: root, useradd/userdel installed, www-data present (decided once per node). */
export function canCreateSiteUsers(): boolean {
  return process.getuid?.() === 0 && !!findBinary('useradd') && !!findBinary('userdel') && passwd().some((u) => u.name === 'www-data');
}

/** The site's user where it exists and is marked as this site's; null otherwise (non-root nodes, or not created yet). */
export function siteOwner(root: string, siteId: string): SiteUser | null {
  const name = siteUserName(root, siteId);
  const u = passwd().find((x) => x.name === name);
  return u && u.comment === mark(root, siteId) ? { name, uid: u.uid, gid: u.gid } : null;
}

/** Creates the site's user if missing (no login shell, home = the site folder); refuses a same-named account that is not the site's. */
export async function ensureSiteUser(root: string, siteId: string, home: string): Promise<SiteUser> {
  const name = siteUserName(root, siteId);
  const found = passwd().find((x) => x.name === name);
  if (found && found.comment !== mark(root, siteId)) throw new Error(`the system account ${name} exists and is not site ${siteId}'s: refusing to give it the site's files`);
  if (!found) {
    const r = await run(findBinary('useradd')!, ['--no-create-home', '--home-dir', home, '--shell', '/usr/sbin/nologin', '--user-group', '--comment', mark(root, siteId), name]);
    if (r.code !== 0) throw new Error(`useradd ${name}: ${r.stderr.trim()}`);
  } else if (found.home !== home) {
    // the site's domain (and so its folder) changed
    const r = await run(findBinary('usermod')!, ['--home', home, name]);
    if (r.code !== 0) throw new Error(`usermod ${name}: ${r.stderr.trim()}`);
  }
  return siteOwner(root, siteId)!;
}

/** Kills every process of a uid (a site's leftovers: a worker, a cron job), so nothing of it runs on after its user is gone. */
function killProcessesOf(uid: number): void {
  for (const pid of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const m = /^Uid:\s+(\d+)\s+(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
      if (m && (Number(m[1]) === uid || Number(m[2]) === uid)) process.kill(Number(pid), 'SIGKILL');
    } catch {
      // ended meanwhile
    }
  }
}

/** Stops the user's processes and removes the user and its group; a user that is not the site's is left alone. */
export async function removeSiteUser(root: string, siteId: string): Promise<boolean> {
  const u = siteOwner(root, siteId);
  if (!u) return false;
  killProcessesOf(u.uid);
  const r = await run(findBinary('userdel')!, [u.name]);
  // exit 6: already gone (another process removed it between the look-up and here)
  if (r.code === 6) return false;
  if (r.code !== 0) throw new Error(`userdel ${u.name}: ${r.stderr.trim()}`);
  return true;
}

/** The site users this machine holds, by the mark in their comment field. */
export function listSiteUsers(): Array<{ name: string; siteId: string; root: string; home: string }> {
  return passwd().flatMap((u) => {
    const m = MARK.exec(u.comment);
    return m && u.name === siteUserName(m[2], m[1]) ? [{ name: u.name, siteId: m[1], root: m[2], home: u.home }] : [];
  });
}

/** Removes the site users of `root` that `keep` does not keep (by site id and home folder), or, without a root, those whose node root is gone. */
export async function pruneSiteUsers(o: { root: string; keep: (siteId: string, home: string) => boolean } | { root?: undefined }): Promise<string[]> {
  const gone = listSiteUsers().filter((u) => (o.root ? u.root === o.root && !o.keep(u.siteId, u.home) : !fs.existsSync(u.root)));
  for (const u of gone) await removeSiteUser(u.root, u.siteId);
  return gone.map((u) => u.name);
}

/**
 * Gives a tree to a user, children before their folder (lchown: links themselves, never what they
 * point at). Only for trees the user cannot change yet (root's until this call), so nothing in them
 * can be swapped while it runs.
 */
export function chownTree(dir: string, uid: number, gid: number): void {
  const entries = fs.readdirSync(dir, { recursive: true, withFileTypes: true }).map((e) => path.join(e.parentPath, e.name));
  entries.sort((a, b) => b.split('/').length - a.split('/').length);
  for (const e of entries) fs.lchownSync(e, uid, gid);
  fs.lchownSync(dir, uid, gid);
}
