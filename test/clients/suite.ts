import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Decimal from 'decimal.js';
import type { Db } from '../../platform/db';
import { DRIVERS, type CaseName, type ClientVerdict } from './drivers';
import type { ClientName } from './install';
import { outsideAttempts, startEgressTrap, startTap, type EgressTrap, type Exchange, type Tap } from './watch';

// The compatibility suite's core, shared by `npm run clients` (run.ts) and the mocha test
// (real-clients.test.ts): given a running gateway and a key of its own account, it puts the tap
// in front of the gateway, runs the gateway's install.sh in a throwaway HOME per client and
// runs one case of one client on one model. A case passes when the client printed the simulated
// answer, no request was refused (any status of 400 or more the tap saw), every answered request
// was charged exactly once and settled, the token totals the client reported equal the
// gateway's, and nothing left for another host.

const RUN_TIMEOUT_MS = 120_000;
const COMPLETION = /^\/v1\/(messages|responses|chat\/completions)(\?|$)/;
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export interface Row {
  client: ClientName;
  model: string;
  c: CaseName;
  ok: boolean;
  reasons: string[];
  ms: number;
  /** requests answered, and the tokens the gateway billed for them */
  billed: string;
  /** x-gateway-ignored-params of the answers, deduplicated */
  ignored: string[];
  refusals: Exchange[];
  egress: string[];
}

export interface Suite {
  tapUrl: string;
  /** the text models of the catalog, as GET /v1/models lists them */
  catalog: string[];
  notes: string[];
  /** A HOME configured by the gateway's install.sh alone. */
  prepareHome(client: ClientName, models: string[]): Promise<string>;
  runCase(client: ClientName, bin: string, home: string, model: string, c: CaseName): Promise<Row>;
  close(): Promise<void>;
}

export async function startSuite(opts: { gatewayUrl: string; db: Db; key: string; keyId: string }): Promise<Suite> {
  const tap = await startTap(opts.gatewayUrl);
  const egress = await startEgressTrap();
  const listed = (await (await fetch(`${tap.url}/v1/models`, { headers: { authorization: `Bearer ${opts.key}` } })).json()) as { data: Array<{ id: string; capabilities: string[] }> };
  // Fetched through the tap: the gateway writes the address it was asked at into the script.
  const installer = await (await fetch(`${tap.url}/install.sh`)).text();
  tap.take();
  const strace = spawnSync('strace', ['-V']).status === 0;
  const notes = strace ? [] : ['strace is not installed: only the egress trap (HTTP(S)_PROXY) watched for outside traffic.'];
  const homes: string[] = [];
  return {
    tapUrl: tap.url,
    catalog: listed.data.filter((m) => m.capabilities.includes('text')).map((m) => m.id),
    notes,
    async prepareHome(client, models) {
      const home = fs.mkdtempSync(path.join(os.tmpdir(), `home-${client}-`));
      homes.push(home);
      fs.mkdirSync(path.join(home, 'work'));
      fs.writeFileSync(path.join(home, 'install.sh'), installer);
      // Asynchronously: the tap the installer talks to runs in this process.
      const inst = await runProcess(['bash', 'install.sh', '--key', opts.key, '--all', '--models', models.join(','), '--yes'], baseEnv(home, egress.url), home);
      if (inst.code !== 0) throw new Error(`install.sh failed (${inst.code}): ${inst.stdout}${inst.stderr}`);
      tap.take();
      return home;
    },
    runCase: (client, bin, home, model, c) => runCase({ client, model, c, bin, home, work: path.join(home, 'work'), db: opts.db, keyId: opts.keyId, egressUrl: egress.url, strace, tap, egress }),
    async close() {
      await tap.close();
      await egress.close();
      for (const home of homes) fs.rmSync(home, { recursive: true, force: true });
    },
  };
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
  tap: Tap;
  egress: EgressTrap;
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
  const ledger = await ledgerCheck(x.db, x.keyId, started, answered, verdict);
  reasons.push(...ledger.problems);
  if (x.c === 'stream') {
    const streamed = answered.filter((e) => e.contentType.startsWith('text/event-stream'));
    if (answered.length > 0 && streamed.length === 0) reasons.push('no answer was streamed (text/event-stream)');
  }
  for (const e of egress) reasons.push(`outside traffic: ${e}`);
  const ignored = [...new Set(answered.map((e) => e.ignored).filter((v): v is string => v !== null))];
  return { client: x.client, model: x.model, c: x.c, ok: reasons.length === 0, reasons: [...new Set(reasons)], ms, billed: ledger.billed, ignored, refusals, egress };
}

/**
 * Every answered completion settled with exactly one charge row equal to its reservation's charge;
 * no reservation of the key the tap did not see answered; token totals equal what the client reported.
 */
async function ledgerCheck(db: Db, keyId: string, since: Date, answered: Exchange[], verdict: ClientVerdict): Promise<{ problems: string[]; billed: string }> {
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
  const mine = reservations.filter((r) => ids.includes(r.id));
  const input = mine.reduce((n, r) => n + (r.prompt_tokens ?? 0), 0);
  const output = mine.reduce((n, r) => n + (r.completion_tokens ?? 0), 0);
  if (verdict.usage && ids.length > 0 && (input !== verdict.usage.input || output !== verdict.usage.output)) {
    problems.push(`usage: client reported ${verdict.usage.input} in / ${verdict.usage.output} out, gateway billed ${input} / ${output} over ${ids.length} request(s)`);
  }
  return { problems, billed: `${ids.length} req, ${input} in / ${output} out` };
}

/** The gateway's error message, with the offending value from the request body when `param` names one. */
export function errorSummary(e: Exchange): string {
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
export function requestShape(body: unknown): string {
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

