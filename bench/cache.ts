import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Pool, request } from 'undici';
import { createAccount } from '../services/accounts/accounts';
import { createKey } from '../services/keys/keys';
import { createDb, type Db } from '../platform/db';
import { recordRun } from './history';
import { sleep, spawnChild, stopAll, systemEnv, TSX_BIN, type Child } from './children';
import { fixed, ms3, nsToMs, num, summarize, table } from './stats';

// Response-cache benchmark (issue 36 part 4; `npm run bench:cache`). Starts the simulator and the
// whole system (main/start.ts) as child processes on free loopback ports, stores one answer, then
// measures side by side a hit (the stored request), a miss (a new request each time, opted in: the
// lookup, the provider call and the store) and an uncached request: latency at c=1 (interleaved) and
// throughput at c=64 (closed loop, each kind in two halves, forward then reverse order). Prints the load average at start and end (figures count only
// from a quiet box, DESIGN.md section 6), checks every hold was resolved, and appends the report to
// bench/history/<date>-cache.md. Bounded in time; stops its children on every exit path.

const ROOT = path.resolve(__dirname, '..');
const P = {
  warmup: num('BENCH_WARMUP', 100),
  c1Iterations: num('BENCH_C1_ITERATIONS', 1000),
  seconds: num('BENCH_THROUGHPUT_SECONDS', 10),
};
const REQUEST_TIMEOUT_MS = 30_000;
const log = (msg: string) => process.stderr.write(`[bench:cache] ${msg}\n`);
const load = () => os.loadavg().map((v) => v.toFixed(2)).join(' ');

type Kind = 'hit' | 'miss' | 'uncached';
const KINDS: Kind[] = ['hit', 'miss', 'uncached'];

let missTurn = 0;
/** The request of each kind: a hit repeats the stored one; a miss asks something new each time. */
function requestOf(kind: Kind): { headers: Record<string, string>; body: string } {
  const content = kind === 'miss' ? `cache bench miss ${process.pid} ${missTurn++}` : 'cache bench hello';
  return { headers: kind === 'uncached' ? {} : { 'x-gateway-cache': 'ttl=3600' }, body: JSON.stringify({ model: 'sim-gpt', messages: [{ role: 'user', content }], max_tokens: 16 }) };
}

async function call(pool: Pool, key: string, kind: Kind): Promise<{ ok: boolean; ms: number; cache: string | null; error: string }> {
  const r = requestOf(kind);
  const start = process.hrtime.bigint();
  try {
    const res = await pool.request({
      path: '/v1/chat/completions',
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, ...r.headers },
      body: r.body,
      headersTimeout: REQUEST_TIMEOUT_MS,
      bodyTimeout: REQUEST_TIMEOUT_MS,
    });
    await res.body.text();
    const cache = res.headers['x-gateway-cache'];
    return { ok: res.statusCode === 200, ms: nsToMs(process.hrtime.bigint() - start), cache: typeof cache === 'string' ? cache : null, error: res.statusCode === 200 ? '' : `HTTP ${res.statusCode}` };
  } catch (err) {
    return { ok: false, ms: nsToMs(process.hrtime.bigint() - start), cache: null, error: String(err) };
  }
}

async function waitHttp(url: string, child: Child, timeoutMs: number): Promise<void> {
  const stopAt = Date.now() + timeoutMs;
  while (Date.now() < stopAt) {
    if (child.exited()) throw new Error(`${child.name} exited before ${url} answered:\n${child.output()}`);
    const ok = await request(url, { headersTimeout: 3000, bodyTimeout: 3000 }).then(
      async (res) => (await res.body.text(), res.statusCode === 200),
      () => false,
    );
    if (ok) return;
    await sleep(500);
  }
  throw new Error(`${url} not ready within ${timeoutMs} ms:\n${child.output()}`);
}

/** c=1, the three kinds in turn (rotating which goes first), so the box's drift hits them alike. */
async function latency(pool: Pool, key: string, iterations: number) {
  const ms: Record<Kind, number[]> = { hit: [], miss: [], uncached: [] };
  const errors: Record<Kind, number> = { hit: 0, miss: 0, uncached: 0 };
  const wrong: Record<Kind, number> = { hit: 0, miss: 0, uncached: 0 };
  for (let i = 0; i < iterations; i++) {
    for (let j = 0; j < KINDS.length; j++) {
      const kind = KINDS[(i + j) % KINDS.length];
      const s = await call(pool, key, kind);
      if (!s.ok) errors[kind]++;
      else ms[kind].push(s.ms);
      if (s.ok && s.cache !== (kind === 'uncached' ? null : kind)) wrong[kind]++;
    }
  }
  return { ms, errors, wrong };
}

/** Closed loop at `concurrency` for `seconds`: answers per second. */
async function throughput(pool: Pool, key: string, kind: Kind, concurrency: number, seconds: number) {
  const end = performance.now() + seconds * 1000;
  let ok = 0;
  let errors = 0;
  let last = '';
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const s = await call(pool, key, kind);
        if (s.ok && performance.now() <= end) ok++;
        if (!s.ok) {
          errors++;
          last = s.error;
        }
      }
    }),
  );
  return { rps: ok / seconds, errors, last };
}

