import fs from 'node:fs';
import tls from 'node:tls';
import pg from 'pg';
import type { Config } from './config';

// Where the database is and how to reach it: DATABASE_URL (else the embedded PostgreSQL) and
// DATABASE_SSLMODE / DATABASE_SSL_CA. Every pg client of a process (knex's pool, LISTEN, the
// relay, the controller's lock) connects to that one database, so its TLS is set process-wide.

export const EMBEDDED_DATABASE = 'gateway';

/**
 * DATABASE_URL when set, else the embedded PostgreSQL that `npm start` runs. With DATABASE_SSLMODE
 * it also makes every pg connection of this process use that TLS (pg.defaults.ssl, which pg takes
 * when the URL has no ssl parameter of its own: loadConfig refuses both at once).
 */
export function databaseUrl(c: Config): string {
  if (c.DATABASE_SSLMODE) pg.defaults.ssl = postgresSsl(c);
  return c.DATABASE_URL ?? `postgres://postgres:postgres@127.0.0.1:${c.PG_PORT}/${EMBEDDED_DATABASE}`;
}

/** pg's `ssl` option for libpq's sslmode: false, encrypted only, signed by the CA, and naming the host. */
export function postgresSsl(c: Pick<Config, 'DATABASE_SSLMODE' | 'DATABASE_SSL_CA'>): false | tls.ConnectionOptions {
  const ca = c.DATABASE_SSL_CA ? { ca: fs.readFileSync(c.DATABASE_SSL_CA, 'utf8') } : {};
  switch (c.DATABASE_SSLMODE) {
    case undefined:
    case 'disable':
      return false;
    case 'require':
      return { rejectUnauthorized: false };
    case 'verify-ca':
      return { ...ca, rejectUnauthorized: true, checkServerIdentity: () => undefined };
    case 'verify-full':
      return { ...ca, rejectUnauthorized: true };
  }
}
