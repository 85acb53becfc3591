import path from 'node:path';
import knex, { Knex } from 'knex';
import pg from 'pg';

// numeric columns come back as exact decimal strings; bigint counters as numbers.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));

export type Db = Knex;

export function createDb(url: string, poolMax = 20, poolMin = 1): Db {
  return knex({
    client: 'pg',
    connection: url,
    pool: { min: poolMin, max: poolMax },
    migrations: { directory: path.resolve(__dirname, '../migrations'), loadExtensions: ['.ts'] },
  });
}

/** Resolves when the database answers a trivial query (health checks). */
export async function pingDatabase(db: Db): Promise<void> {
  await db.raw('SELECT 1');
}

export async function migrate(db: Db): Promise<void> {
  await db.migrate.latest();
}