async function held(db: Db, accountId: string): Promise<number> {
  const r = await db('reservations').where({ account_id: accountId, status: 'held' }).count<{ n: number }[]>('* as n').first();
  return Number(r?.n ?? 0);
}

async function main(): Promise<number> {
  const load0 = load();
  log(`load average at start: ${load0} (${os.availableParallelism()} CPUs); figures count only below 1.5`);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-bench-cache-'));
  fs.chmodSync(dataDir, 0o755); // as root, the embedded PostgreSQL runs as the `postgres` user
  let db: Db | undefined;
  let pool: Pool | undefined;
  try {
    const { env, gatewayPort, pgPort, simPort } = await systemEnv(dataDir, 1);
    log(`starting the simulator and the system (DATA_DIR ${dataDir})`);
    const simulator = spawnChild('bench/simulator.ts', TSX_BIN, ['bench/simulator.ts'], { ...process.env, SIMULATOR_PORT: String(simPort) }, ROOT);
    await waitHttp(`http://127.0.0.1:${simPort}/v1/models`, simulator, 30_000);
    const system = spawnChild('main/start.ts', TSX_BIN, ['main/start.ts'], env, ROOT);
    const gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
    await waitHttp(`${gatewayUrl}/healthz`, system, 150_000);
    log('system ready');
    db = createDb(`postgres://postgres:postgres@127.0.0.1:${pgPort}/gateway`, 2);
    const account = await createAccount(db, { name: `bench-cache-${new Date().toISOString()}`, tier: 'pro', credits: '1000000' });
    const { key } = await createKey(db, { accountId: account.id, label: 'bench' });
    pool = new Pool(gatewayUrl, { connections: 128, pipelining: 1, keepAliveTimeout: 60_000 });

    // Store the hit's answer, and check each kind answers as it should before measuring anything.
    const stored = await call(pool, key, 'hit');
    const hit = await call(pool, key, 'hit');
    if (!stored.ok || hit.cache !== 'hit') throw new Error(`the stored request did not hit: ${stored.error} ${stored.cache} then ${hit.cache}`);
    for (let i = 0; i < P.warmup; i++) for (const k of KINDS) await call(pool, key, k);

    log(`c=1: ${P.c1Iterations} iterations of hit, miss and uncached, interleaved`);
    const c1 = await latency(pool, key, P.c1Iterations);
    // Two halves per kind, in forward then reverse order, so no kind always runs first (after c=1) or last.
    const c64: Record<Kind, { rps: number; errors: number; last: string }> = { hit: { rps: 0, errors: 0, last: '' }, miss: { rps: 0, errors: 0, last: '' }, uncached: { rps: 0, errors: 0, last: '' } };
    for (const k of [...KINDS, ...[...KINDS].reverse()]) {
      log(`c=64, ${k}: ${P.seconds / 2} s`);
      const t = await throughput(pool, key, k, 64, P.seconds / 2);
      c64[k] = { rps: c64[k].rps + t.rps / 2, errors: c64[k].errors + t.errors, last: t.last || c64[k].last };
    }
    let left = await held(db, account.id);
    for (const end = Date.now() + 60_000; left > 0 && Date.now() < end; left = await held(db, account.id)) await sleep(500);
    const load1 = load();
    const rows = KINDS.map((k) => {
      const s = summarize(c1.ms[k]);
      return [k, s.n, ms3(s.p50), ms3(s.p90), ms3(s.p99), fixed(c64[k].rps), `${c1.errors[k] + c64[k].errors}${c64[k].last ? ` (${c64[k].last.slice(0, 80)})` : ''}`, c1.wrong[k]];
    });
    const text = [
      `## ${new Date().toISOString()} — commit ${git(['rev-parse', '--short', 'HEAD'])}${git(['status', '--porcelain']) ? ' (uncommitted changes)' : ''}`,
      '',
      `Load average at start ${load0}, at end ${load1} (${os.availableParallelism()} CPUs; figures count only from a start below 1.5).`,
      `Non-streaming chat, sim-gpt, 16 output tokens; hit: the stored request; miss: a new request each time, opted in (lookup, provider, store); uncached: no opt-in.`,
      '',
      table(['kind', 'c=1 n', 'p50 ms', 'p90 ms', 'p99 ms', 'c=64 answers/s', 'errors', 'wrong x-gateway-cache'], rows),
      '',
      `Holds left unresolved 60 s after the last phase: ${left}.`,
    ].join('\n');
    process.stdout.write(`${text}\n`);
    log(`recorded in ${recordRun('cache', text)}`);
    return left === 0 && KINDS.every((k) => c1.wrong[k] === 0) ? 0 : 1;
  } finally {
    await pool?.close();
    await db?.destroy();
    log((await stopAll()).join('; '));
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

function git(args: string[]): string {
  try {
    return execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => void stopAll().finally(() => process.exit(130)));
main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`bench:cache failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    void stopAll().finally(() => process.exit(1));
  },
);
