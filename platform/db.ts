import fs from 'node:fs';
import path from 'node:path';
import knex, { Knex } from 'knex';
import pg from 'pg';
import { COMPILED } from './root';
import { describeTlsError } from './tls-errors';

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

export async function migrate(db: Db): Promise<void> {
  await checkDatabase(db);
  await db.migrate.latest();
}
