import type { Config } from './config';

export const EMBEDDED_DATABASE = 'gateway';

/** DATABASE_URL when set, else the embedded PostgreSQL that `npm start` runs. */
export function databaseUrl(c: Config): string {
  return c.DATABASE_URL ?? `postgres://postgres:postgres@127.0.0.1:${c.PG_PORT}/${EMBEDDED_DATABASE}`;
}
