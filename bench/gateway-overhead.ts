import { execFileSync } from 'node:child_process';
import { recordRun } from './history';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Pool, request } from 'undici';
import { createAccount } from '../services/accounts/accounts';
import { createKey } from '../services/keys/keys';
import { createDb, type Db } from '../platform/db';
import { sleep, spawnChild, stopAll, systemEnv, TSX_BIN, type Child } from './children';
import { cpuBetween, cpuSecondsBetween, cpuSnapshot, type CpuGroups, type CpuSnapshot } from './cpu';
import { fixed, ms3, nsToMs, num, summarize, table, type Summary } from './stats';

// Gateway overhead benchmark (DESIGN.md section 6). Starts the simulator (bench/simulator.ts), the
// whole system (`main/start.ts`, using that simulator) and a bare Koa proxy as child processes on
// free loopback ports, so neither proxy shares its event loop with the simulator; measures direct-to-simulator
// vs gateway (and bare proxy) calls, reads settlement times from PostgreSQL, prints a report
// and appends it to bench/history/<date>-gateway-overhead.md. `npm run bench`. Bounded in time; stops its children on
// every exit path.

const ROOT = path.resolve(__dirname, '..');
// BENCH_RESULTS_FILE: somewhere else for trial runs with reduced knobs or profiling.
const T0 = Date.now();


// Knobs (defaults are the committed benchmark; smaller values only for trying the script out).
const P = {
  warmup: num('BENCH_WARMUP', 300),
  c1Iterations: num('BENCH_C1_ITERATIONS', 2000),
  c16Requests: num('BENCH_C16_REQUESTS', 4000),
  throughputSeconds: num('BENCH_THROUGHPUT_SECONDS', 10),
  rate: num('BENCH_RATE', 500),
  rateSeconds: num('BENCH_RATE_SECONDS', 10),
  streamIterations: num('BENCH_STREAM_ITERATIONS', 500),
  budgetMs: num('BENCH_BUDGET_MS', 280_000),
};
/** The wait for every reservation to settle after a c=64 or fixed-rate gateway phase. */
const SETTLE_TIMEOUT_MS = 120_000;
/** A shorter wait between the latency phases, so one phase's settlement load stays out of the next. */
const QUIESCE_TIMEOUT_MS = 5_000;
const SHUTDOWN_RESERVE_MS = 25_000;
const REQUEST_TIMEOUT_MS = 30_000;
const OPEN_LOOP_CAP = 256;

const deadline = T0 + P.budgetMs;
/** Time left for measuring, keeping a reserve for stopping the children. */
const remaining = () => deadline - SHUTDOWN_RESERVE_MS - Date.now();

const log = (msg: string) => process.stderr.write(`[bench +${((Date.now() - T0) / 1000).toFixed(0)}s] ${msg}\n`);

const MESSAGES = [{ role: 'user', content: 'benchmark hello' }];
const GATEWAY_MODEL = 'sim-gpt';
const UPSTREAM_MODEL = 'sim-gpt-2026-01-15';
const body = (model: string, stream = false) => JSON.stringify({ model, messages: MESSAGES, max_tokens: 16, ...(stream ? { stream: true } : {}) });

interface Target {
  name: string;
  pool: Pool;
  headers: Record<string, string>;
  body: string;
  streamBody: string;
  /** keys used in turn (requests spread over many accounts); else the headers' own */
  keys?: string[];
}

let keyTurn = 0;

interface Sample {
  ok: boolean;
  status: number;
  ms: number;
  ttfbMs: number;
  /** x-gateway-request-id, gateway only */
  id: string | null;
  /** Date.now() when the response body ended */
  endWall: number;
  error?: string;
}

async function call(t: Target, stream = false): Promise<Sample> {
  const start = process.hrtime.bigint();
  try {
    const res = await t.pool.request({
      path: '/v1/chat/completions',
      method: 'POST',
      headers: t.keys ? { ...t.headers, authorization: `Bearer ${t.keys[keyTurn++ % t.keys.length]}` } : t.headers,
      body: stream ? t.streamBody : t.body,
      headersTimeout: REQUEST_TIMEOUT_MS,
      bodyTimeout: REQUEST_TIMEOUT_MS,
    });
    let first: bigint | null = null;
    for await (const _chunk of res.body) first ??= process.hrtime.bigint();
    const end = process.hrtime.bigint();
    const endWall = Date.now();
    const id = res.headers['x-gateway-request-id'];
    return {
      ok: res.statusCode === 200,
      status: res.statusCode,
      ms: nsToMs(end - start),
      ttfbMs: first === null ? NaN : nsToMs(first - start),
      id: typeof id === 'string' ? id : null,
      endWall,
    };
  } catch (err) {
    return { ok: false, status: 0, ms: nsToMs(process.hrtime.bigint() - start), ttfbMs: NaN, id: null, endWall: Date.now(), error: String(err) };
  }
}

/** Latencies, errors and (gateway) response-end times of one target in one phase. */
class Recorder {
  readonly ms: number[] = [];
  readonly ttfb: number[] = [];
  readonly ends = new Map<string, number>();
  errors = 0;
  lastError = '';
  add(s: Sample): void {
    if (s.id) this.ends.set(s.id, s.endWall);
    if (!s.ok) {
      this.errors++;
      this.lastError = s.error ?? `HTTP ${s.status}`;
      return;
    }
    this.ms.push(s.ms);
    this.ttfb.push(s.ttfbMs);
  }
}

/**
 * `iterations` iterations of one call to each target, rotating which goes first, run by
 * `concurrency` workers; stops early at `limitMs`.
 */
