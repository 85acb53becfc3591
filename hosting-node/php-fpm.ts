import fs from 'node:fs';
import { nodePaths, phpSocketPath, renderSiteFpmMain } from '../domain/panel/node-config';
import type { Logger } from '../platform/logger';
import { stopOrphan } from '../platform/orphans';
import { inGroup } from './cgroups';
import { writeFileAtomic } from './files';
import { canConnect, run, startService, waitFor, type Service } from './processes';

// One PHP-FPM master per site (PANEL.md section 2): `php-fpm<version> -R -F -y <root>/etc/php/<version>/masters/<domain>.conf`,
// which includes only the site's pool (pool.d/<domain>.conf, the managed file). The master is
// started inside the site's control group, so every worker it forks is bound by the site's limits,
// and a bad pool or a reload of one site never touches another. Each pool is tested with -t before
// its master reloads: a master that re-reads a bad config on SIGUSR2 exits.

export interface SitePhp {
  /** PHP versions whose FPM binary is installed, newest first */
  versions: string[];
  has(version: string): boolean;
  /** tests each written pool among `changed` files with its master's config: the problems found */
  test(changed: string[]): Promise<string[]>;
  /** for each pool among `changed`: (re)starts its master, or stops it when the pool is gone; resolves once each socket accepts */
  sync(changed: string[]): Promise<void>;
  /** the pid of each running master, by domain */
  masters(): Map<string, number>;
  stop(): Promise<void>;
}

/** PHP versions whose FPM binary is installed (`php-fpm8.2` → 8.2), newest first. */
export function installedPhpVersions(): Array<{ version: string; bin: string }> {
  const found = new Map<string, string>();
  for (const dir of ['/usr/sbin', '/usr/local/sbin', ...(process.env.PATH ?? '').split(':')]) {
    let names: string[];
    try {
      names = fs.readdirSync(dir);
    } catch {
      continue;
    }
    for (const n of names) {
      const m = /^php-fpm(\d+\.\d+)$/.exec(n);
      if (m && !found.has(m[1])) found.set(m[1], `${dir}/${n}`);
    }
  }
  return [...found].map(([version, bin]) => ({ version, bin })).sort((a, b) => b.version.localeCompare(a.version, 'en', { numeric: true }));
}

interface Master {
  version: string;
  svc: Service;
}

/**
 * The sites' PHP-FPM masters of a node. `procsFiles(domain)` names the files that put a process in
 * the site's control group (none: the node enforces no limits); `asRoot` runs masters with -R, so
 * they can start workers as the site's user.
 */
