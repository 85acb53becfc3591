import fs from 'node:fs';
import { nodePaths, renderFastcgiParams, renderNginxMain, renderSuspendedPage, SUSPENDED_FILE } from '../domain/panel/node-config';
import type { Logger } from '../platform/logger';
import { stopOrphan } from '../platform/orphans';
import { canConnect, childrenOf, run, startService, waitFor, type Service } from './processes';
import { writeFileAtomic } from './files';

// The node's own nginx: `nginx -p <root> -c <root>/etc/nginx.conf`, pid, logs and temp paths in the
// root, never /etc/nginx's instance. Every reload is preceded by `nginx -t`; a config that fails
// the test is never loaded, so the running workers keep serving what they served.

export interface Nginx {
  /** null when the config on disk passes `nginx -t`, else nginx's message */
  test(): Promise<string | null>;
  /** loads the config on disk (after a passed test); resolves once new workers serve it */
  reload(): Promise<void>;
  stop(): Promise<void>;
}

export async function startNginx(o: { bin: string; root: string; listen: string; tlsListen?: string | null; probe: { host: string; port: number }; user: string | null; logger: Logger }): Promise<Nginx> {
  const p = nodePaths(o.root);
  for (const d of [p.nginxSites, p.pages, p.nginxLogs, p.nginxTemp, `${o.root}/run`]) fs.mkdirSync(d, { recursive: true });
  writeFileAtomic(p.nginxConf, renderNginxMain({ root: o.root, listen: o.listen, user: o.user, tlsListen: o.tlsListen }));
  writeFileAtomic(p.fastcgiParams, renderFastcgiParams());
  writeFileAtomic(`${p.pages}/${SUSPENDED_FILE}`, renderSuspendedPage());
  // -e: the error log before the config is read (else nginx opens its compiled-in /var/log/nginx one)
  const base = ['-p', `${o.root}/`, '-e', `${p.nginxLogs}/error.log`, '-c', p.nginxConf];
  const test = async () => {
    const r = await run(o.bin, [...base, '-t', '-q']);
    return r.code === 0 ? null : r.stderr.trim().replace(/^nginx: /gm, '').split('\n')[0] || `nginx -t exited ${r.code}`;
  };
  await stopOrphan(p.nginxPid, /nginx/, 'nginx', o.logger, 'SIGQUIT');
  const bad = await test();
  if (bad) throw new Error(`nginx config under ${o.root} fails its test: ${bad}`);
  const svc: Service = startService('nginx', o.bin, base, o.logger);
  const workers = (states: 'active' | 'all' = 'active') =>
    childrenOf(svc.pid).filter((c) => c.cmdline.includes('worker process') && (states === 'all' || !c.cmdline.includes('shutting down')));
  try {
    await waitFor('nginx', async () => workers().length > 0 && (await canConnect(o.probe)), 15_000, svc.exited);
  } catch (err) {
    await svc.stop('SIGTERM', 2000);
    throw err;
  }
  o.logger.info({ pid: svc.pid, listen: o.listen }, 'nginx started');
  return {
    test,
    async reload() {
      const before = new Set(workers().map((w) => w.pid));
      process.kill(svc.pid, 'SIGHUP');
      // reloaded: a new worker runs and no worker of the old config still accepts connections
      await waitFor(
        'nginx reload',
        () => {
          const now = workers();
          return now.some((w) => !before.has(w.pid)) && now.every((w) => !before.has(w.pid));
        },
        10_000,
        svc.exited,
      ).catch((err: Error) => {
        throw new Error(`${err.message} (see ${p.nginxLogs}/error.log)`);
      });
    },
    stop: () => svc.stop('SIGQUIT'),
  };
}
