import { execFileSync } from 'node:child_process';
import { recordRun } from './history';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Pool } from 'undici';
import type { Logger } from '../platform/logger';
import { freePort } from '../platform/ports';
import { startEmbeddedPostgres } from '../platform/postgres';
import { startTemporalDevServer } from '../platform/temporal-server';
import { childrenNamed } from './proc';
import { nsToMs } from './stats';

// What the panel benchmarks (bench/panel.ts, bench/panel-sites.ts) share: their own PostgreSQL and
// Temporal, the stops run on every exit path (end, failure, signal, time budget), the revision
// and machine lines of a report, the results file, a pino sink, and HTTP calls to the panel API.

export const ROOT = path.resolve(__dirname, '..');

/** A progress line on stderr, `[tag +Ns] msg`. */
export function progress(tag: string): (msg: string) => void {
  const t0 = Date.now();
  return (msg) => process.stderr.write(`[${tag} +${((Date.now() - t0) / 1000).toFixed(0)}s] ${msg}\n`);
}

// ---------------------------------------------------------------------------------------------
// Stops

const cleanups: Array<[string, () => Promise<unknown>]> = [];

/** Registers a stop, run (newest first) when the benchmark ends in any way. */
export function onCleanup(name: string, fn: () => Promise<unknown>): void {
  cleanups.push([name, fn]);
}

let log: (msg: string) => void = (msg) => process.stderr.write(`${msg}\n`);

async function cleanup(): Promise<void> {
  while (cleanups.length) {
    const [name, fn] = cleanups.pop()!;
    try {
      await fn();
    } catch (err) {
      log(`stopping ${name} failed: ${String(err)}`);
    }
  }
}

/**
 * Runs `main`, then the stops, then exits: 0 when it completed, 1 when it failed or ran past
 * `budgetMs` (a hard stop), 130/143 on SIGINT/SIGTERM.
 */
export function runBench(main: () => Promise<void>, o: { budgetMs: number; log: (msg: string) => void }): void {
  log = o.log;
  let exiting = false;
  const bail = (why: string, code: number) => {
    if (exiting) return;
    exiting = true;
    log(`${why}: stopping what was started`);
    void cleanup().finally(() => process.exit(code));
  };
  process.on('SIGINT', () => bail('SIGINT', 130));
  process.on('SIGTERM', () => bail('SIGTERM', 143));
  // a promise that failed with nobody waiting for it would end the process before the stops ran
  process.on('unhandledRejection', (err) => bail(`unhandled rejection: ${err instanceof Error ? err.stack : String(err)}`, 1));
  // Hard stop: whatever happens, the run ends (and what it started is stopped) soon after the budget.
  setTimeout(() => bail('time budget exceeded', 1), o.budgetMs).unref();
  main().then(
    async () => {
      if (exiting) return;
      exiting = true;
      await cleanup();
      process.exit(0);
    },
    async (err) => {
      if (exiting) return; // stopped by a signal or the time budget: the failure is that stop's doing
      process.stderr.write(`benchmark failed: ${err instanceof Error ? err.stack : String(err)}\n`);
      exiting = true;
      await cleanup();
      process.exit(1);
    },
  );
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL and Temporal

export interface Backends {
  databaseUrl: string;
  temporalAddress: string;
  /** the embedded PostgreSQL's postmaster, null with DATABASE_URL */
  postmasterPid: number | null;
  /** the Temporal dev server (CLI) process, null with TEMPORAL_ADDRESS */
  temporalPid: number | null;
  ownPg: boolean;
  ownTemporal: boolean;
  /** a 0755 temp folder removed at the end */
  tmp: string;
}

/**
 * Embedded PostgreSQL and a Temporal dev server (in memory) of the benchmark's own, unless
 * DATABASE_URL / TEMPORAL_ADDRESS name others; both stopped at the end.
 */
export async function startBackends(o: { logger: Logger; log: (msg: string) => void; prefix: string; database: string }): Promise<Backends> {
  let databaseUrl = process.env.DATABASE_URL;
  let temporalAddress = process.env.TEMPORAL_ADDRESS;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), o.prefix));
  fs.chmodSync(tmp, 0o755); // as root, the embedded PostgreSQL runs as the `postgres` user
  onCleanup('temp dir', async () => fs.rmSync(tmp, { recursive: true, force: true }));
  let pgDir: string | null = null;
  let temporalPid: number | null = null;
  const starts: Array<Promise<unknown>> = [];
  if (!databaseUrl) {
    pgDir = path.join(tmp, 'pg');
    const port = await freePort();
    o.log(`starting embedded PostgreSQL on ${port}`);
    starts.push(
      startEmbeddedPostgres({ dir: pgDir, port, database: o.database, persistent: false, logger: o.logger }).then((pg) => {
        onCleanup('PostgreSQL', () => pg.stop());
        databaseUrl = pg.url;
      }),
    );
  }
  if (!temporalAddress) {
    const port = await freePort();
    o.log(`starting the Temporal dev server on ${port}`);
    const before = new Set(childrenNamed(process.pid, 'temporal'));
    starts.push(
      startTemporalDevServer({ port, namespace: 'default', logger: o.logger }).then((t) => {
        onCleanup('Temporal dev server', () => t.stop());
        temporalAddress = t.address;
        temporalPid = childrenNamed(process.pid, 'temporal').find((p) => !before.has(p)) ?? null;
      }),
    );
  }
  // Every start is awaited, even when one fails, so the stops cover whichever came up.
  const settled = await Promise.allSettled(starts);
  const failed = settled.find((r) => r.status === 'rejected');
  if (failed) throw (failed as PromiseRejectedResult).reason;
  const postmasterPid = pgDir ? Number(fs.readFileSync(path.join(pgDir, 'postmaster.pid'), 'utf8').split('\n')[0]) || null : null;
  return { databaseUrl: databaseUrl!, temporalAddress: temporalAddress!, postmasterPid, temporalPid, ownPg: !!pgDir, ownTemporal: !process.env.TEMPORAL_ADDRESS, tmp };
}

