import fs from 'node:fs';
import path from 'node:path';
import type { SiteSpec } from '../domain/panel/node-ops';
import { renderSshdConfig, sftpOverQuota, sftpPaths } from '../domain/panel/sftp';
import type { Logger } from '../platform/logger';
import { stopOrphan } from '../platform/orphans';
import { writeFileAtomic } from './files';
import { canConnect, findBinary, run, startService, waitFor, type Service } from './processes';
import { siteOwner, siteUserName } from './site-users';

// The node's own sshd for SFTP (issue 34 §2, docs/panel/sites.md "SFTP"): `sshd -D -e -f <root>/etc/ssh/sshd_config`,
// host keys generated once under the root, restarted if it dies. Each site's keys are a root-owned
// file <root>/sftp/keys/<site user> (empty while the site is suspended). sshd's VERBOSE log names
// the key and the client port of every session: the node moves each session into the site's
// control group when it starts, and ends the sessions of a key that is removed. A site measured at or
// over its quota logs in read-only (a Match block, sshd reloaded by SIGHUP): its open sessions are
// ended then, so the next login is read-only; writes come back once a measurement is under the quota.

export interface Sftp {
  host: string;
  port: number;
  /** writes the site's keys (none while suspended) and ends the sessions of keys it no longer has */
  apply(site: SiteSpec): Promise<void>;
  /** the site is gone: its keys file and every session of its user */
  remove(siteId: string): void;
  /** each site's login on this node, by site id */
  users(): Record<string, string>;
  /** the node measured its sites' disk use: sites at or over their quota become read-only, those under it writable */
  measured(usage: Array<{ siteId: string; diskMb: number }>): Promise<void>;
  /** the sites whose SFTP is read-only now (over quota) */
  readOnly(): string[];
  stop(): Promise<void>;
}

interface Session {
  user: string;
  fingerprint: string;
}

/**
 * Why this node cannot offer SFTP; null: it can. sshd chroots only into a path whose every
 * folder is root's and not writable by group or others (so /tmp, 1777, cannot be above a site).
 */
export function sftpUnavailable(root: string, siteUsers: boolean): string | null {
  if (!siteUsers) return 'sites have no system users of their own here (the node is not root, or useradd or www-data is missing)';
  if (!findBinary('sshd') || !findBinary('ssh-keygen')) return 'OpenSSH (sshd, ssh-keygen) is not installed';
  for (let d = `${root}/sites`; ; d = path.dirname(d)) {
    if (!fs.existsSync(d)) continue; // made root's 0755 by the node
    const st = fs.statSync(d);
    if (st.uid !== 0 || (st.mode & 0o022) !== 0) return `sshd cannot chroot below ${d} (it must be root's and not writable by group or others): choose a node root under such folders`;
    if (d === path.dirname(d)) return null;
  }
}

/** Inodes of the TCP connections from client `port` to local `serverPort` (/proc/net/tcp and tcp6). */
function socketInodes(serverPort: number, port: number): Set<string> {
  const out = new Set<string>();
  for (const f of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of (fs.existsSync(f) ? fs.readFileSync(f, 'utf8') : '').split('\n').slice(1)) {
      const c = line.trim().split(/\s+/);
      if (c.length < 10) continue;
      if (parseInt(c[1].split(':')[1], 16) === serverPort && parseInt(c[2].split(':')[1], 16) === port) out.add(c[9]);
    }
  }
  return out;
}

