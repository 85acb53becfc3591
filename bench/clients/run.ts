import { execFileSync, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import Decimal from 'decimal.js';
import { createAccount } from '../../services/accounts/accounts';
import { createKey } from '../../services/keys/keys';
import { createDb, type Db } from '../../platform/db';
import { freePorts, sleep, spawnChild, stopAll, TSX_BIN } from '../children';
import { table } from '../stats';
import { CASES, DRIVERS, type CaseName, type ClientVerdict } from './drivers';
import { CLIENT_NAMES, installClient, newestVersion, PINS, type ClientName, type InstalledClient } from './install';
import { outsideAttempts, startEgressTrap, startTap, type Exchange } from './watch';

// `npm run clients` (issue 29 item 7): the real coding clients against a running system. Installs
// Claude Code, Codex and llm at their pinned versions (`-- --newest`: the newest the registries
// serve), starts the whole system as `npm start` does (own DATA_DIR and ports), runs the gateway's
// own install.sh in a throwaway HOME per client, then drives every client on every text model of
// the catalog: a text prompt, a tool round trip with one of the client's own tools, a streamed
// answer. A case passes when the client printed the simulated answer, no request was refused
// (any 4xx/5xx the tap saw), every answered request was charged exactly once and settled, the
// token totals the client reported equal the gateway's, and nothing left for another host.
// Prints the table and writes it with the refusals seen to bench/clients/results[-newest].md.

const ROOT = path.resolve(__dirname, '../..');
const RUN_TIMEOUT_MS = 120_000;
const COMPLETION = /^\/v1\/(messages|responses|chat\/completions)(\?|$)/;
const T0 = Date.now();
const log = (msg: string) => process.stderr.write(`[clients +${((Date.now() - T0) / 1000).toFixed(0)}s] ${msg}\n`);

interface Row {
  client: ClientName;
  model: string;
  c: CaseName;
  ok: boolean;
  reasons: string[];
  ms: number;
  refusals: Exchange[];
  egress: string[];
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      newest: { type: 'boolean', default: false },
      clients: { type: 'string' },
      models: { type: 'string' },
      cases: { type: 'string' },
      out: { type: 'string' },
    },
  });
  const clients = pick(values.clients, CLIENT_NAMES, 'client');
  const cases = pick(values.cases, CASES, 'case');
  const out = path.resolve(values.out ?? path.join(__dirname, values.newest ? 'results-newest.md' : 'results.md'));

  const installed = new Map<ClientName, InstalledClient>();
  for (const name of clients) {
    const version = values.newest ? await newestVersion(name) : PINS[name];
    log(`installing ${name} ${version}`);
    const c = await installClient(name, version);
    log(`${name}: ${c.reported}${c.fresh ? ' (installed now)' : ''}`);
    installed.set(name, c);
  }

  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-clients-'));
  fs.chmodSync(dataDir, 0o755); // as root, the embedded PostgreSQL runs as the `postgres` user
  const ports = await freePorts(10);
  const portEnv = ['GATEWAY_PORT', 'PANEL_PORT', 'PANEL_HOSTING_WEB_PORT', 'PANEL_HOSTING_TLS_PORT', 'PANEL_NODE_API_PORT', 'PANEL_HOSTING_DB_PORT', 'TEMPORAL_PORT', 'TEMPORAL_UI_PORT', 'PG_PORT', 'SIMULATOR_PORT'];
  const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: dataDir, LOG_LEVEL: 'warn', ...Object.fromEntries(portEnv.map((k, i) => [k, String(ports[i])])) };
  delete env.DATABASE_URL;
  delete env.TEMPORAL_ADDRESS;
  log(`starting the system (DATA_DIR ${dataDir})`);
  const system = spawnChild('main/start.ts', TSX_BIN, ['main/start.ts'], env, ROOT);
  const gatewayUrl = `http://127.0.0.1:${env.GATEWAY_PORT}`;
  let db: Db | undefined;
  const closers: Array<() => Promise<void>> = [];
  try {
    // connection.json is written once everything (the panel too) has started.
    const connection = path.join(dataDir, 'connection.json');
    await waitFor(async () => fs.existsSync(connection) && (await fetch(`${gatewayUrl}/healthz`).then((r) => r.ok, () => false)), () => system.exited(), 150_000, () => system.output());
    const settings = JSON.parse(fs.readFileSync(connection, 'utf8')) as { DATABASE_URL: string };
    db = createDb(settings.DATABASE_URL, 4);
    const account = await createAccount(db, { name: `clients-${new Date().toISOString()}`, tier: 'pro', credits: '1000' });
    const { id: keyId, key } = await createKey(db, { accountId: account.id, label: 'clients' });
    const tap = await startTap(gatewayUrl);
    const egress = await startEgressTrap();
    closers.push(tap.close, egress.close);

    const listed = (await (await fetch(`${tap.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).json()) as { data: Array<{ id: string; capabilities: string[] }> };
    const catalog = listed.data.filter((m) => m.capabilities.includes('text')).map((m) => m.id);
    const models = values.models ? values.models.split(',').filter((m) => catalog.includes(m) || fail(`model ${m} is not a text model of the catalog (${catalog.join(', ')})`)) : catalog;
    log(`text models: ${models.join(', ')}`);
    const installer = await (await fetch(`${tap.url}/install.sh`)).text();
    tap.take();
    const strace = spawnSync('strace', ['-V']).status === 0;
    const notes: string[] = strace ? [] : ['strace is not installed: only the egress trap (HTTP(S)_PROXY) watched for outside traffic.'];

    const rows: Row[] = [];
    for (const client of clients) {
      const bin = installed.get(client)!.bin;
      const home = fs.mkdtempSync(path.join(os.tmpdir(), `home-${client}-`));
      const work = path.join(home, 'work');
      fs.mkdirSync(work);
      fs.writeFileSync(path.join(home, 'install.sh'), installer);
      // Asynchronously: the tap the installer talks to runs in this process.
      const inst = await runProcess(['bash', 'install.sh', '--key', key, '--all', '--models', models.join(','), '--yes'], baseEnv(home, egress.url), home);
      if (inst.code !== 0) throw new Error(`install.sh failed (${inst.code}): ${inst.stdout}${inst.stderr}`);
      if (client === 'llm' && configureLlm(home, tap.url, key, models)) notes.push('llm: the installer has no llm step yet; the suite wrote `extra-openai-models.yaml` and the key itself (what the installer is to write).');
      tap.take();
      for (const model of models) {
        for (const c of cases) {
          const row = await runCase({ client, model, c, bin, home, work, db, keyId, egressUrl: egress.url, strace, tap, egress });
          rows.push(row);
          log(`${client} ${model} ${c}: ${row.ok ? 'pass' : `FAIL ${row.reasons.join('; ')}`} (${(row.ms / 1000).toFixed(1)} s)`);
        }
      }
      fs.rmSync(home, { recursive: true, force: true });
    }

    const report = render(rows, [...installed.values()], models, values.newest ?? false, notes);
    fs.writeFileSync(out, report);
    process.stdout.write(`\n${report}\n`);
    log(`results written to ${path.relative(ROOT, out)}`);
    return rows.every((r) => r.ok) ? 0 : 1;
  } finally {
    for (const close of closers) await close();
    await db?.destroy();
    for (const line of await stopAll()) log(line);
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

interface CaseContext {
  client: ClientName;
  model: string;
  c: CaseName;
  bin: string;
  home: string;
  work: string;
  db: Db;
  keyId: string;
  egressUrl: string;
  strace: boolean;
  tap: { take(): Exchange[] };
  egress: { take(): string[] };
}

async function runCase(x: CaseContext): Promise<Row> {
  const driver = DRIVERS[x.client];
  const marker = `m${Math.random().toString(16).slice(2, 10)}`;
  const started = new Date();
  const t = Date.now();
  const straceLog = path.join(x.home, `strace-${marker}.log`);
  // The client runs as from a login shell: ~/.profile (the installer's variables) is read first.
  const shell = ['bash', '-c', '[ -f "$HOME/.profile" ] && . "$HOME/.profile"; exec "$@"', 'client', ...driver.command(x.c, x.model, marker, x.bin)];
  const argv = x.strace ? ['strace', '-f', '-qq', '-e', 'trace=connect,sendto,sendmmsg', '-s', '96', '-o', straceLog, ...shell] : shell;
  const result = await runProcess(argv, { ...baseEnv(x.home, x.egressUrl), ...driver.quietEnv }, x.work);
  const ms = Date.now() - t;
  await sleep(300); // the tap records an exchange when the gateway's answer ended
  const exchanges = x.tap.take();
  const egress = [...x.egress.take(), ...(x.strace ? outsideAttempts(straceLog) : [])];
  const reasons: string[] = [];
  const verdict: ClientVerdict = result.timedOut ? { ok: false, reason: `no exit within ${RUN_TIMEOUT_MS / 1000} s`, usage: null } : driver.judge(x.c, marker, `${result.stdout}\n${result.stderr}`);
  if (!verdict.ok) reasons.push(verdict.reason);
  else if (result.code !== 0) reasons.push(`exit code ${result.code}: ${result.stderr.slice(-200).trim()}`);
  const refusals = exchanges.filter((e) => e.status >= 400);
  for (const r of refusals) reasons.push(`refused ${r.method} ${r.path.split('?')[0]} → ${r.status} ${errorSummary(r)}`);
  const answered = exchanges.filter((e) => e.method === 'POST' && COMPLETION.test(e.path) && e.status < 400);
  if (answered.length === 0 && refusals.length === 0) reasons.push('no completion request reached the gateway');
  reasons.push(...(await ledgerProblems(x.db, x.keyId, started, answered, verdict)));
  if (x.c === 'stream') {
    const streamed = answered.filter((e) => e.contentType.startsWith('text/event-stream'));
    if (answered.length > 0 && streamed.length === 0) reasons.push('no answer was streamed (text/event-stream)');
  }
  for (const e of egress) reasons.push(`outside traffic: ${e}`);
  return { client: x.client, model: x.model, c: x.c, ok: reasons.length === 0, reasons: [...new Set(reasons)], ms, refusals, egress };
}

/**
 * Every answered completion settled with exactly one charge row equal to its reservation's charge;
 * no reservation of the key the tap did not see answered; token totals equal what the client reported.
 */
async function ledgerProblems(db: Db, keyId: string, since: Date, answered: Exchange[], verdict: ClientVerdict): Promise<string[]> {
  const problems: string[] = [];
  const ids = answered.map((e) => e.requestId).filter((id): id is string => id !== null);
  if (ids.length < answered.length) problems.push(`${answered.length - ids.length} answers without x-gateway-request-id`);
  type Res = { id: string; status: string; charge: string | null; prompt_tokens: number | null; completion_tokens: number | null };
  let reservations: Res[] = [];
  for (let i = 0; i < 60; i++) {
    reservations = await db('reservations').where({ key_id: keyId }).where('created_at', '>=', since).select('id', 'status', 'charge', 'prompt_tokens', 'completion_tokens');
    if (reservations.every((r) => r.status !== 'held')) break;
    await sleep(500);
  }
  const unseen = reservations.filter((r) => !ids.includes(r.id));
  if (unseen.length) problems.push(`${unseen.length} reservation(s) for requests the client got no answer to`);
  for (const id of ids) {
    const r = reservations.find((x) => x.id === id);
    if (!r) {
      problems.push(`request ${id}: no reservation`);
      continue;
    }
    if (r.status !== 'settled') problems.push(`request ${id}: reservation ${r.status}`);
    const charges = (await db('ledger').where({ reservation_id: id, kind: 'charge' }).select('amount')) as Array<{ amount: string }>;
    if (charges.length !== 1) problems.push(`request ${id}: ${charges.length} charge rows`);
    else if (!new Decimal(charges[0]!.amount).eq(r.charge ?? 'NaN')) problems.push(`request ${id}: charged ${charges[0]!.amount}, reservation says ${r.charge}`);
  }
  if (verdict.usage && ids.length > 0) {
    const mine = reservations.filter((r) => ids.includes(r.id));
    const input = mine.reduce((n, r) => n + (r.prompt_tokens ?? 0), 0);
    const output = mine.reduce((n, r) => n + (r.completion_tokens ?? 0), 0);
    if (input !== verdict.usage.input || output !== verdict.usage.output) {
      problems.push(`usage: client reported ${verdict.usage.input} in / ${verdict.usage.output} out, gateway billed ${input} / ${output} over ${ids.length} request(s)`);
    }
  }
  return problems;
}

/** The gateway's error message, with the offending value from the request body when `param` names one. */
function errorSummary(e: Exchange): string {
  let message = e.error ?? '';
  let param: string | null = null;
  try {
    const body = JSON.parse(e.error ?? '') as { error?: { message?: string; param?: string | null } };
    message = body.error?.message ?? message;
    param = body.error?.param ?? null;
  } catch {
    // not JSON: keep the text
  }
  // Anthropic's envelope has no param: the gateway names the field in the message.
  param ??= /'([\w.[\]]+)'/.exec(message)?.[1] ?? null;
  const value = param ? valueAt(e.body, param) : undefined;
  const shown = value === undefined ? '' : ` (sent ${param} = ${JSON.stringify(value).slice(0, 80)})`;
  return `"${message.replace(/\s+/g, ' ').slice(0, 240)}"${shown}`;
}

/**
 * A refused body in one line: its fields (small values shown), the roles or item types of its
 * conversation and the types of its tools, so every field that may be refused is visible, not
 * only the first one the gateway named.
 */
function requestShape(body: unknown): string {
  if (typeof body !== 'object' || body === null) return JSON.stringify(body);
  const b = body as Record<string, unknown>;
  const bulky = new Set(['messages', 'input', 'tools', 'system', 'instructions', 'metadata', 'client_metadata', 'prompt_cache_key']);
  const list = (v: unknown, f: (x: Record<string, unknown>) => unknown) => (Array.isArray(v) ? v.map((x) => String(f((x ?? {}) as Record<string, unknown>))).join(',') : undefined);
  const parts = Object.keys(b).map((k) => (bulky.has(k) ? k : `${k}=${JSON.stringify(b[k]).slice(0, 60)}`));
  const roles = list(b.messages, (m) => m.role) ?? list(b.input, (i) => i.role ?? i.type);
  const tools = list(b.tools, (t) => t.type ?? 'custom');
  return `${parts.join(' ')}${roles ? `; conversation: ${roles}` : ''}${tools ? `; tool types: ${[...new Set(tools.split(','))].join(',')}` : ''}`;
}

function valueAt(body: unknown, param: string): unknown {
  let v: unknown = body;
  for (const part of param.replace(/\[(\d+)\]/g, '.$1').split('.')) {
    if (typeof v !== 'object' || v === null) return undefined;
    v = (v as Record<string, unknown>)[part];
  }
  return v;
}

/**
 * The environment of the installer and the clients: nothing of this process's own (no keys of
 * the machine), a throwaway HOME, and every proxy variable pointed at the egress trap; only
 * loopback goes direct.
 */
function baseEnv(home: string, egressUrl: string): Record<string, string> {
  const proxies = Object.fromEntries(['HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY'].flatMap((k) => [[k, egressUrl], [k.toLowerCase(), egressUrl]]));
  const noProxy = '127.0.0.1,localhost,::1';
  return { PATH: `${path.dirname(process.execPath)}:/usr/local/bin:/usr/bin:/bin`, HOME: home, LANG: 'C.UTF-8', TERM: 'dumb', ...proxies, NO_PROXY: noProxy, no_proxy: noProxy };
}

/** llm's model list and key, unless the installer wrote them; true when the suite had to. */
function configureLlm(home: string, tapUrl: string, key: string, models: string[]): boolean {
  const dir = path.join(home, '.config', 'io.datasette.llm');
  const file = path.join(dir, 'extra-openai-models.yaml');
  if (fs.existsSync(file)) return false;
  fs.mkdirSync(dir, { recursive: true });
  const entries = models.map((m) => `- model_id: ${m}\n  model_name: ${m}\n  api_base: ${tapUrl}/v1\n  api_key_name: gateway\n  supports_tools: true\n`);
  fs.writeFileSync(file, entries.join(''));
  fs.writeFileSync(path.join(dir, 'keys.json'), JSON.stringify({ gateway: key }), { mode: 0o600 });
  return true;
}

function runProcess(argv: string[], env: Record<string, string>, cwd: string): Promise<{ code: number | null; stdout: string; stderr: string; timedOut: boolean }> {
  return new Promise((resolve) => {
    const child = spawn(argv[0]!, argv.slice(1), { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid!, 'SIGKILL'); // the client's whole process group
      } catch {
        // already gone
      }
    }, RUN_TIMEOUT_MS);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, timedOut });
    });
  });
}

async function waitFor(ready: () => Promise<boolean>, exited: () => boolean, timeoutMs: number, output: () => string): Promise<void> {
  const stopAt = Date.now() + timeoutMs;
  while (Date.now() < stopAt) {
    if (exited()) throw new Error(`the system exited before it was ready:\n${output()}`);
    if (await ready()) return;
    await sleep(500);
  }
  throw new Error(`the system was not ready within ${timeoutMs} ms:\n${output()}`);
}

function render(rows: Row[], clients: InstalledClient[], models: string[], newest: boolean, notes: string[]): string {
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
  const cell = (s: string) => s.replace(/\|/g, '\\|');
  const passed = rows.filter((r) => r.ok).length;
  const refusals = new Set<string>();
  const shapes = new Set<string>();
  for (const r of rows) {
    for (const e of r.refusals) {
      refusals.add(`${r.client} · ${r.model} · ${e.method} ${e.path.split('?')[0]} → ${e.status} ${errorSummary(e)}`);
      shapes.add(`${r.client} · ${e.method} ${e.path.split('?')[0]}: ${requestShape(e.body)}`);
    }
  }
  const egress = new Set(rows.flatMap((r) => r.egress.map((e) => `${r.client}: ${e}`)));
  return [
    `# Real clients against the gateway (${new Date().toISOString().slice(0, 10)}, commit ${commit})`,
    '',
    `\`npm run clients${newest ? ' -- --newest' : ''}\`: ${clients.map((c) => `${c.name} ${c.version} (\`${c.reported}\`)`).join(', ')}; models ${models.join(', ')}. ${passed}/${rows.length} cases passed.`,
    '',
    table(['client', 'model', 'case', 'result', 'reason', 's'], rows.map((r) => [r.client, r.model, r.c, r.ok ? 'pass' : 'FAIL', cell(r.reasons.join('; ')), (r.ms / 1000).toFixed(1)])),
    '',
    '## Refusals seen',
    '',
    ...(refusals.size ? [...refusals].map((k) => `- ${k}`) : ['none']),
    ...(shapes.size ? ['', 'What the refused requests held (fields, conversation roles, tool types):', '', ...[...shapes].map((k) => `- ${k}`)] : []),
    '',
    '## Outside traffic seen',
    '',
    ...(egress.size ? [...egress].map((e) => `- ${e}`) : ['none (egress trap on HTTP(S)_PROXY' + (notes.some((n) => n.startsWith('strace')) ? ')' : ', strace connect/DNS record)')]),
    ...(notes.length ? ['', '## Notes', '', ...notes.map((n) => `- ${n}`)] : []),
    '',
  ].join('\n');
}

function pick<T extends string>(given: string | undefined, all: readonly T[], what: string): T[] {
  if (!given) return [...all];
  return given.split(',').map((v) => (all.includes(v as T) ? (v as T) : fail(`unknown ${what} ${v} (${all.join(', ')})`)));
}

function fail(message: string): never {
  throw new Error(message);
}

main().then(
  (code) => process.exit(code),
  async (err) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    await stopAll();
    process.exit(2);
  },
);