// ---------------------------------------------------------------------------------------------
// The report

export function git(args: string[]): string {
  try {
    return execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

/** The commit, and the uncommitted files among those matching `relevant`. */
export function revision(relevant: RegExp): { commit: string; dirty: string[] } {
  const dirty = git(['status', '--porcelain'])
    .split('\n')
    .filter(Boolean)
    .map((l) => l.replace(/^\s*\S+\s/, '')) // the output is trimmed: the first line lost its leading blank
    .filter((p) => relevant.test(p));
  return { commit: git(['rev-parse', '--short', 'HEAD']), dirty };
}

export const dirtyNote = (dirty: string[]) => (dirty.length ? ` (uncommitted: ${dirty.slice(0, 8).join(', ')}${dirty.length > 8 ? ', …' : ''})` : '');

export const loadText = (l: number[]) => l.map((v) => v.toFixed(2)).join('/');

/** node version, cores, CPU model. */
export const machine = (): string[] => [`node ${process.version}`, `nproc ${os.availableParallelism()}`, os.cpus()[0]?.model ?? 'unknown CPU'];

/** Prints the section and appends it to the topic's history file (bench/history.ts). */
export function appendResults(topic: string, text: string): void {
  process.stdout.write(`\n${text}\n`);
  log(`appended to ${path.relative(process.cwd(), recordRun(topic, text))}`);
}

/**
 * A pino destination that drops the lines (the cost of writing them is still paid) and counts
 * warnings and errors; `onLine` sees every line first.
 */
export function logSink(onLine?: (line: string) => void) {
  const seen = { warn: 0, error: 0, last: '' };
  return {
    seen,
    write(line: string) {
      onLine?.(line);
      const m = /"level":(\d+)/.exec(line);
      if (!m || Number(m[1]) < 40) return;
      if (Number(m[1]) >= 50) seen.error++;
      else seen.warn++;
      seen.last = line.slice(0, 300);
    },
  };
}

// ---------------------------------------------------------------------------------------------
// HTTP to the panel API

export interface Reply {
  status: number;
  ms: number;
  text: string;
  cookie: string | null;
}

/** Each session's CSRF token (x-csrf-token), sent back on changes made with its cookie. */
const csrfOf = new Map<string, string>();

export async function send(pool: Pool, method: string, urlPath: string, cookie: string | null, body?: unknown, timeoutMs = 30_000): Promise<Reply> {
  const headers: Record<string, string> = {};
  if (cookie) headers.cookie = cookie;
  if (cookie && csrfOf.has(cookie)) headers['x-csrf-token'] = csrfOf.get(cookie)!;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const start = process.hrtime.bigint();
  const res = await pool.request({
    method: method as 'GET',
    path: urlPath,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
  });
  const text = await res.body.text();
  const ms = nsToMs(process.hrtime.bigint() - start);
  const set = res.headers['set-cookie'];
  const first = Array.isArray(set) ? set[0] : set;
  const csrf = res.headers['x-csrf-token'];
  const session = first ? first.split(';')[0] : cookie;
  if (typeof csrf === 'string' && session) csrfOf.set(session, csrf);
  return { status: res.statusCode, ms, text, cookie: first ? first.split(';')[0] : null };
}

export async function signIn(pool: Pool, username: string, password: string): Promise<string> {
  const r = await send(pool, 'POST', '/v1/auth/sign-in', null, { username, password });
  if (r.status !== 200 || !r.cookie) throw new Error(`sign-in of ${username}: HTTP ${r.status} ${r.text.slice(0, 300)}`);
  return r.cookie;
}

/**
 * The session of a login whose password is temporary (the platform's `admin` on a fresh install, a
 * login created through the API): signed in, the password replaced through the API as at a first
 * sign-in, signed in again.
 */
export async function firstSignIn(pool: Pool, username: string, temporaryPassword: string, newPassword: string): Promise<string> {
  const first = await signIn(pool, username, temporaryPassword);
  const changed = await send(pool, 'POST', '/v1/account/password', first, { current_password: temporaryPassword, new_password: newPassword });
  if (changed.status !== 204) throw new Error(`password change of ${username}: HTTP ${changed.status} ${changed.text}`);
  return signIn(pool, username, newPassword);
}
