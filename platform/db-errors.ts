import { KnexTimeoutError } from 'knex';

// Which errors mean "the database is unreachable or restarting" (a 503 to retry), as opposed to
// a bug (a 500): connection refused or reset, the pool timing out, or PostgreSQL shutting down.

const NETWORK = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN']);

export function isDatabaseUnavailable(err: unknown): boolean {
  if (err instanceof KnexTimeoutError) return true;
  const e = err as { code?: unknown; message?: unknown } | null;
  const code = typeof e?.code === 'string' ? e.code : '';
  // SQLSTATE class 08 (connection exception), 57P01-57P03 (admin shutdown, crash shutdown, cannot connect now)
  if (NETWORK.has(code) || code.startsWith('08') || /^57P0[123]$/.test(code)) return true;
  const message = typeof e?.message === 'string' ? e.message : '';
  return /Connection terminated|connection is closed|Client has encountered a connection error/i.test(message);
}
