import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { generateSync } from 'otplib';
import type { Page } from 'playwright-core';
import { deriveKey } from '../../platform/secret-box';
import { parsePanelFlags } from '../../platform/panel-flags';
import { freePort } from '../../platform/ports';
import { run } from '../../hosting-node/processes';
import { startPanelApi, type PanelRuntime, type PanelRuntimeOptions } from '../../main/panel-api';
import { ensurePlatform } from '../../services/panel/orgs/bootstrap';
import { env } from '../setup/env';

export const PANEL_TEST_KEY = deriveKey('panel-test-secret');

/** A panel process over the suite's PostgreSQL and Temporal; `flags` as on the command line, any other option overrides. */
export async function startPanel(opts: { flags?: string[] } & Partial<Omit<PanelRuntimeOptions, 'flags'>> = {}): Promise<PanelRuntime> {
  const { flags, throttle, ...rest } = opts;
  return startPanelApi({
    db: env.db,
    temporalAddress: env.temporalAddress,
    namespace: 'default',
    logger: env.logger,
    port: 0,
    flags: parsePanelFlags(flags ?? []),
    sealingKey: PANEL_TEST_KEY,
    sessionIdleMs: 3_600_000,
    sessionMaxMs: 7 * 86_400_000,
    // Generous by default so suites signing in often are not throttled; throttle tests set their own.
    throttle: { loginFailures: 1000, ipFailures: 100_000, ...throttle },
    ...rest,
  });
}

export interface HostingPanel {
  runtime: PanelRuntime;
  url: string;
  /** the hosting node's root (a temp folder, removed by close) */
  root: string;
  webPort: number;
  /** the hosting node's HTTPS port when asked for (`tls`), else null */
  webTlsPort: number | null;
  /** where the hosting node's MariaDB listens (127.0.0.1) when asked for, else null */
  dbPort: number | null;
  /** where the hosting node's sshd offers SFTP when asked for (`sftp`), else null */
  sftpPort: number | null;
  /** the panel worker's task queue (one per panel, so suites never take each other's tasks) */
  taskQueue: string;
  close(): Promise<void>;
}

/** Where SFTP tests put node roots: root's, 0755 all the way up. */
const SFTP_ROOTS = '/var/lib/panel-tests';

/**
 * A panel process that runs its own hosting node (under a temp root, its web server on a free
 * port; with `mariadb`, MariaDB on a free port: the node's `db` role) and the panel worker on a
 * task queue of its own; any other option overrides.
 */
export async function startHostingPanel(
  opts: { flags?: string[]; mariadb?: boolean; opTimeoutMs?: number; reportEveryMs?: number; backups?: boolean; tls?: boolean; sftp?: boolean } & Partial<Omit<PanelRuntimeOptions, 'flags' | 'hosting'>> = {},
): Promise<HostingPanel> {
  const { mariadb, opTimeoutMs, reportEveryMs, backups, tls, sftp, ...rest } = opts;
  // sshd chroots only below root-owned folders no one else may write (not /tmp, 1777)
  if (sftp) fs.mkdirSync(SFTP_ROOTS, { recursive: true, mode: 0o755 });
  const root = fs.mkdtempSync(path.join(sftp ? SFTP_ROOTS : os.tmpdir(), 'panel-host-'));
  fs.chmodSync(root, 0o755); // nginx and PHP-FPM workers (www-data) read below it
  const [webPort, dbPort] = await Promise.all([freePort(), mariadb ? freePort() : Promise.resolve(null)]);
  const taskQueue = `panel-test-${randomUUID()}`;
  const webTlsPort = tls ? await freePort() : null;
  const sftpPort = sftp ? await freePort() : null;
  try {
    const runtime = await startPanel({
      databaseUrl: env.databaseUrl,
      nodeOps: { taskQueue, timeoutMs: opTimeoutMs ?? 2500, pollMs: 200 },
      hosting: { root, webPort, webTlsPort, webHost: '127.0.0.1', mariadbPort: dbPort, sftpPort, mariadbTimeoutMs: 30_000, reportEveryMs, workflowBundle: env.bundles.panel, ...(backups ? { backupDir: path.join(root, 'backups') } : {}) },
      ...rest,
    });
    return {
      runtime,
      url: runtime.url,
      root,
      webPort,
      webTlsPort,
      dbPort,
      sftpPort,
      taskQueue,
      async close() {
        await runtime.close();
        fs.rmSync(root, { recursive: true, force: true });
      },
    };
  } catch (err) {
    fs.rmSync(root, { recursive: true, force: true });
    throw err;
  }
}

/** Registers before/after hooks for one panel process; returns a getter for its URL. */
export function usePanel(opts: Parameters<typeof startPanel>[0] = {}): () => string {
  let panel: PanelRuntime | null = null;
  before(async function () {
    this.timeout(30_000);
    panel = await startPanel(opts);
  });
  after(async () => {
    await panel?.close();
    panel = null;
  });
  return () => {
    if (!panel) throw new Error('the panel is used outside its suite');
    return panel.url;
  };
}

export interface Reply {
  status: number;
  headers: Headers;
  json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** A panel client: keeps its session cookie like a browser, or sends an API token. */
export class PanelClient {
  cookie: string | null = null;
  /** the session's CSRF token (x-csrf-token), sent back on changes made with the cookie */
  csrf: string | null = null;
  constructor(
    readonly base: string,
    public token: string | null = null,
  ) {}

