import fs from 'node:fs';
import { nodePaths, renderPhpFpmMain } from '../domain/panel/node-config';
import type { Logger } from '../platform/logger';
import { stopOrphan } from '../platform/orphans';
import { writeFileAtomic } from './files';
import { canConnect, run, startService, waitFor, type Service } from './processes';

// One PHP-FPM master per PHP version (`php-fpm<version> -R -y <root>/etc/php/<version>/php-fpm.conf`),
// pools in <root>/etc/php/<version>/pool.d/. Tested with -t before every reload: a master that
// re-reads a bad config on SIGUSR2 exits, taking every site of that version down.

export interface PhpFpm {
  version: string;
  test(): Promise<string | null>;
  /** re-reads the pools; resolves once the new master is up and every socket in `sockets` accepts */
  reload(sockets: string[]): Promise<void>;
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

export async function startPhpFpm(o: { bin: string; root: string; version: string; user: string | null; logger: Logger }): Promise<PhpFpm> {
  const p = nodePaths(o.root);
  const conf = p.phpFpmConf(o.version);
  const log = `${o.root}/log/php${o.version}-fpm.log`;
  fs.mkdirSync(`${o.root}/etc/php/${o.version}/pool.d`, { recursive: true });
  fs.mkdirSync(`${o.root}/run/php`, { recursive: true });
  fs.mkdirSync(`${o.root}/log`, { recursive: true });
  writeFileAtomic(conf, renderPhpFpmMain({ root: o.root, version: o.version, user: o.user }));
  const args = [...(o.user ? ['-R'] : []), '-F', '-y', conf];
  const test = async () => {
    const r = await run(o.bin, [...args, '-t']);
    return r.code === 0 ? null : (r.stderr + r.stdout).trim().split('\n').find((l) => /ERROR|error/.test(l)) ?? `php-fpm -t exited ${r.code}`;
  };
  const logSize = () => {
    try {
      return fs.statSync(log).size;
    } catch {
      return 0;
    }
  };
  // the master writes this line once it (re)started with the pools of the config
  const readySince = (offset: number) => {
    try {
      const fd = fs.openSync(log, 'r');
      const buf = Buffer.alloc(Math.max(0, logSize() - offset));
      fs.readSync(fd, buf, 0, buf.length, offset);
      fs.closeSync(fd);
      return buf.toString().includes('ready to handle connections');
    } catch {
      return false;
    }
  };
  const launch = async (): Promise<Service> => {
    const bad = await test();
    if (bad) throw new Error(`php-fpm ${o.version} config fails its test: ${bad}`);
    const svc = startService(`php-fpm${o.version}`, o.bin, args, o.logger);
    await waitFor(`php-fpm ${o.version}`, () => canConnect({ path: p.idleSocket(o.version) }), 15_000, svc.exited).catch(async (err) => {
      await svc.stop('SIGTERM', 2000);
      throw err;
    });
    return svc;
  };
  await stopOrphan(p.phpFpmPid(o.version), /php-fpm/, `php-fpm ${o.version}`, o.logger, 'SIGQUIT');
  let svc = await launch();
  o.logger.info({ pid: svc.pid, version: o.version }, 'php-fpm started');
  return {
    version: o.version,
    test,
    async reload(sockets) {
      if (svc.exited()) {
        o.logger.warn({ version: o.version, why: svc.exited() }, 'php-fpm had stopped; starting it again');
        svc = await launch();
      } else {
        const offset = logSize();
        process.kill(svc.pid, 'SIGUSR2');
        await waitFor(`php-fpm ${o.version} reload`, () => readySince(offset), 10_000, svc.exited);
      }
      for (const s of sockets) await waitFor(`php-fpm ${o.version} pool ${s}`, () => canConnect({ path: s }), 10_000, svc.exited);
    },
    stop: () => svc.stop('SIGQUIT'),
  };
}
