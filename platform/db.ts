import fs from 'node:fs';
import path from 'node:path';
import knex, { Knex } from 'knex';
import pg from 'pg';
import { COMPILED } from './root';
import { SINGLETON_LOCKS } from './leader';
import { describeTlsError } from './tls-errors';

const MIGRATIONS_LOCK = SINGLETON_LOCKS.migrations;

// numeric columns come back as exact decimal strings; bigint counters as numbers.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));

export type Db = Knex;

const MIGRATIONS = path.resolve(__dirname, '../migrations');

/**
 * The migrations, from the sources or compiled (dist/migrations/*.js), always named by their .ts
 * file: the name knex_migrations records, so a database migrated by either finds its history.
 */
const migrationSource: Knex.MigrationSource<string> = {
  getMigrations: async () => (await fs.promises.readdir(MIGRATIONS)).filter((f) => f.endsWith(COMPILED ? '.js' : '.ts')).sort(),
  getMigrationName: (file) => file.replace(/\.js$/, '.ts'),
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- a CommonJS module, sources (tsx) or compiled alike
  getMigration: async (file) => require(path.join(MIGRATIONS, file)),
};

export function createDb(url: string, poolMax = 20, poolMin = 1): Db {
  return knex({
    client: 'pg',
    connection: url,
    pool: { min: poolMin, max: poolMax },
    migrations: { migrationSource },
  });
}

/** A statement run prepared: parsed once per connection under `name`; `text` numbers its parameters $1, $2, … */
export interface Prepared {
  name: string;
  text: string;
}

/** A knex-style statement (? placeholders, none inside literals or operators) as a prepared one. */
export function prepared(name: string, sql: string): Prepared {
  let n = 0;
  return { name, text: sql.replace(/\?/g, () => `$${++n}`) };
}

/**
 * Runs a prepared statement straight on a pooled pg connection: the hot path's statements skip
 * knex's query building and runner (a profile showed them) and PostgreSQL's parse.
 */
export async function runPrepared(db: Db, statement: Prepared, values: unknown[]): Promise<{ rows: Array<Record<string, unknown>> }> {
  const connection: pg.Client = await db.client.acquireConnection();
  try {
    return await connection.query({ name: statement.name, text: statement.text, values });
  } finally {
    await db.client.releaseConnection(connection);
  }
}

/** Resolves when the database answers a trivial query (health checks). */
export async function pingDatabase(db: Db): Promise<void> {
  await db.raw('SELECT 1');
}

/**
 * At start: one query, and a failure to connect said with the server it was meant for and the
 * TLS in force (pg's own errors name neither: "self-signed certificate in certificate chain").
 */
export async function checkDatabase(db: Db): Promise<void> {
  try {
    await db.raw('SELECT 1');
  } catch (err) {
    const c = (db.client as { connectionSettings?: { host?: string; port?: number | string; database?: string; ssl?: unknown } }).connectionSettings ?? {};
    const ssl = c.ssl ?? pg.defaults.ssl;
    const mode = !ssl ? 'no TLS' : typeof ssl === 'object' && (ssl as { rejectUnauthorized?: boolean }).rejectUnauthorized === false ? 'TLS, unverified' : 'TLS, verified';
    const why = describeTlsError(err as NodeJS.ErrnoException, 'DATABASE_SSL_CA', 'DATABASE_URL and DATABASE_SSLMODE verify-ca');
    throw new Error(`PostgreSQL at ${c.host ?? 'localhost'}:${c.port ?? 5432}/${c.database ?? ''} (${mode}): ${why}`, { cause: err });
  }
}

/** How to open connections of our own (LISTEN, advisory locks) to the database of `db`. */
export function connectionSettings(db: Db): string | pg.ClientConfig {
  // knex keeps the parsed connection string (its password as a hidden property).
  const c = (db.client as { config: { connection?: unknown } }).config.connection;
  if (typeof c === 'string') return c;
  const p = c as { user?: string; password?: string; host?: string; port?: string | number; database?: string; ssl?: pg.ClientConfig['ssl'] };
  return { user: p.user, password: p.password, host: p.host, port: p.port === undefined ? undefined : Number(p.port), database: p.database, ssl: p.ssl };
}

/**
 * Brings the schema up to date. Roles starting together on several hosts migrate one after another:
 * each waits for the migrations singleton's advisory lock (platform/leader.ts) on a connection of
 * its own, so none meets knex's "migration table is already locked" and the later ones find nothing to do.
 */
export async function migrate(db: Db): Promise<void> {
  await checkDatabase(db);
  const settings = connectionSettings(db);
  const lock = new pg.Client(typeof settings === 'string' ? { connectionString: settings } : settings);
  await lock.connect();
  try {
    await lock.query('SELECT pg_advisory_lock($1, $2)', [...MIGRATIONS_LOCK]);
    // A process of the previous release (re)starting during a rolling upgrade finds the next release's
    // migrations applied: migrations only expand (docs/deploy.md, Upgrades), so it runs on that schema
    // instead of refusing it as knex would ("the migration directory is corrupt").
    const known = new Set((await migrationSource.getMigrations([])).map((f) => migrationSource.getMigrationName(f)));
    const ahead = (await db.schema.hasTable('knex_migrations')) && (await db('knex_migrations').pluck('name')).some((n: string) => !known.has(n));
    await db.migrate.latest({ disableMigrationsListValidation: ahead });
  } finally {
    await lock.end(); // ending the session frees the lock
  }
}