  async req(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Reply> {
    const res = await fetch(this.base + path, {
      method,
      headers: {
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...(this.cookie ? { cookie: this.cookie } : {}),
        ...(this.token ? { authorization: `Bearer ${this.token}` } : {}),
        ...(this.cookie && this.csrf ? { 'x-csrf-token': this.csrf } : {}),
        ...headers,
      },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const set = res.headers.get('set-cookie');
    this.csrf = res.headers.get('x-csrf-token') ?? this.csrf;
    if (set) {
      const pair = set.split(';')[0];
      this.cookie = pair.endsWith('=') ? null : pair;
    }
    const text = await res.text();
    let json;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { status: res.status, headers: res.headers, json };
  }

  get = (path: string) => this.req('GET', path);
  post = (path: string, body?: unknown) => this.req('POST', path, body);
  patch = (path: string, body?: unknown) => this.req('PATCH', path, body);
  put = (path: string, body?: unknown) => this.req('PUT', path, body);
  del = (path: string, body?: unknown) => this.req('DELETE', path, body);

  async signIn(username: string, password: string, code?: string): Promise<Reply> {
    return this.post('/v1/auth/sign-in', { username, password, ...(code ? { code } : {}) });
  }
}

export const PASSWORD = 'correct horse battery staple';

/** Signs `username` (password PASSWORD) in through the console's sign-in page and waits for its account's page. */
export async function consoleSignIn(page: Page, username: string, orgId: string): Promise<void> {
  await page.goto('/sign-in');
  await page.getByLabel('Username').fill(username);
  await page.getByLabel('Password', { exact: true }).fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(`**/orgs/${orgId}`);
}

/** Signs in with a temporary password and replaces it with PASSWORD; fails loudly otherwise. */
export async function signInFresh(base: string, username: string, temporary: string): Promise<PanelClient> {
  const c = new PanelClient(base);
  const r = await c.signIn(username, temporary);
  if (r.status !== 200) throw new Error(`sign-in of ${username}: ${r.status} ${JSON.stringify(r.json)}`);
  if (r.json.must_change_password) {
    const p = await c.post('/v1/account/password', { current_password: temporary, new_password: PASSWORD });
    if (p.status !== 204) throw new Error(`password change of ${username}: ${p.status} ${JSON.stringify(p.json)}`);
  }
  return c;
}

/**
 * The platform admin of the test database, signed in: the platform and its `admin` login are
 * created once per run (ensurePlatform); the temporary password is kept for later suites.
 */
let adminPassword: string | null = null;
export async function platformAdmin(base: string): Promise<PanelClient> {
  const initial = await ensurePlatform(env.db);
  if (initial) {
    const c = await signInFresh(base, initial.username, initial.password);
    adminPassword = PASSWORD;
    return c;
  }
  if (!adminPassword) throw new Error('the platform admin was created outside the panel helper');
  const c = new PanelClient(base);
  const r = await c.signIn('admin', adminPassword);
  if (r.status !== 200) throw new Error(`admin sign-in: ${r.status} ${JSON.stringify(r.json)}`);
  return c;
}

export const unique = (prefix: string) => `${prefix}${randomUUID().slice(0, 8)}`;

/** Creates an org below `parentId` (default: the caller's org) with its first login signed in and its password changed. */
export async function createOrgWithLogin(
  by: PanelClient,
  input: { type: 'provider' | 'reseller' | 'customer'; parent_id?: string; name?: string; [k: string]: unknown },
): Promise<{ id: string; client: PanelClient; username: string; body: any }> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const username = unique(input.type.slice(0, 3));
  const temporary = `temp-${randomUUID()}`;
  const r = await by.post('/v1/orgs', { name: input.name ?? username, ...input, login: { username, password: temporary } });
  if (r.status !== 201) throw new Error(`create ${input.type}: ${r.status} ${JSON.stringify(r.json)}`);
  return { id: r.json.id, client: await signInFresh(by.base, username, temporary), username, body: r.json };
}

/** The current TOTP code of a base32 secret, as an authenticator app would show it. */
export const totp = (secret: string, epoch?: number) => generateSync({ secret, ...(epoch ? { epoch } : {}) });

/** GET a path on a node's web server with a Host header (fetch() does not let a caller set Host). */
export function getFromNode(port: number, host: string, p = '/'): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: p, headers: { host }, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (x: string) => (body += x));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
  });
}

/** Every table of the panel's schema whose rows, as text, contain `needle` (secrets must be in none). */
export async function tablesContaining(needle: string): Promise<string[]> {
  const tables: string[] = (await env.db('pg_tables').where({ schemaname: 'public' }).pluck('tablename')) as string[];
  const hits: string[] = [];
  for (const t of tables) {
    const { rows } = await env.db.raw(`SELECT count(*)::int AS n FROM ?? AS t WHERE t::text LIKE ?`, [t, `%${needle}%`]);
    if (rows[0].n > 0) hits.push(t);
  }
  return hits;
}

/** Runs SQL as a customer's database user on a hosting panel's MariaDB: over TCP to its port, or over its socket under the node root. */
export function asDbUser(panel: HostingPanel, user: string, password: string, sql: string, via: 'tcp' | 'socket' = 'tcp') {
  const where = via === 'tcp' ? ['--protocol=TCP', '--host=127.0.0.1', `--port=${panel.dbPort}`] : [`--socket=${path.join(panel.root, 'run/my.sock')}`];
  return run('mariadb', ['--no-defaults', ...where, `--user=${user}`, `--password=${password}`, '--batch', '--skip-column-names', '--connect-timeout=5', '-e', sql], { timeoutMs: 20_000 });
}