/** Every process with its parent and real uid (from /proc). */
function processTable(): Array<{ pid: number; ppid: number; uid: number }> {
  const out: Array<{ pid: number; ppid: number; uid: number }> = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const status = fs.readFileSync(`/proc/${name}/status`, 'utf8');
      out.push({ pid: Number(name), ppid: Number(/^PPid:\s+(\d+)/m.exec(status)![1]), uid: Number(/^Uid:\s+(\d+)/m.exec(status)![1]) });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** The processes below `pid` (sshd's per-connection monitors and their user children), with their uids. */
function descendants(pid: number): Array<{ pid: number; uid: number }> {
  const table = processTable();
  const parent = new Map(table.map((t) => [t.pid, t.ppid]));
  const below = (p: number): boolean => {
    for (let x = parent.get(p); x !== undefined && x > 0; x = parent.get(x)) if (x === pid) return true;
    return false;
  };
  return table.filter((t) => below(t.pid)).map((t) => ({ pid: t.pid, uid: t.uid }));
}

/** Whether process `pid` holds one of the sockets `inodes`. */
function holdsSocket(pid: number, inodes: Set<string>): boolean {
  try {
    return fs.readdirSync(`/proc/${pid}/fd`).some((fd) => {
      const m = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`));
      return !!m && inodes.has(m[1]);
    });
  } catch {
    return false;
  }
}

const commandOf = (pid: number): string => {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return '';
  }
};

const kill = (pid: number) => {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // ended meanwhile
  }
};

/** Starts the node's sshd on `host`:`port`; `procsFiles(domain)` puts a process in the site's group. */
export async function startSftp(o: { root: string; host: string; port: number; sites: () => SiteSpec[]; procsFiles: (domain: string) => string[]; logger: Logger }): Promise<Sftp> {
  const p = sftpPaths(o.root);
  const sshd = findBinary('sshd')!;
  const keygen = findBinary('ssh-keygen')!;
  // sshd's compiled-in privilege separation folder (Debian's service creates it at boot)
  fs.mkdirSync('/run/sshd', { recursive: true, mode: 0o755 });
  fs.mkdirSync(p.keysDir, { recursive: true, mode: 0o755 });
  fs.chmodSync(path.dirname(p.keysDir), 0o755);
  fs.chmodSync(p.keysDir, 0o755);
  for (const [i, key] of p.hostKeys.entries()) {
    if (fs.existsSync(key)) continue;
    fs.mkdirSync(path.dirname(key), { recursive: true });
    const r = await run(keygen, ['-q', '-t', i === 0 ? 'ed25519' : 'rsa', ...(i === 0 ? [] : ['-b', '3072']), '-N', '', '-C', `panel-node ${o.root}`, '-f', key]);
    if (r.code !== 0) throw new Error(`ssh-keygen of ${key}: ${r.stderr.trim()}`);
  }
  writeFileAtomic(p.config, renderSshdConfig({ root: o.root, host: o.host, port: o.port }));
  const test = await run(sshd, ['-t', '-f', p.config]);
  if (test.code !== 0) throw new Error(`sshd config ${p.config} fails its test: ${test.stderr.trim()}`);
  await stopOrphan(p.pid, /sshd/, 'sshd', o.logger);
  // sessions an earlier sshd of this node left (its listener was killed): no key change could reach them
  const uids = new Set(o.sites().flatMap((s) => siteOwner(o.root, s.id)?.uid ?? []));
  for (const t of processTable()) if (uids.has(t.uid) && commandOf(t.pid).startsWith('sshd:')) kill(t.pid);

  const sessions = new Map<number, Session>();
  const userSite = new Map<string, SiteSpec>();
  /** The processes of the connection from client `port`: those holding its socket and what they forked (the session's internal-sftp). */
  const sessionPids = (port: number) => {
    const inodes = socketInodes(o.port, port);
    if (!inodes.size) return [];
    const below = descendants(svc.pid);
    const holders = below.filter((d) => holdsSocket(d.pid, inodes));
    return [...holders, ...holders.flatMap((h) => descendants(h.pid))];
  };
  // a session enters its site's group as it starts (its user child runs the site user's internal-sftp)
  const intoGroup = (user: string, port: number) => {
    const s = userSite.get(user);
    if (!s) return;
    for (const d of sessionPids(port).filter((x) => x.uid !== 0)) {
      for (const f of o.procsFiles(s.domain)) {
        try {
          fs.writeFileSync(f, String(d.pid));
        } catch (err) {
          o.logger.warn({ err: (err as Error).message, user, pid: d.pid }, 'an SFTP session could not enter its site group');
        }
      }
    }
  };
  let pending = '';
  /** how often sshd said it listens (once per start and per SIGHUP re-execution) */
  let listened = 0;
  const onOutput = (text: string) => {
    fs.appendFileSync(p.log, text, { mode: 0o600 });
    pending += text;
    const lines = pending.split('\n');
    pending = lines.pop()!;
    for (const line of lines) {
      if (line.startsWith('Server listening on ')) listened++;
      let m = /^Accepted publickey for (\S+) from \S+ port (\d+) ssh2: \S+ (SHA256:\S+)/.exec(line);
      if (m) sessions.set(Number(m[2]), { user: m[1], fingerprint: m[3] });
      m = /^Starting session: .* for (\S+) from \S+ port (\d+)/.exec(line);
      if (m) intoGroup(m[1], Number(m[2]));
      m = /^(?:Disconnected from user \S+|Connection closed by user \S+|Close session: user \S+ from) \S+ port (\d+)/.exec(line);
      if (m) sessions.delete(Number(m[1]));
    }
  };

  let stopping = false;
  let svc: Service;
  const probeHost = o.host === '0.0.0.0' ? '127.0.0.1' : o.host === '::' ? '::1' : o.host;
  const launch = async () => {
    svc = startService('sshd', sshd, ['-D', '-e', '-f', p.config], o.logger, onOutput);
    await waitFor('sshd', () => canConnect({ host: probeHost, port: o.port }), 15_000, svc.exited);
  };
  await launch();
  o.logger.info({ pid: svc!.pid, port: o.port }, 'sshd started (SFTP)');
  // a dead sshd is started again (its sessions went with it)
  const watch = setInterval(() => {
    if (stopping || !svc.exited()) return;
    o.logger.error({ why: svc.exited() }, 'sshd ended; starting it again');
    sessions.clear();
    launch().catch((err) => o.logger.error({ err: (err as Error).message }, 'sshd did not start again'));
  }, 2000);
  watch.unref();

  /** Ends the user's sessions whose key `keep` does not keep; with `uid` and no key kept, every process of that uid below sshd too. */
  const endSessions = (user: string, keep: (fingerprint: string) => boolean, uid: number | null = null) => {
    for (const [port, s] of sessions) {
      if (s.user !== user || keep(s.fingerprint)) continue;
      for (const d of sessionPids(port)) kill(d.pid);
      sessions.delete(port);
    }
    if (uid !== null) for (const d of descendants(svc.pid).filter((x) => x.uid === uid)) kill(d.pid);
  };
  for (const s of o.sites()) userSite.set(siteUserName(o.root, s.id), s);

  // ---- read-only over quota ----
  const diskOf = new Map<string, number>();
  let readOnly = new Set<string>();
  let settling = Promise.resolve();
  /** Renders the read-only users from the last measurement and each site's quota; reloads sshd when they change. */
  const settle = async () => {
    const want = new Set([...userSite].filter(([, s]) => sftpOverQuota(diskOf.get(s.id), s.quotaMb)).map(([user]) => user));
    if (want.size === readOnly.size && [...want].every((u) => readOnly.has(u))) return;
    const before = fs.readFileSync(p.config, 'utf8');
    writeFileAtomic(p.config, renderSshdConfig({ root: o.root, host: o.host, port: o.port, readOnlyUsers: [...want] }));
    const test = await run(sshd, ['-t', '-f', p.config]);
    if (test.code !== 0) {
      writeFileAtomic(p.config, before); // a restarted sshd must still find a config it takes
      throw new Error(`sshd config ${p.config} fails its test: ${test.stderr.trim()}`);
    }
    // sshd re-executes itself on SIGHUP (same pid) with the new config: done when it says it listens again
    const seen = listened;
    process.kill(svc.pid, 'SIGHUP');
    await waitFor('sshd reload', async () => listened > seen && (await canConnect({ host: probeHost, port: o.port })), 15_000, svc.exited);
    const newly = [...want].filter((u) => !readOnly.has(u));
    readOnly = want;
    o.logger.info({ readOnly: [...want], newly }, 'SFTP read-only logins changed (soft quota)');
    // a session open before keeps its write access: it ends, so the next login is read-only
    for (const user of newly) endSessions(user, () => false, siteOwner(o.root, userSite.get(user)!.id)?.uid ?? null);
  };
  /** one settle at a time, in order; a failure is logged and the next one tries again */
  const settleInTurn = () =>
    (settling = settling.then(settle).catch((err) => o.logger.error({ err: (err as Error).message }, 'SFTP read-only logins could not be changed')));

  return {
    host: o.host,
    port: o.port,
    async apply(site) {
      const owner = siteOwner(o.root, site.id);
      if (!owner) return;
      userSite.set(owner.name, site);
      const keys = site.suspended ? [] : (site.sftpKeys ?? []);
      writeFileAtomic(p.keysOf(owner.name), keys.map((k) => `${k}\n`).join(''));
      // useradd leaves the password locked ('!'), which sshd (without PAM) takes as a locked account: '*' has no password and is not locked
      const shadow = (fs.readFileSync('/etc/shadow', 'utf8').split('\n').find((l) => l.startsWith(`${owner.name}:`)) ?? '').split(':')[1] ?? '';
      if (shadow.startsWith('!')) {
        const r = await run(findBinary('usermod')!, ['-p', '*', owner.name]);
        if (r.code !== 0) throw new Error(`usermod -p of ${owner.name}: ${r.stderr.trim()}`);
      }
      let kept = new Set<string>();
      if (keys.length) {
        const r = await run(keygen, ['-l', '-E', 'sha256', '-f', p.keysOf(owner.name)]);
        kept = new Set(r.stdout.split('\n').flatMap((l) => /(SHA256:\S+)/.exec(l)?.[1] ?? []));
      }
      endSessions(owner.name, (fp) => kept.has(fp), keys.length ? null : owner.uid);
      await settleInTurn(); // the quota may have changed
    },
    remove(siteId) {
      const user = siteUserName(o.root, siteId);
      userSite.delete(user);
      fs.rmSync(p.keysOf(user), { force: true });
      endSessions(user, () => false);
      diskOf.delete(siteId);
      void settleInTurn();
    },
    users: () => Object.fromEntries(o.sites().map((s) => [s.id, siteUserName(o.root, s.id)])),
    async measured(usage) {
      for (const u of usage) diskOf.set(u.siteId, u.diskMb);
      await settleInTurn();
    },
    readOnly: () => [...readOnly].flatMap((user) => userSite.get(user)?.id ?? []),
    async stop() {
      stopping = true;
      clearInterval(watch);
      await settling;
      await svc.stop('SIGTERM', 5000);
    },
  };
}