export function createSitePhp(o: { root: string; versions: Array<{ version: string; bin: string }>; asRoot: boolean; procsFiles: (domain: string) => string[]; logger: Logger }): SitePhp {
  const p = nodePaths(o.root);
  const bins = new Map(o.versions.map((v) => [v.version, v.bin]));
  const running = new Map<string, Master>();
  fs.mkdirSync(`${o.root}/run/php`, { recursive: true });
  fs.mkdirSync(p.phpFpmLogs, { recursive: true });
  const POOL = new RegExp(`^${o.root.replace(/[.]/g, '\\.')}/etc/php/([^/]+)/pool\\.d/([^/]+)\\.conf$`);
  const pools = (changed: string[]) => changed.flatMap((f) => (POOL.exec(f) && bins.has(POOL.exec(f)![1]) ? [{ version: POOL.exec(f)![1], domain: POOL.exec(f)![2], pool: f }] : []));
  const args = (version: string, domain: string) => [...(o.asRoot ? ['-R'] : []), '-F', '-y', p.siteFpmConf(version, domain)];
  const logSize = (f: string) => (fs.existsSync(f) ? fs.statSync(f).size : 0);
  // the master writes this line once it (re)started with its pool
  const readySince = (f: string, offset: number) => {
    try {
      const fd = fs.openSync(f, 'r');
      const buf = Buffer.alloc(Math.max(0, logSize(f) - offset));
      fs.readSync(fd, buf, 0, buf.length, offset);
      fs.closeSync(fd);
      return buf.toString().includes('ready to handle connections');
    } catch {
      return false;
    }
  };
  const socketUp = (domain: string, svc: Service) => waitFor(`php-fpm of ${domain}`, () => canConnect({ path: phpSocketPath(o.root, { domain }) }), 15_000, svc.exited);

  const launch = async (version: string, domain: string): Promise<void> => {
    await stopOrphan(p.siteFpmPid(domain), /php-fpm/, `php-fpm of ${domain}`, o.logger, 'SIGQUIT');
    const argv = inGroup(o.procsFiles(domain), [bins.get(version)!, ...args(version, domain)]);
    const svc = startService(`php-fpm ${domain}`, argv[0], argv.slice(1), o.logger);
    running.set(domain, { version, svc });
    await socketUp(domain, svc).catch(async (err) => {
      await svc.stop('SIGTERM', 2000);
      running.delete(domain);
      throw err;
    });
  };
  const stopMaster = async (domain: string) => {
    const m = running.get(domain);
    running.delete(domain);
    await m?.svc.stop('SIGQUIT');
  };

  const syncOne = async (x: { version: string; domain: string; pool: string }): Promise<void> => {
    const m = running.get(x.domain);
    if (!fs.existsSync(x.pool)) {
      // a site moved to another version has its new pool in `changed` too: stop only this version's master
      if (m?.version === x.version) await stopMaster(x.domain);
      fs.rmSync(p.siteFpmConf(x.version, x.domain), { force: true });
      return;
    }
    if (m && !m.svc.exited() && m.version === x.version) {
      const log = p.siteFpmLog(x.domain);
      const offset = logSize(log);
      process.kill(m.svc.pid, 'SIGUSR2');
      await waitFor(`php-fpm of ${x.domain} reload`, () => readySince(log, offset), 10_000, m.svc.exited);
      await socketUp(x.domain, m.svc);
    } else {
      if (m) await stopMaster(x.domain);
      writeFileAtomic(p.siteFpmConf(x.version, x.domain), renderSiteFpmMain({ root: o.root, version: x.version, domain: x.domain }));
      await launch(x.version, x.domain);
    }
  };

  return {
    versions: [...bins.keys()],
    has: (v) => bins.has(v),
    async test(changed) {
      const problems: string[] = [];
      for (const x of pools(changed)) {
        if (!fs.existsSync(x.pool)) continue;
        writeFileAtomic(p.siteFpmConf(x.version, x.domain), renderSiteFpmMain({ root: o.root, version: x.version, domain: x.domain }));
        const r = await run(bins.get(x.version)!, [...args(x.version, x.domain), '-t']);
        if (r.code !== 0) problems.push((r.stderr + r.stdout).trim().split('\n').find((l) => /ERROR|error/.test(l)) ?? `php-fpm -t of ${x.domain} exited ${r.code}`);
      }
      return problems;
    },
    async sync(changed) {
      // a few sites at a time (a node starting with many sites); one site's pools in order, the removed one first
      const bySite = new Map<string, Array<{ version: string; domain: string; pool: string }>>();
      for (const x of pools(changed)) bySite.set(x.domain, [...(bySite.get(x.domain) ?? []), x].sort((a, b) => Number(fs.existsSync(a.pool)) - Number(fs.existsSync(b.pool))));
      const sites = [...bySite.values()];
      for (let i = 0; i < sites.length; i += 8) {
        await Promise.all(sites.slice(i, i + 8).map(async (list) => {
          for (const x of list) await syncOne(x);
        }));
      }
    },
    masters: () => new Map([...running].filter(([, m]) => !m.svc.exited()).map(([d, m]) => [d, m.svc.pid])),
    async stop() {
      await Promise.allSettled([...running.keys()].map((d) => stopMaster(d)));
    },
  };
}