async function interleaved(targets: Target[], iterations: number, concurrency: number, limitMs: number, stream = false) {
  const rec = Object.fromEntries(targets.map((t) => [t.name, new Recorder()]));
  const stopAt = Date.now() + limitMs;
  let next = 0;
  const worker = async () => {
    while (next < iterations && Date.now() < stopAt) {
      const i = next++;
      const first = i % targets.length;
      for (const t of [...targets.slice(first), ...targets.slice(0, first)]) rec[t.name].add(await call(t, stream));
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { rec: rec as Record<string, Recorder>, completed: Math.min(next, iterations), cut: next < iterations };
}

/** Closed loop: `concurrency` workers calling one target back to back for `seconds`. */
async function closedLoop(t: Target, concurrency: number, seconds: number) {
  const rec = new Recorder();
  const start = performance.now();
  const end = start + seconds * 1000;
  let inWindow = 0;
  const worker = async () => {
    while (performance.now() < end) {
      const s = await call(t);
      rec.add(s);
      if (s.ok && performance.now() <= end) inWindow++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { rec, rps: inWindow / seconds, drainedAfterMs: performance.now() - end, endWall: Date.now() };
}

/** Open loop: requests fired on a fixed schedule; a request due while `cap` are in flight is dropped. */
async function openLoop(t: Target, rate: number, seconds: number, cap: number) {
  const rec = new Recorder();
  const total = Math.round(rate * seconds);
  const interval = 1000 / rate;
  const start = performance.now();
  let next = 0;
  let inFlight = 0;
  let dropped = 0;
  const pending = new Set<Promise<void>>();
  while (next < total && performance.now() < start + seconds * 1000 + 5000) {
    const now = performance.now();
    while (next < total && start + next * interval <= now) {
      next++;
      if (inFlight >= cap) {
        dropped++;
        continue;
      }
      inFlight++;
      const p: Promise<void> = call(t).then((s) => {
        rec.add(s);
        inFlight--;
        pending.delete(p);
      });
      pending.add(p);
    }
    await sleep(1);
  }
  const scheduledMs = performance.now() - start;
  await Promise.all(pending);
  const ok = rec.ms.length;
  return { rec, offered: total, sent: next - dropped, dropped, unsent: total - next, scheduledMs, achievedRps: ok / ((performance.now() - start) / 1000), endWall: Date.now() };
}

// ---------------------------------------------------------------------------------------------

async function waitHttp(url: string, child: Child, timeoutMs: number): Promise<void> {
  const stopAt = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < stopAt) {
    if (child.exited()) throw new Error(`${child.name} exited (${await child.exit}) before ${url} answered:\n${child.output()}`);
    try {
      const res = await request(url, { headersTimeout: 3000, bodyTimeout: 3000 });
      last = `HTTP ${res.statusCode} ${await res.body.text()}`;
      if (res.statusCode === 200) return;
    } catch (err) {
      last = String(err);
    }
    await sleep(500);
  }
  throw new Error(`${url} not ready within ${timeoutMs} ms (last: ${last}):\n${child.output()}`);
}

async function heldCount(db: Db, accountIds: string[]): Promise<number> {
  const row = await db('reservations').whereIn('account_id', accountIds).where({ status: 'held' }).count<{ count: number }[]>('* as count').first();
  return Number(row?.count ?? 0);
}

/** Statements PostgreSQL ran since the last reset (pg_stat_statements), the benchmark's own left out. */
interface Statements {
  calls: number;
  /** WAL the statements wrote (pg_stat_statements): records, full-page images, bytes */
  wal: { records: number; fpi: number; bytes: number };
  top: Array<{ calls: number; meanMs: number; totalMs: number; walBytes: number; query: string }>;
}

async function resetStatements(db: Db): Promise<void> {
  await db.raw('SELECT pg_stat_statements_reset()');
}

async function statementsSince(db: Db): Promise<Statements> {
  const own = `query NOT ILIKE '%pg_stat_statements%' AND query NOT ILIKE '%count(*) as "count" from "reservations"%'`;
  const total = await db.raw(
    `SELECT COALESCE(sum(calls), 0)::bigint AS calls, COALESCE(sum(wal_records), 0)::bigint AS records, COALESCE(sum(wal_fpi), 0)::bigint AS fpi, COALESCE(sum(wal_bytes), 0)::bigint AS bytes
     FROM pg_stat_statements WHERE ${own}`,
  );
  const top = await db.raw(
    `SELECT calls, mean_exec_time AS mean, total_exec_time AS total, wal_bytes::bigint AS wal, regexp_replace(left(query, 110), '\\s+', ' ', 'g') AS query
     FROM pg_stat_statements WHERE ${own} ORDER BY total_exec_time DESC LIMIT 8`,
  );
  const t = total.rows[0];
  return {
    calls: Number(t.calls),
    wal: { records: Number(t.records), fpi: Number(t.fpi), bytes: Number(t.bytes) },
    top: top.rows.map((r: { calls: string; mean: number; total: number; wal: string; query: string }) => ({ calls: Number(r.calls), meanMs: r.mean, totalMs: r.total, walBytes: Number(r.wal), query: r.query })),
  };
}

interface SettleWait {
  ms: number;
  held: number;
  timedOut: boolean;
}

/** Polls until no reservation of the accounts is held, for at most `limitMs`. */
async function waitSettled(db: Db, accountIds: string[], limitMs: number): Promise<SettleWait> {
  const start = Date.now();
  const limit = Math.max(0, limitMs);
  for (;;) {
    const held = await heldCount(db, accountIds);
    const ms = Date.now() - start;
    if (held === 0) return { ms, held, timedOut: false };
    if (ms >= limit) return { ms, held, timedOut: true };
    await sleep(200);
  }
}

interface Row {
  status: string;
  settledMs: number | null;
}

async function reservationRows(db: Db, accountIds: string[]): Promise<Map<string, Row>> {
  const rows: Array<{ id: string; status: string; settled_ms: string | null }> = await db('reservations')
    .whereIn('account_id', accountIds)
    .select('id', 'status', db.raw('extract(epoch from settled_at) * 1000 as settled_ms'));
  return new Map(rows.map((r) => [r.id, { status: r.status, settledMs: r.settled_ms === null ? null : Number(r.settled_ms) }]));
}

interface SettlementStats {
  requests: number;
  settled: number;
  unsettled: number;
  statuses: string;
  /** over all requests; an unsettled one counts as +Infinity (its lag is at least `unsettledAgeMs`) */
  lag: Summary;
  unsettledAgeMs: number;
  /** settled rows / (last settled_at − first settled_at) */
  settledPerSecond: number;
  /** rows settled after the phase's last response / time from then to the last settled_at */
  drainPerSecond: number;
  drained: number;
}

function settlement(ends: Map<string, number>, rows: Map<string, Row>, phaseEndWall: number, queriedAt: number): SettlementStats {
  const lags: number[] = [];
  let unsettledAgeMs = Infinity;
  const settledAt: number[] = [];
  const statuses = new Map<string, number>();
  let unsettled = 0;
  for (const [id, end] of ends) {
    const r = rows.get(id);
    const status = r?.status ?? 'missing';
    statuses.set(status, (statuses.get(status) ?? 0) + 1);
    if (!r || r.settledMs === null) {
      unsettled++;
      lags.push(Infinity);
      unsettledAgeMs = Math.min(unsettledAgeMs, queriedAt - end);
      continue;
    }
    lags.push(r.settledMs - end);
    settledAt.push(r.settledMs);
  }
  settledAt.sort((a, b) => a - b);
  const span = settledAt.length > 1 ? (settledAt[settledAt.length - 1] - settledAt[0]) / 1000 : NaN;
  const after = settledAt.filter((t) => t > phaseEndWall);
  const drainSpan = after.length ? (after[after.length - 1] - phaseEndWall) / 1000 : NaN;
  return {
    requests: ends.size,
    settled: settledAt.length,
    unsettled,
    statuses: [...statuses].map(([k, v]) => `${k} ${v}`).join(', '),
    lag: summarize(lags),
    unsettledAgeMs,
    settledPerSecond: settledAt.length === 0 ? 0 : settledAt.length / span,
    drainPerSecond: after.length >= 100 ? after.length / drainSpan : NaN,
    drained: after.length,
  };
}

function git(args: string[]): string {
  try {
    return execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

function nproc(): string {
  try {
    return execFileSync('nproc', { encoding: 'utf8' }).trim();
  } catch {
    return String(os.availableParallelism());
  }
}

// ---------------------------------------------------------------------------------------------

/** The CPU category of the system process (gateway, worker; the simulator runs apart): bench/cpu.ts. */
const SYSTEM = 'system node (gateway+worker)';

/** One latency phase; `bare` is the bare proxy, measured in the same interleaving at c=1. */
interface Latency {
  direct: Summary;
  gateway: Summary;
  bare?: Summary;
  errors: string;
  cut: boolean;
}

interface Report {
  notes: string[];
  c1?: Latency;
  c16?: Latency;
  stream?: Latency;
  rounds: Array<{ direct: number; bare: number; gateway: number; errors: string; settle: SettleWait; gatewayEndWall: number; gatewayEnds: Map<string, number> }>;
  rate?: { offered: number; sent: number; dropped: number; unsent: number; achievedRps: number; errors: string; settle: SettleWait; ends: Map<string, number>; endWall: number };
  c1Ends?: Map<string, number>;
  c1EndWall?: number;
  settles: Array<[string, SettleWait]>;
  cpu: Array<[string, Array<[string, number]>]>;
  /** CPU seconds per category from a gateway phase's start until all its requests settled, and how many there were */
  perSettled: Array<{ label: string; requests: number; cpu: Array<[string, number]>; statements?: Statements }>;
  /** c=64 with requests spread over 1,000 accounts (one key each) */
  spread?: { rps: number; bare: number; errors: string; settle: SettleWait; endWall: number; ends: Map<string, number> };
  shutdown?: string[];
}

async function main(): Promise<number> {
  const commit = git(['rev-parse', '--short', 'HEAD']);
  const dirty = git(['status', '--porcelain']);
  const load0 = os.loadavg();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-bench-'));
  fs.chmodSync(dataDir, 0o755); // as root, the embedded PostgreSQL runs as the `postgres` user
  let db: Db | undefined;
  const pools: Pool[] = [];
  const report: Report = { notes: [], rounds: [], settles: [], cpu: [], perSettled: [] };
  try {
    const { env, gatewayPort, pgPort, simPort, ports } = await systemEnv(dataDir, 2, { PG_STAT_STATEMENTS: '1' });
    const barePort = ports[1];
    // BENCH_CPU_PROF_DIR: profile the system's node process (tsx passes the flags on to node;
    // the profile is written when the process exits).
    const profDir = process.env.BENCH_CPU_PROF_DIR;
    const nodeFlags = profDir ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(profDir)}`] : [];
    if (profDir) report.notes.push('CPU profiling of the system process was on (BENCH_CPU_PROF_DIR): figures are slower than normal.');
    // `npx tsx` resolves to this binary; running it directly lets SIGTERM reach tsx, which relays it.
    log(`starting the simulator and the system (DATA_DIR ${dataDir})`);
    const simulator = spawnChild('bench/simulator.ts', TSX_BIN, ['bench/simulator.ts'], { ...process.env, SIMULATOR_PORT: String(simPort) }, ROOT);
    await waitHttp(`http://127.0.0.1:${simPort}/v1/models`, simulator, 30_000);
    const system = spawnChild('main/start.ts', TSX_BIN, [...nodeFlags, 'main/start.ts'], env, ROOT);
    const bare = spawnChild('bench/bare-proxy.ts', TSX_BIN, ['bench/bare-proxy.ts'], { ...process.env, BARE_PORT: String(barePort), UPSTREAM_URL: `http://127.0.0.1:${simPort}` }, ROOT);
    const gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
    const simUrl = `http://127.0.0.1:${simPort}`;
    const bareUrl = `http://127.0.0.1:${barePort}`;
    await waitHttp(`${gatewayUrl}/healthz`, system, Math.min(150_000, remaining()));
    await waitHttp(`${bareUrl}/healthz`, bare, 30_000);
    log('system ready');
    const groups: CpuGroups = { systemPgid: system.pid, barePgid: bare.pid, simulatorPgid: simulator.pid };

    db = createDb(`postgres://postgres:postgres@127.0.0.1:${pgPort}/gateway`, 4);
    const account = await createAccount(db, { name: `bench-${new Date().toISOString()}`, tier: 'pro', credits: '1000000' });
    const { key } = await createKey(db, { accountId: account.id, label: 'bench' });
    await db.raw('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    // The second shape: 1,000 accounts, one key each, requests spread over them in turn.
    const spreadAccounts: string[] = [];
    const spreadKeys: string[] = [];
    for (let i = 0; i < 1000; i++) {
      const a = await createAccount(db, { name: `bench-spread-${i}-${Date.now()}`, tier: 'pro', credits: '1000' });
      spreadAccounts.push(a.id);
      spreadKeys.push((await createKey(db, { accountId: a.id, label: 'bench' })).key);
    }

    const pool = (url: string) => {
      const p = new Pool(url, { connections: 300, pipelining: 1, keepAliveTimeout: 60_000 });
      pools.push(p);
      return p;
    };
    const json = { 'content-type': 'application/json' };
    const direct: Target = { name: 'direct', pool: pool(simUrl), headers: json, body: body(UPSTREAM_MODEL), streamBody: body(UPSTREAM_MODEL, true) };
    const gateway: Target = { name: 'gateway', pool: pool(gatewayUrl), headers: { ...json, authorization: `Bearer ${key}` }, body: body(GATEWAY_MODEL), streamBody: body(GATEWAY_MODEL, true) };
    const spread: Target = { ...gateway, name: 'gateway, 1,000 accounts', keys: spreadKeys };
    const bareProxy: Target = { name: 'bare proxy', pool: pool(bareUrl), headers: json, body: body(GATEWAY_MODEL), streamBody: body(GATEWAY_MODEL, true) };

    // Sanity: each target answers a chat completion (a broken setup must not produce figures).
    for (const t of [direct, gateway, bareProxy]) {
      const res = await t.pool.request({ path: '/v1/chat/completions', method: 'POST', headers: t.headers, body: t.body, headersTimeout: REQUEST_TIMEOUT_MS });
      const text = await res.body.text();
      if (res.statusCode !== 200 || !text.includes('"choices"')) throw new Error(`${t.name}: HTTP ${res.statusCode} ${text.slice(0, 300)}`);
      if (t === gateway && !res.headers['x-gateway-request-id']) throw new Error('gateway: no x-gateway-request-id header');
    }

    const errors = (r: Record<string, Recorder>) =>
      Object.entries(r)
        .map(([k, v]) => `${k} ${v.errors}${v.errors ? ` (${v.lastError.slice(0, 120)})` : ''}`)
        .join(', ');
    // Time each later phase needs at most; a settlement wait only gets what they leave over.
    const roundMs = 3 * (P.throughputSeconds * 1000 + 2_000) + 2_000;
    // The fixed-rate phase keeps 30 s of its plan for the settlement wait that follows it.
    const plan = { c16: 30_000, stream: 20_000, rounds: 2 * roundMs, rate: P.rateSeconds * 1000 + 35_000 };
    const settle = async (label: string, cap: number, laterPhasesMs: number) => {
      const s = await waitSettled(db!, [account.id, ...spreadAccounts], Math.min(cap, remaining() - laterPhasesMs - 1_000));
      report.settles.push([label, s]);
      log(`settle wait after ${label}: ${s.ms} ms${s.timedOut ? `, gave up with ${s.held} held` : ''}`);
      return s;
    };
    const cpuPhase = async <T>(label: string, fn: () => Promise<T>): Promise<T> => {
      const a: CpuSnapshot = cpuSnapshot(groups);
      const out = await fn();
      report.cpu.push([label, cpuBetween(a, cpuSnapshot(groups))]);
      return out;
    };
    const skip = (what: string) => report.notes.push(`${what}: not measured (time budget used up).`);

    // a. c=1, non-streaming.
    const afterC1 = plan.c16 + plan.stream + plan.rounds + plan.rate;
    if (remaining() > afterC1 + 20_000) {
      log(`c=1: warm-up (${P.warmup} each), then ${P.c1Iterations} interleaved iterations`);
      await interleaved([direct, bareProxy, gateway], P.warmup, 1, 15_000);
      await settle('c=1 warm-up', QUIESCE_TIMEOUT_MS, afterC1 + 45_000);
      const r = await interleaved([direct, bareProxy, gateway], P.c1Iterations, 1, Math.min(45_000, remaining() - afterC1));
      report.c1EndWall = Date.now();
      report.c1 = { direct: summarize(r.rec.direct.ms), gateway: summarize(r.rec.gateway.ms), bare: summarize(r.rec[bareProxy.name].ms), errors: errors(r.rec), cut: r.cut };
      report.c1Ends = r.rec.gateway.ends;
      await settle('c=1', QUIESCE_TIMEOUT_MS, afterC1);
    } else skip('c=1 latency');

    // b. c=16, non-streaming.
    const afterC16 = plan.stream + plan.rounds + plan.rate;
    if (remaining() > afterC16 + 10_000) {
      log(`c=16: ${P.c16Requests} requests each`);
      const r = await interleaved([direct, gateway], P.c16Requests, 16, Math.min(plan.c16, remaining() - afterC16));
      report.c16 = { direct: summarize(r.rec.direct.ms), gateway: summarize(r.rec.gateway.ms), errors: errors(r.rec), cut: r.cut };
      await settle('c=16', QUIESCE_TIMEOUT_MS, afterC16);
    } else skip('c=16 latency');

    // f. Streaming time to first byte, c=1.
    const afterStream = plan.rounds + plan.rate;
    if (remaining() > afterStream + 10_000) {
      log(`streaming TTFB: ${P.streamIterations} interleaved iterations`);
      await interleaved([direct, bareProxy, gateway], 50, 1, 5_000, true);
      const r = await interleaved([direct, bareProxy, gateway], P.streamIterations, 1, Math.min(plan.stream - 5_000, remaining() - afterStream), true);
      report.stream = { direct: summarize(r.rec.direct.ttfb), gateway: summarize(r.rec.gateway.ttfb), bare: summarize(r.rec[bareProxy.name].ttfb), errors: errors(r.rec), cut: r.cut };
      await settle('streaming', QUIESCE_TIMEOUT_MS, afterStream);
    } else skip('streaming TTFB');

    // c. Throughput at c=64, two rounds of direct, bare proxy, gateway.
    await interleaved([bareProxy], 300, 16, 5_000); // the bare proxy's JIT warm-up
    for (let round = 1; round <= 2; round++) {
      const later = (2 - round) * roundMs + plan.rate;
      if (remaining() < roundMs + later) {
        skip(`c=64 throughput round ${round}`);
        continue;
      }
      log(`c=64 round ${round}: ${P.throughputSeconds} s each for direct, bare proxy, gateway`);
      const d = await cpuPhase(`c=64 direct, round ${round}`, () => closedLoop(direct, 64, P.throughputSeconds));
      const b = await cpuPhase(`c=64 bare proxy, round ${round}`, () => closedLoop(bareProxy, 64, P.throughputSeconds));
      const gCpu = cpuSnapshot(groups);
      await resetStatements(db);
      const g = await cpuPhase(`c=64 gateway, round ${round}`, () => closedLoop(gateway, 64, P.throughputSeconds));
      const s = await settle(`c=64 round ${round}`, SETTLE_TIMEOUT_MS, later);
      report.perSettled.push({ label: `c=64 gateway, round ${round}`, requests: g.rec.ms.length, cpu: cpuSecondsBetween(gCpu, cpuSnapshot(groups)), statements: await statementsSince(db) });
      report.rounds.push({
        direct: d.rps,
        bare: b.rps,
        gateway: g.rps,
        errors: errors({ direct: d.rec, 'bare proxy': b.rec, gateway: g.rec }),
        settle: s,
        gatewayEndWall: g.endWall,
        gatewayEnds: g.rec.ends,
      });
    }

    // d. c=64 spread over 1,000 accounts (no single hot account row).
    if (remaining() > P.throughputSeconds * 1000 + 20_000 + plan.rate) {
      log(`c=64 over 1,000 accounts: ${P.throughputSeconds} s`);
      const sCpu = cpuSnapshot(groups);
      await resetStatements(db);
      const g = await cpuPhase('c=64 gateway, 1,000 accounts', () => closedLoop(spread, 64, P.throughputSeconds));
      const s = await settle('c=64 over 1,000 accounts', SETTLE_TIMEOUT_MS, plan.rate);
      report.perSettled.push({ label: 'c=64 gateway, 1,000 accounts', requests: g.rec.ms.length, cpu: cpuSecondsBetween(sCpu, cpuSnapshot(groups)), statements: await statementsSince(db) });
      report.spread = { rps: g.rps, bare: report.rounds.length ? report.rounds.reduce((x, r) => x + r.bare, 0) / report.rounds.length : NaN, errors: errors({ gateway: g.rec }), settle: s, endWall: g.endWall, ends: g.rec.ends };
    } else skip('c=64 over 1,000 accounts');

    // e. Fixed offered rate, open loop.
    if (remaining() > P.rateSeconds * 1000 + 5_000) {
      log(`fixed rate: ${P.rate} req/s for ${P.rateSeconds} s (cap ${OPEN_LOOP_CAP} in flight)`);
      const rCpu = cpuSnapshot(groups);
      await resetStatements(db);
      const r = await cpuPhase(`${P.rate} req/s gateway`, () => openLoop(gateway, P.rate, P.rateSeconds, OPEN_LOOP_CAP));
      const s = await settle(`${P.rate} req/s`, SETTLE_TIMEOUT_MS, 0);
      report.perSettled.push({ label: `${P.rate} req/s gateway`, requests: r.rec.ms.length, cpu: cpuSecondsBetween(rCpu, cpuSnapshot(groups)), statements: await statementsSince(db) });
      report.rate = { offered: r.offered, sent: r.sent, dropped: r.dropped, unsent: r.unsent, achievedRps: r.achievedRps, errors: errors({ gateway: r.rec }), settle: s, ends: r.rec.ends, endWall: r.endWall };
    } else skip('fixed-rate phase');

    const rows = await reservationRows(db, [account.id, ...spreadAccounts]);
    const queriedAt = Date.now();
    const load1 = os.loadavg();
    await Promise.all(pools.map((p) => p.destroy().catch(() => {})));
    await db.destroy();
    db = undefined;
    log('stopping children');
    const problems = system.logProblems();
    report.notes.push(
      `System log (LOG_LEVEL=warn) during the run: ${problems.warn} warn and ${problems.error} error line(s)${problems.last ? `; last: ${problems.last}` : ''}.`,
    );
    report.shutdown = await stopAll();
    for (const line of report.shutdown) log(line);
    const text = render(report, rows, queriedAt, { commit, dirty, load0, load1 });
    process.stdout.write(text + '\n');
    log(`appended to ${path.relative(ROOT, recordRun('gateway-overhead', text))}`);
    return 0;
  } finally {
    await Promise.all(pools.map((p) => p.destroy().catch(() => {})));
    await db?.destroy().catch(() => {});
    const left = await stopAll();
    for (const line of left) log(line);
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------

/** A lag percentile; one that falls on an unsettled request shows the lower bound. */
const lagText = (st: SettlementStats, v: number) => (v === Infinity ? `> ${fixed(st.unsettledAgeMs, 0)} (unsettled)` : fixed(v, 0));

function render(r: Report, rows: Map<string, Row>, queriedAt: number, meta: { commit: string; dirty: string; load0: number[]; load1: number[] }): string {
  const out: string[] = [];
  const paths = meta.dirty ? meta.dirty.split('\n').map((l) => l.replace(/^\s*\S+\s/, '')) : [];
  const dirtyNote = paths.length ? ` (uncommitted: ${paths.slice(0, 8).join(', ')}${paths.length > 8 ? ', …' : ''})` : '';
  out.push(`## ${new Date().toISOString()} · commit ${meta.commit}${dirtyNote}`);
  out.push('');
  out.push(
    `node ${process.version} · nproc ${nproc()} · ${os.cpus()[0]?.model ?? 'cpu ?'} · load average ${meta.load0.map((v) => v.toFixed(2)).join('/')} at start, ` +
      `${meta.load1.map((v) => v.toFixed(2)).join('/')} at end · everything on loopback on this machine; simulator (a process of its own) with zero added latency · ` +
      `${P.warmup} warm-up, ${P.c1Iterations} c=1 iterations, ${P.c16Requests} c=16 requests each, c=64 ${P.throughputSeconds} s per target per round, ` +
      `${P.rate} req/s × ${P.rateSeconds} s open loop, ${P.streamIterations} streaming iterations`,
  );
  out.push('');

  const lat = (label: string, x: Latency | undefined) =>
    x
      ? [
          label,
          `${ms3(x.direct.p50)} / ${ms3(x.direct.p90)} / ${ms3(x.direct.p99)}`,
          `${ms3(x.gateway.p50)} / ${ms3(x.gateway.p90)} / ${ms3(x.gateway.p99)}`,
          ms3(x.gateway.p50 - x.direct.p50),
          ms3(x.gateway.p99 - x.direct.p99),
          x.bare ? `${ms3(x.bare.p50 - x.direct.p50)} / ${ms3(x.bare.p99 - x.direct.p99)}` : '—',
          `${x.direct.n} / ${x.gateway.n}${x.cut ? ' (cut short by the time limit)' : ''}`,
          x.errors,
        ]
      : [label, 'not measured', '', '', '', '', '', ''];
  out.push('### Latency (ms): direct = client → simulator, gateway = client → gateway → simulator');
  out.push('');
  out.push(
    table(
      ['phase', 'direct p50 / p90 / p99', 'gateway p50 / p90 / p99', 'added p50', 'added p99', 'bare proxy added p50 / p99', 'samples (direct / gateway)', 'errors'],
      [lat('non-streaming, c=1', r.c1), lat('non-streaming, c=16', r.c16), lat('streaming TTFB, c=1', r.stream)],
    ),
  );
  out.push('');

  out.push('### Throughput at c=64 (requests/s, closed loop)');
  out.push('');
  const tputRows = r.rounds.map((x, i) => {
    const st = settlement(x.gatewayEnds, rows, x.gatewayEndWall, queriedAt);
    return [
      `round ${i + 1}`,
      fixed(x.direct, 0),
      fixed(x.bare, 0),
      fixed(x.gateway, 0),
      `${fixed((x.gateway / x.bare) * 100)} %`,
      x.settle.timedOut ? `NOT settled: ${x.settle.held} held after ${x.settle.ms} ms` : `all settled ${x.settle.ms} ms after the phase`,
      `${st.statuses}`,
      x.errors,
    ];
  });
  if (r.spread) {
    const st = settlement(r.spread.ends, rows, r.spread.endWall, queriedAt);
    tputRows.push(['1,000 accounts', '', fixed(r.spread.bare, 0), fixed(r.spread.rps, 0), `${fixed((r.spread.rps / r.spread.bare) * 100)} %`, r.spread.settle.timedOut ? `NOT settled: ${r.spread.settle.held} held after ${r.spread.settle.ms} ms` : `all settled ${r.spread.settle.ms} ms after the phase`, st.statuses, r.spread.errors]);
  }
  out.push(tputRows.length ? table(['', 'direct', 'bare proxy', 'gateway', 'gateway / bare', 'settlement', 'reservations', 'errors'], tputRows) : 'not measured');
  out.push('');

  out.push('### Settlement (settled_at − response end, from PostgreSQL rows of this run)');
  out.push('');
  const setRows: Array<Array<string | number>> = [];
  const addSet = (label: string, ends: Map<string, number> | undefined, endWall: number | undefined, extra = '') => {
    if (!ends || endWall === undefined) return setRows.push([label, 'not measured', '', '', '', '', '']);
    const st = settlement(ends, rows, endWall, queriedAt);
    setRows.push([label, `${st.settled} / ${st.requests}${st.unsettled ? ` (${st.unsettled} NOT settled)` : ''}`, lagText(st, st.lag.p50), lagText(st, st.lag.p99), fixed(st.settledPerSecond, 0), Number.isFinite(st.drainPerSecond) ? `${fixed(st.drainPerSecond, 0)} (${st.drained} rows)` : '—', extra]);
  };
  addSet('c=1 phase', r.c1Ends, r.c1EndWall);
  r.rounds.forEach((x, i) => addSet(`c=64 round ${i + 1}`, x.gatewayEnds, x.gatewayEndWall));
  if (r.rate) {
    addSet(`${P.rate} req/s open loop`, r.rate.ends, r.rate.endWall, `offered ${r.rate.offered}, sent ${r.rate.sent}, dropped at cap ${r.rate.dropped}, unsent ${r.rate.unsent}; ${fixed(r.rate.achievedRps, 0)} ok responses/s; errors: ${r.rate.errors}`);
  } else addSet(`${P.rate} req/s open loop`, undefined, undefined);
  out.push(table(['phase', 'settled / requests', 'lag p50 ms', 'lag p99 ms', 'settled/s (first→last settled_at)', 'settled/s after the phase ended (backlog drain)', 'notes'], setRows));
  out.push('');
  const allSettled = [...rows.values()].map((x) => x.settledMs).filter((x): x is number => x !== null).sort((a, b) => a - b);
  const allSpan = allSettled.length > 1 ? (allSettled[allSettled.length - 1] - allSettled[0]) / 1000 : NaN;
  out.push(`All reservations of the run (warm-ups included): ${allSettled.length} of ${rows.size} settled; ${fixed(allSettled.length / allSpan, 1)} settled/s from the first to the last settled_at (${fixed(allSpan, 0)} s).`);
  out.push('');
  out.push(`Settlement waits (until no 'held' row of the account): ${r.settles.map(([k, s]) => `${k} ${s.timedOut ? `TIMED OUT (${s.held} held)` : `${s.ms} ms`}`).join(' · ')}`);
  out.push('');

  if (r.cpu.length) {
    out.push('### CPU (cores used, from /proc) during the load phases');
    out.push('');
    const cats = [...new Set(r.cpu.flatMap(([, v]) => v.map(([k]) => k)))];
    out.push(table(['phase', ...cats], r.cpu.map(([label, v]) => [label, ...cats.map((c) => fixed(v.find(([k]) => k === c)?.[1] ?? 0, 2))])));
    out.push('');
  }

  const perSettled = r.perSettled.filter((x) => x.requests > 0).map((x) => {
    const ms = (k: string) => ((x.cpu.find(([c]) => c === k)?.[1] ?? 0) * 1000) / x.requests;
    const system = ms(SYSTEM);
    return { label: x.label, requests: x.requests, system, temporal: ms('temporal dev server'), postgres: ms('postgres'), total: system + ms('temporal dev server') + ms('postgres'), statements: x.statements };
  });
  if (perSettled.length) {
    out.push('### CPU per settled request (ms, from the phase start until every request of it settled)');
    out.push('');
    out.push(
      table(
        ['phase', 'requests', 'gateway + worker', 'temporal dev server', 'postgres', 'total'],
        perSettled.map((x) => [x.label, x.requests, fixed(x.system, 2), fixed(x.temporal, 2), fixed(x.postgres, 2), fixed(x.total, 2)]),
      ),
    );
    out.push('');
    out.push("The gateway + worker column is the system process's CPU (the simulator runs in a process of its own and is not counted).");
    out.push('');
    const withStatements = perSettled.filter((x) => x.statements);
    if (withStatements.length) {
      out.push('### PostgreSQL statements per settled request (pg_stat_statements, from the phase start until every request of it settled; the benchmark\'s own queries left out)');
      out.push('');
      out.push(
        table(
          ['phase', 'requests', 'statements', 'per request', 'WAL bytes per request', 'WAL records per request', 'full-page images per request'],
          withStatements.map((x) => [x.label, x.requests, x.statements!.calls, fixed(x.statements!.calls / x.requests, 3), fixed(x.statements!.wal.bytes / x.requests, 0), fixed(x.statements!.wal.records / x.requests, 1), fixed(x.statements!.wal.fpi / x.requests, 2)]),
        ),
      );
      out.push('');
      for (const x of withStatements) {
        out.push(`Top statements by total time, ${x.label}:`);
        out.push('');
        out.push(table(['calls', 'mean ms', 'total ms', 'WAL bytes per call', 'statement'], x.statements!.top.map((t) => [t.calls, fixed(t.meanMs, 2), fixed(t.totalMs, 0), fixed(t.walBytes / Math.max(1, t.calls), 0), '`' + t.query.replace(/[|`]/g, ' ') + '`'])));
        out.push('');
      }
    }
  }
  const rateCpu = perSettled.find((x) => x.label === `${P.rate} req/s gateway`);

  // Targets of DESIGN.md section 6 next to the measured values.
  const verdict = (ok: boolean | null) => (ok === null ? 'not measured' : ok ? 'yes' : 'NO');
  const c1p50 = r.c1 ? r.c1.gateway.p50 - r.c1.direct.p50 : NaN;
  const c1p99 = r.c1 ? r.c1.gateway.p99 - r.c1.direct.p99 : NaN;
  const ratios = r.rounds.map((x) => x.gateway / x.bare);
  const ratio = ratios.length ? ratios.reduce((a, b) => a + b, 0) / ratios.length : NaN;
  const roundsSettled = r.rounds.length > 0 && r.rounds.every((x) => !x.settle.timedOut);
  const rateSt = r.rate ? settlement(r.rate.ends, rows, r.rate.endWall, queriedAt) : null;
  const streamP50 = r.stream ? r.stream.gateway.p50 - r.stream.direct.p50 : NaN;
  // issue 31's step targets: the gateway's added p50 against the bare proxy's, measured in the same interleaving
  const bareAdded = (x: Latency | undefined) => (x?.bare ? x.bare.p50 - x.direct.p50 : NaN);
  const c1Bare = bareAdded(r.c1);
  const streamBare = bareAdded(r.stream);
  const has = (v: number) => Number.isFinite(v);
  out.push('### Targets (DESIGN.md section 6)');
  out.push('');
  out.push(
    table(
      ['what', 'target', 'measured', 'met'],
      [
        ['added latency, non-streaming, c=1, p50', '≤ 1 ms', `${ms3(c1p50)} ms`, verdict(has(c1p50) ? c1p50 <= 1 : null)],
        ['added latency, non-streaming, c=1, p50, ÷ the bare proxy\'s added p50', '≤ 2 ×', `${fixed(c1p50 / c1Bare, 1)} × (bare proxy ${ms3(c1Bare)} ms)`, verdict(has(c1p50 / c1Bare) ? c1p50 <= 2 * c1Bare : null)],
        ['added latency, non-streaming, c=1, p99', '≤ 3 ms', `${ms3(c1p99)} ms`, verdict(has(c1p99) ? c1p99 <= 3 : null)],
        [
          'throughput c=64, gateway / bare Koa proxy, every request settled',
          '≥ 50 %',
          `${fixed(ratio * 100)} % (mean of ${ratios.length} round(s): ${ratios.map((x) => `${fixed(x * 100)} %`).join(', ')}); ${roundsSettled ? 'all settled' : 'NOT all settled within the wait'}`,
          verdict(has(ratio) ? ratio >= 0.5 && roundsSettled : null),
        ],
        [
          `settlement lag p99 at the sustained rate (${P.rate} req/s open loop)`,
          '≤ 2000 ms',
          rateSt ? `${lagText(rateSt, rateSt.lag.p99)} ms (p50 ${lagText(rateSt, rateSt.lag.p50)} ms)${rateSt.unsettled ? `; ${rateSt.unsettled} of ${rateSt.requests} not settled by the end of the run` : ''}` : 'n/a',
          verdict(rateSt && rateSt.requests > 0 ? rateSt.lag.p99 <= 2000 : null),
        ],
        [
          `sustained settled reservations/s (${P.rate} req/s open loop)`,
          '≥ 500 /s',
          rateSt ? `${fixed(rateSt.settledPerSecond, 0)} /s (${rateSt.settled} of ${rateSt.requests} settled by the end of the run)` : 'n/a',
          verdict(rateSt && rateSt.requests > 0 && has(rateSt.settledPerSecond) ? rateSt.settledPerSecond >= 500 : null),
        ],
        ['streaming TTFB overhead, c=1, p50', '≤ 1 ms', `${ms3(streamP50)} ms`, verdict(has(streamP50) ? streamP50 <= 1 : null)],
        ['streaming TTFB overhead, c=1, p50, ÷ the bare proxy\'s', '≤ 2 ×', `${fixed(streamP50 / streamBare, 1)} × (bare proxy ${ms3(streamBare)} ms)`, verdict(has(streamP50 / streamBare) ? streamP50 <= 2 * streamBare : null)],
        [`CPU per settled request at ${P.rate} req/s (gateway + worker + Temporal + PostgreSQL)`, '≤ 1.5 ms (issue 31)', rateCpu ? `${fixed(rateCpu.total, 2)} ms` : 'n/a', verdict(rateCpu ? rateCpu.total <= 1.5 : null)],
        ...perSettled
          .filter((x) => x.statements)
          .map((x) => {
            const per = x.statements!.calls / x.requests;
            return [`PostgreSQL statements per settled request, ${x.label}`, '≤ 0.2', fixed(per, 3), verdict(per <= 0.2)];
          }),
      ],
    ),
  );
  out.push('');
  for (const n of r.notes) out.push(`- ${n}`);
  if (r.shutdown) out.push(`- Shutdown (SIGTERM, then waited): ${r.shutdown.join(' · ')}`);
  return out.join('\n');
}

// ---------------------------------------------------------------------------------------------

let exiting = false;
const bail = (why: string, code: number) => {
  if (exiting) return;
  exiting = true;
  log(`${why}: stopping children`);
  void stopAll().finally(() => process.exit(code));
};
process.on('SIGINT', () => bail('SIGINT', 130));
process.on('SIGTERM', () => bail('SIGTERM', 143));
// Hard stop: whatever happens, the run ends (and its children are stopped) soon after the budget.
setTimeout(() => bail('time budget exceeded', 1), P.budgetMs + 20_000).unref();

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`benchmark failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
