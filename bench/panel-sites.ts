import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { tsToMs } from '@temporalio/common/lib/time';
import { NativeConnection } from '@temporalio/worker';
import pino from 'pino';
import { Pool } from 'undici';
import { nodePaths } from '../domain/panel/node-config';
import { startPanelApi } from '../main/panel-api';
import { createDb, migrate, type Db } from '../platform/db';
import { readCpu } from '../hosting-node/metrics';
import { installedPhpVersions } from '../hosting-node/php-fpm';
import { childrenOf, run } from '../hosting-node/processes';
import { createLogger } from '../platform/logger';
import { parsePanelFlags } from '../platform/panel-flags';
import { freePort } from '../platform/ports';
import { deriveKey } from '../platform/secret-box';
import { ensurePlatform } from '../services/panel/orgs/bootstrap';
import { NODE_OP_DEFAULTS } from '../services/panel/sites/client';
import { nodeOpWorkflowId } from '../domain/panel/workflows';
import { CONTROLLER_DEFAULTS } from '../services/panel/nodes/controller';
import { runWorker } from '../workers/base';
import { createPanelWorker } from '../workers/panel';
import { freePorts, sleep, spawnChild, TSX_BIN, type Child } from './children';
import { appendResults, dirtyNote, firstSignIn, loadText, logSink, machine, onCleanup, progress, revision, ROOT, runBench, send, startBackends } from './panel-harness';
import { peakRssBytes, readProcs, treeCpuSeconds, treeOf, treeRssBytes, type ProcInfo } from './proc';
import { fixed, num, percentile, summarize, table, type Summary } from './stats';

// Sites benchmark of the hosting panel (issue: "1,000 sites created across 3 agents — sites/s and
// p99 end-to-end creation time, agent CPU and memory"). Starts its own embedded PostgreSQL and
// Temporal dev server (bench/panel-harness.ts), one panel API in this process with the node API
// (-node-api-listen), -controller-state and -placement scheduled (a node facts file listing the
// agent nodes, preflight passed, PHP 8.2, checked now), the panel worker in a child process (this
// script with the argument `worker`), and three real `panel-host serve` agents as child processes,
// each with its own root and web port and its own nginx and PHP-FPM, enrolled with tokens from
// POST /v1/cluster/nodes. Then it creates customers and BENCH_SITES sites (half static, half
// PHP 8.2) through POST /v1/orgs/{id}/sites at BENCH_CONCURRENCY, and times each from its POST to
// status `active` (watching panel_sites every 20 ms). Afterwards: the scheduler's spread, the CPU
// seconds and peak memory of every process tree (/proc), where each site's time went (the node
// operation's timestamps), the node API's long polls (its access log), the Temporal history of a
// sample of node-op workflows, the cost of `nginx -t` and `php-fpm -t` at the final size, and a
// sample of sites fetched from their node by Host header. Appends a section to bench/history/.
// `npm run bench:panel-sites`. Stops everything it started on every exit path.

const P = {
  sites: num('BENCH_SITES', 1000),
  concurrency: num('BENCH_CONCURRENCY', 16),
  customers: num('BENCH_CUSTOMERS', 20),
  agents: num('BENCH_AGENTS', 3),
  verify: num('BENCH_VERIFY', 30),
  budgetMs: num('BENCH_BUDGET_MS', 540_000),
};
const PHP_VERSION = '8.2';
const PASSWORD = 'bench sites password 2026';
const SITE_TIMEOUT_MS = 180_000;
const WATCH_MS = 20;
const SAMPLE_MS = 500;
const HISTORIES = 30;

const log = progress('bench:panel-sites');
const MB = 1024 * 1024;

// ---------------------------------------------------------------------------------------------
// `tsx bench/panel-sites.ts worker`: the panel worker (node-op workflows and their activities),
// in a process of its own so that its CPU and memory are measured apart from the API's.

async function workerProcess(): Promise<void> {
  const db = createDb(process.env.DATABASE_URL!, 20);
  const connection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS! });
  const worker = await createPanelWorker({ connection, namespace: 'default', db, hostingNode: null });
  const running = runWorker(worker);
  process.stdout.write('panel worker ready\n');
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    await running.stop();
    await connection.close();
    await db.destroy();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
}

// ---------------------------------------------------------------------------------------------
// Measuring

/** One site's creation as the benchmark saw it. */
interface SiteRun {
  i: number;
  php: boolean;
  domain: string;
  /** performance.now() and Date.now() when its POST was sent */
  t0: number;
  wall0: number;
  postMs: number;
  postStatus: number;
  id: string | null;
  node: string | null;
  /** POST → seen not pending, ms */
  e2e: number | null;
  status: string;
  error: string | null;
}

interface Agent {
  name: string;
  root: string;
  webPort: number;
  child: Child;
}

/** A process tree the benchmark measures: CPU seconds between two readings, peak memory from samples. */
class Tracked {
  cpu0 = 0;
  cpu1 = 0;
  peakRss = 0;
  /** per command name at the peak */
  peakByComm = new Map<string, number>();
  peakProcs = 0;
  constructor(
    readonly label: string,
    readonly root: () => number | null,
    /** true: the root process alone (this process: its children are measured apart) */
    readonly alone = false,
  ) {}

  tree(procs: Map<number, ProcInfo>): ProcInfo[] {
    const pid = this.root();
    if (pid === null) return [];
    if (this.alone) {
      const p = procs.get(pid);
      return p ? [{ ...p, reapedTicks: 0 }] : [];
    }
    return treeOf(procs, pid);
  }

  sample(procs: Map<number, ProcInfo>): void {
    const tree = this.tree(procs);
    const rss = treeRssBytes(tree);
    if (rss <= this.peakRss) return;
    this.peakRss = rss;
    this.peakProcs = tree.length;
    this.peakByComm = new Map();
    for (const p of tree) this.peakByComm.set(p.comm, (this.peakByComm.get(p.comm) ?? 0) + p.rssBytes);
  }

  get cpuSeconds(): number {
    return this.cpu1 - this.cpu0;
  }
}

/** Node API access lines (the panel's pino log) while the sites are created. */
class AccessLog {
  on = false;
  readonly polls: number[] = [];
  readonly results: number[] = [];
  readonly heartbeats: number[] = [];
  readonly creates: number[] = [];
  other = 0;

  line(text: string): void {
    if (!this.on || !text.includes('"msg":"request"')) return;
    let l: { method?: string; path?: string; ms?: number };
    try {
      l = JSON.parse(text);
    } catch {
      return;
    }
    const ms = typeof l.ms === 'number' ? l.ms : NaN;
    if (l.method === 'GET' && l.path === '/node/v1/operations') this.polls.push(ms);
    else if (l.method === 'POST' && /^\/node\/v1\/operations\/[^/]+\/result$/.test(l.path ?? '')) this.results.push(ms);
    else if (l.method === 'POST' && l.path === '/node/v1/heartbeat') this.heartbeats.push(ms);
    else if (l.method === 'POST' && /^\/v1\/orgs\/[^/]+\/sites$/.test(l.path ?? '')) this.creates.push(ms);
    else this.other++;
  }
}

interface KnexQuery {
  __knexQueryUid?: string;
  sql: string;
}

interface CreateTx {
  create: boolean;
  lockReq?: number;
  lockGot?: number;
  /** the transaction's function returned (its last statement answered) */
  bodyEnd?: number;
  /** COMMIT answered */
  committed?: number;
}

/**
 * The site-create transactions of the panel API: how long each waited for its org chain's row
 * locks (`loadChain(…, lock)`: SELECT … FOR UPDATE of every org on the path, the platform's row
 * included, so every create on the platform takes the same lock) and how long it then held them
 * (lock granted → COMMIT answered). Wraps `db.transaction` of the knex instance the API is given
 * and listens to each transaction's query events; nothing else changes.
 */
class CreateLocks {
  on = false;
  private readonly done: CreateTx[] = [];

  attach(db: Db): void {
    type Start = (container: unknown, config: unknown, outerTx: unknown) => PromiseLike<unknown>;
    // knex's db.transaction(fn) is client.transaction(fn, config, null): a thenable Transaction
    const client = db.client as unknown as { transaction: Start };
    const original = client.transaction.bind(client);
    client.transaction = (container, config, outerTx) => {
      if (!this.on || typeof container !== 'function' || outerTx) return original(container, config, outerTx);
      const t: CreateTx = { create: false };
      const open = new Map<string, boolean>();
      const trx = original(
        async (tx: Db) => {
          tx.on('query', (q: KnexQuery) => {
            const lock = /from "panel_orgs" as "o" left join "panel_packages"/.test(q.sql) && /for update/.test(q.sql);
            if (lock && t.lockReq === undefined) t.lockReq = performance.now();
            if (q.sql.startsWith('insert into "panel_sites"')) t.create = true;
            if (q.__knexQueryUid) open.set(q.__knexQueryUid, lock);
          });
          tx.on('query-response', (_res: unknown, q: KnexQuery) => {
            if (q.__knexQueryUid && open.get(q.__knexQueryUid) && t.lockGot === undefined) t.lockGot = performance.now();
          });
          const out = await (container as (tx: Db) => Promise<unknown>)(tx);
          t.bodyEnd = performance.now();
          return out;
        },
        config,
        outerTx,
      );
      trx.then(
        () => {
          t.committed = performance.now();
          if (t.create) this.done.push(t);
        },
        () => {},
      );
      return trx;
    };
  }

  /** waits, holds and commits (ms) of the create transactions seen */
  summary(): { waits: number[]; holds: number[]; commits: number[] } {
    const done = this.done.filter((t) => t.lockReq !== undefined && t.lockGot !== undefined && t.bodyEnd !== undefined && t.committed !== undefined);
    return { waits: done.map((t) => t.lockGot! - t.lockReq!), holds: done.map((t) => t.committed! - t.lockGot!), commits: done.map((t) => t.committed! - t.bodyEnd!) };
  }
}

/** GET / on a node's web server with a Host header (fetch() does not let a caller set Host). */
function fetchByHost(port: number, host: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/', headers: { host }, agent: false, timeout: 10_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('timeout', () => req.destroy(new Error(`GET / Host ${host}: no answer in 10 s`)));
    req.on('error', reject);
  });
}

/** Median wall time (ms) of `n` runs of a command. */
async function timeCommand(cmd: string, args: string[], n: number): Promise<{ ms: number; ok: boolean }> {
  const times: number[] = [];
  let ok = true;
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    const r = await run(cmd, args);
    times.push(performance.now() - t);
    ok &&= r.code === 0;
  }
  return { ms: percentile(times, 0.5), ok };
}

/**
 * One nginx reload as the agent does it (SIGHUP, then until a new worker runs and no old one
 * still accepts), timed with a 5 ms poll instead of the agent's 50 ms.
 */
async function timeNginxReload(master: number): Promise<number> {
  const workers = () => childrenOf(master).filter((c) => c.cmdline.includes('worker process') && !c.cmdline.includes('shutting down'));
  const before = new Set(workers().map((w) => w.pid));
  const t = performance.now();
  process.kill(master, 'SIGHUP');
  for (;;) {
    const now = workers();
    if (now.some((w) => !before.has(w.pid)) && now.every((w) => !before.has(w.pid))) return performance.now() - t;
    if (performance.now() - t > 10_000) throw new Error('nginx did not reload within 10 s');
    await sleep(5);
  }
}

/** One PHP-FPM reload as the agent does it (SIGUSR2, then until the log says it is ready again), 5 ms poll. */
async function timeFpmReload(master: number, logFile: string): Promise<number> {
  const offset = fs.statSync(logFile).size;
  const t = performance.now();
  process.kill(master, 'SIGUSR2');
  for (;;) {
    const fd = fs.openSync(logFile, 'r');
    const buf = Buffer.alloc(Math.max(0, fs.fstatSync(fd).size - offset));
    fs.readSync(fd, buf, 0, buf.length, offset);
    fs.closeSync(fd);
    if (buf.toString().includes('ready to handle connections')) return performance.now() - t;
    if (performance.now() - t > 10_000) throw new Error('php-fpm did not reload within 10 s');
    await sleep(5);
  }
}

// ---------------------------------------------------------------------------------------------

interface OpRow {
  id: string;
  node_name: string;
  php_version: string | null;
  status: string;
  updated_at: Date;
  created_at: Date;
  sent_at: Date | null;
  finished_at: Date | null;
  attempts: number;
  op_id: string;
}

/** Where one site's time went (ms), from the node operation's timestamps. */
interface Segments {
  node: string;
  php: boolean;
  /** POST sent → operation queued (the create transaction, up to its insert) */
  api: number;
  /** queued → the agent starts applying it: pulled by a long poll, behind the ops before it on the node */
  nodeWait: number;
  /** applying it on the node and reporting the result (the agent applies one op at a time) */
  nodeService: number;
  /** result recorded → site active: the workflow's next status read (every pollMs) and finishSiteOp */
  workflow: number;
  /** site active → seen by the benchmark's watch */
  seen: number;
  e2e: number;
  /** this op's place among the node's ops, 0..1 */
  place: number;
}

function segmentsOf(runs: SiteRun[], rows: OpRow[]): { segs: Segments[]; pulls: Map<string, number[]>; pullGaps: number[] } {
  const byId = new Map(rows.map((r) => [r.id, r]));
  const byNode = new Map<string, OpRow[]>();
  for (const r of rows) if (r.finished_at && r.sent_at) byNode.set(r.node_name, [...(byNode.get(r.node_name) ?? []), r]);
  // the agent applies ops one at a time, in finish order: an op starts when it was handed out and the op before it finished
  const start = new Map<string, number>();
  const place = new Map<string, number>();
  const pulls = new Map<string, number[]>();
  // an op already queued when the op before it finished, but handed out by a later long poll: the
  // agent was idle for that round trip (result reported, poll sent, claimed, answered)
  const pullGaps: number[] = [];
  for (const [node, list] of byNode) {
    list.sort((a, b) => a.finished_at!.getTime() - b.finished_at!.getTime());
    let prev = 0;
    list.forEach((r, k) => {
      if (prev && r.created_at.getTime() < prev && r.sent_at!.getTime() > prev) pullGaps.push(r.sent_at!.getTime() - prev);
      start.set(r.id, Math.max(r.sent_at!.getTime(), prev));
      place.set(r.id, list.length > 1 ? k / (list.length - 1) : 0);
      prev = r.finished_at!.getTime();
    });
    // batches: ops handed out by one long poll share sent_at
    const sizes = new Map<number, number>();
    for (const r of list) sizes.set(r.sent_at!.getTime(), (sizes.get(r.sent_at!.getTime()) ?? 0) + 1);
    pulls.set(node, [...sizes.values()]);
  }
  const segs: Segments[] = [];
  for (const s of runs) {
    const r = s.id ? byId.get(s.id) : undefined;
    if (!r || !r.finished_at || s.e2e === null || s.status !== 'active') continue;
    const created = r.created_at.getTime();
    const begun = start.get(r.id)!;
    const finished = r.finished_at.getTime();
    const active = r.updated_at.getTime();
    const seen = s.wall0 + s.e2e;
    segs.push({
      node: r.node_name,
      php: r.php_version !== null,
      api: created - s.wall0,
      nodeWait: begun - created,
      nodeService: finished - begun,
      workflow: active - finished,
      seen: seen - active,
      e2e: s.e2e,
      place: place.get(r.id)!,
    });
  }
  return { segs, pulls, pullGaps };
}

interface History {
  events: number;
  workflowTasks: number;
  timers: number;
  markers: number;
  /** workflow started → its first workflow task started (ms) */
  firstTaskMs: number;
  /** the operation's result recorded → the workflow task that read it completed (ms) */
  noticedMs: number;
}

async function histories(temporal: Client, sample: Array<{ opId: string; finished: number }>): Promise<History[]> {
  const out: History[] = [];
  for (const s of sample) {
    const { events } = await temporal.workflow.getHandle(nodeOpWorkflowId(s.opId)).fetchHistory();
    const list = events ?? [];
    const at = (e: (typeof list)[number]) => tsToMs(e.eventTime);
    const started = list[0] ? at(list[0]) : NaN;
    const firstTask = list.find((e) => e.workflowTaskStartedEventAttributes);
    // the marker of the readNodeOp that returned the result is the first marker after the result was recorded
    const after = list.find((e) => e.markerRecordedEventAttributes && at(e) >= s.finished);
    out.push({
      events: list.length,
      workflowTasks: list.filter((e) => e.workflowTaskCompletedEventAttributes).length,
      timers: list.filter((e) => e.timerStartedEventAttributes).length,
      markers: list.filter((e) => e.markerRecordedEventAttributes).length,
      firstTaskMs: firstTask ? at(firstTask) - started : NaN,
      noticedMs: after ? at(after) - s.finished : NaN,
    });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const { commit, dirty } = revision(/^(bench\/panel|bench\/proc|services\/panel|api\/panel|domain\/panel|main\/panel|workflows\/panel|activities\/panel|workers\/panel|hosting-node|migrations|package\.json)/);
  const load0 = os.loadavg();
  const logger = createLogger(process.env.LOG_LEVEL ?? 'warn');
  const php = installedPhpVersions().find((v) => v.version === PHP_VERSION);
  if (!php) throw new Error(`php-fpm${PHP_VERSION} is not installed: the PHP half of the benchmark needs it`);

  // 1. PostgreSQL, Temporal, the schema and the platform.
  const backends = await startBackends({ logger, log, prefix: 'psb-', database: 'panel_sites_bench' });
  const db = createDb(backends.databaseUrl, 20);
  onCleanup('knex pool', () => db.destroy());
  await migrate(db);
  const initial = await ensurePlatform(db);
  if (!initial) throw new Error('the panel database already has a platform: the benchmark needs an empty database');

  // 2. The panel worker (bundling its workflows takes a while: started first).
  const worker = spawnChild('panel worker', TSX_BIN, [__filename, 'worker'], { ...process.env, DATABASE_URL: backends.databaseUrl, TEMPORAL_ADDRESS: backends.temporalAddress, LOG_LEVEL: 'warn' }, ROOT);
  onCleanup('panel worker', () => worker.stop().then(log));
  const workerReady = (async () => {
    const deadline = Date.now() + 120_000;
    while (!worker.output().includes('panel worker ready')) {
      if (worker.exited()) throw new Error(`the panel worker exited (${await worker.exit}): ${worker.output().slice(-2000)}`);
      if (Date.now() > deadline) throw new Error(`the panel worker is not ready after 120 s: ${worker.output().slice(-2000)}`);
      await sleep(100);
    }
  })();
  workerReady.catch(() => {}); // awaited below; a failure before then is reported there or by the stop

  // 3. The panel API with the node API, controller state and scheduled placement.
  const names = Array.from({ length: P.agents }, (_, k) => `agent-${k + 1}`);
  const factsFile = path.join(backends.tmp, 'node-facts.json');
  const checkedAt = new Date().toISOString();
  fs.writeFileSync(factsFile, JSON.stringify({ nodes: names.map((node) => ({ node, preflight_passed: true, checked_at: checkedAt, php_versions: [PHP_VERSION] })) }, null, 2));
  const nodeApiPort = await freePort();
  const flagArgs = ['-placement', 'scheduled', '-placement-node-facts', factsFile, '-node-api-listen', `127.0.0.1:${nodeApiPort}`, '-controller-state'];
  const access = new AccessLog();
  const locks = new CreateLocks();
  locks.attach(db);
  const sink = logSink((line) => access.line(line));
  const panel = await startPanelApi({
    db,
    databaseUrl: backends.databaseUrl,
    temporalAddress: backends.temporalAddress,
    namespace: 'default',
    // the access log is written (at info, as in production) to a sink that reads it and drops it
    logger: pino({ level: 'info', base: { pid: process.pid } }, sink),
    port: 0,
    flags: parsePanelFlags(flagArgs),
    sealingKey: deriveKey('panel-sites-bench-secret'),
    sessionIdleMs: 3_600_000,
    sessionMaxMs: 7 * 86_400_000,
  });
  onCleanup('panel API', () => panel.close());
  const pool = new Pool(panel.url, { connections: P.concurrency + 8, pipelining: 1, keepAliveTimeout: 60_000 });
  onCleanup('HTTP pool', () => pool.close());
  log(`panel API at ${panel.url}, node API at ${panel.nodeApiUrl}`);
  const admin = await firstSignIn(pool, 'admin', initial.password, PASSWORD);

  // 4. The agents: a node record and token each, then `panel-host serve`.
  const webPorts = await freePorts(P.agents);
  const agents: Agent[] = [];
  for (const [k, name] of names.entries()) {
    const r = await send(pool, 'POST', '/v1/cluster/nodes', admin, { name });
    if (r.status !== 201) throw new Error(`POST /v1/cluster/nodes ${name}: HTTP ${r.status} ${r.text.slice(0, 300)}`);
    const root = path.join(backends.tmp, name);
    fs.mkdirSync(root, { mode: 0o755 });
    fs.chmodSync(root, 0o755); // nginx and PHP-FPM workers (www-data) read below it
    if (root.length > 72) throw new Error(`node root ${root} is longer than 72 characters`);
    const tokenFile = path.join(backends.tmp, `${name}.token`);
    fs.writeFileSync(tokenFile, `${(JSON.parse(r.text) as { token: string }).token}\n`, { mode: 0o600 });
    const args = ['main/panel-host.ts', 'serve', '-node', name, '-root', root, '-panel', panel.nodeApiUrl!, '-token-file', tokenFile, '-web-listen', `127.0.0.1:${webPorts[k]}`];
    const child = spawnChild(`agent ${name}`, TSX_BIN, args, { ...process.env, LOG_LEVEL: 'info' }, ROOT);
    onCleanup(`agent ${name}`, () => child.stop().then(log));
    agents.push({ name, root, webPort: webPorts[k], child });
  }
  log(`agents started: ${agents.map((a) => `${a.name} (pid ${a.child.pid}, web 127.0.0.1:${a.webPort})`).join(', ')}`);
  await workerReady;
  log('panel worker ready');
  // alive (the controller, from heartbeats), pulling, with PHP 8.2
  const aliveBy = Date.now() + 120_000;
  for (;;) {
    for (const a of agents) if (a.child.exited()) throw new Error(`${a.child.name} exited (${await a.child.exit}): ${a.child.output().slice(-2000)}`);
    const rows: Array<{ name: string; state: string; last_pull_at: Date | null; facts: { phpVersions?: string[] } | null }> = await db('panel_nodes').whereIn('name', names).select('name', 'state', 'last_pull_at', 'facts');
    const ready = rows.filter((r) => r.state === 'alive' && r.last_pull_at && r.facts?.phpVersions?.includes(PHP_VERSION));
    if (ready.length === names.length) break;
    if (Date.now() > aliveBy) throw new Error(`agents not alive and pulling after 120 s: ${JSON.stringify(rows)}`);
    await sleep(250);
  }
  log('agents enrolled, alive and pulling');

  // 5. Customers (below one provider), each signed in.
  const provider = await send(pool, 'POST', '/v1/orgs', admin, { type: 'provider', name: 'Bench provider', login: { username: 'bench-provider', password: 'temporary provider password' } });
  if (provider.status !== 201) throw new Error(`provider: HTTP ${provider.status} ${provider.text.slice(0, 300)}`);
  const providerId = (JSON.parse(provider.text) as { id: string }).id;
  const customers: Array<{ id: string; cookie: string }> = [];
  for (let k = 0; k < P.customers; k++) {
    const username = `bench-customer-${k + 1}`;
    const temporary = `temporary password ${k + 1}`;
    const r = await send(pool, 'POST', '/v1/orgs', admin, { type: 'customer', name: `Customer ${k + 1}`, parent_id: providerId, login: { username, password: temporary } });
    if (r.status !== 201) throw new Error(`customer ${k + 1}: HTTP ${r.status} ${r.text.slice(0, 300)}`);
    customers.push({ id: (JSON.parse(r.text) as { id: string }).id, cookie: await firstSignIn(pool, username, temporary, PASSWORD) });
  }
  log(`${customers.length} customers signed in`);

  // 6. Process trees measured: this process alone (client, panel API, node API, controller), the
  // worker, each agent (tsx, its node process, nginx and PHP-FPM), Temporal, PostgreSQL.
  const tracked = [
    new Tracked('benchmark process: panel API + node API + controller + client', () => process.pid, true),
    new Tracked('panel worker (tsx + node)', () => worker.pid),
    ...agents.map((a) => new Tracked(`${a.name} (tsx + node + nginx + php-fpm)`, () => a.child.pid)),
    new Tracked('Temporal dev server', () => backends.temporalPid),
    new Tracked('PostgreSQL (postmaster + backends)', () => backends.postmasterPid),
  ];
  const agentTracked = tracked.slice(2, 2 + agents.length);
  const sampleAll = () => {
    const procs = readProcs();
    for (const t of tracked) t.sample(procs);
    return procs;
  };
  const cpuAll = (procs: Map<number, ProcInfo>, which: 'cpu0' | 'cpu1') => {
    for (const t of tracked) t[which] = treeCpuSeconds(t.tree(procs));
  };

  // 7. The sites.
  const runs: SiteRun[] = [];
  const waiting = new Map<string, (r: { status: string; error: string | null; at: number }) => void>();
  let watching = true;
  const watcher = (async () => {
    while (watching) {
      try {
        if (waiting.size) {
          const rows: Array<{ id: string; status: string; error: string | null }> = await db('panel_sites').whereIn('id', [...waiting.keys()]).whereNot('status', 'pending').select('id', 'status', 'error');
          const at = performance.now();
          for (const r of rows) {
            waiting.get(r.id)?.({ status: r.status, error: r.error, at });
            waiting.delete(r.id);
          }
        }
      } catch (err) {
        if (watching) log(`watching panel_sites failed (retried): ${String(err)}`);
      }
      await sleep(WATCH_MS);
    }
  })();
  const settled = (id: string) =>
    new Promise<{ status: string; error: string | null; at: number }>((resolve) => {
      const timer = setTimeout(() => {
        waiting.delete(id);
        resolve({ status: 'timeout', error: `still pending after ${SITE_TIMEOUT_MS / 1000} s`, at: NaN });
      }, SITE_TIMEOUT_MS);
      waiting.set(id, (r) => {
        clearTimeout(timer);
        resolve(r);
      });
    });
  const createOne = async (i: number): Promise<SiteRun> => {
    const customer = customers[i % customers.length];
    const isPhp = i % 2 === 1;
    const domain = `s${i + 1}.c${(i % customers.length) + 1}.sites-bench.example`;
    const s: SiteRun = { i, php: isPhp, domain, t0: performance.now(), wall0: Date.now(), postMs: NaN, postStatus: 0, id: null, node: null, e2e: null, status: 'not created', error: null };
    const r = await send(pool, 'POST', `/v1/orgs/${customer.id}/sites`, customer.cookie, { domain, php_version: isPhp ? PHP_VERSION : null });
    s.postMs = r.ms;
    s.postStatus = r.status;
    if (r.status !== 201) {
      s.error = `HTTP ${r.status} ${r.text.slice(0, 200)}`;
      return s;
    }
    const body = JSON.parse(r.text) as { id: string; node: string };
    s.id = body.id;
    s.node = body.node;
    const done = await settled(body.id);
    s.status = done.status;
    s.error = done.error;
    s.e2e = done.status === 'timeout' ? null : done.at - s.t0;
    return s;
  };

  log(`creating ${P.sites} sites at concurrency ${P.concurrency}`);
  const loads: number[] = [];
  const sampler = setInterval(() => {
    sampleAll();
    loads.push(os.loadavg()[0]);
  }, SAMPLE_MS);
  const machine0 = readCpu();
  cpuAll(sampleAll(), 'cpu0');
  access.on = true;
  locks.on = true;
  const tStart = performance.now();
  let next = 0;
  let finished = 0;
  const progressTimer = setInterval(() => log(`${finished}/${P.sites} sites settled, ${runs.filter((r) => r.status !== 'active').length} not active`), 15_000);
  await Promise.all(
    Array.from({ length: P.concurrency }, async () => {
      while (next < P.sites) {
        const s = await createOne(next++);
        runs.push(s);
        finished++;
      }
    }),
  );
  const tEnd = performance.now();
  access.on = false;
  locks.on = false;
  cpuAll(sampleAll(), 'cpu1');
  const machine1 = readCpu();
  clearInterval(sampler);
  clearInterval(progressTimer);
  watching = false;
  await watcher;
  const wallS = (tEnd - tStart) / 1000;
  const active = runs.filter((r) => r.status === 'active');
  log(`${active.length}/${P.sites} active in ${fixed(wallS, 1)} s (${fixed(active.length / wallS, 2)} sites/s)`);
  // peak memory of the long-lived processes themselves (VmHWM), read before anything stops
  const hwm = agents.map((a) => {
    const procs = readProcs();
    const tree = treeOf(procs, a.child.pid);
    const nodeProc = tree.find((p) => p.ppid === a.child.pid && p.comm !== 'nginx' && !p.comm.startsWith('php-fpm'));
    const nginxMaster = tree.find((p) => p.comm === 'nginx' && procs.get(p.ppid)?.comm !== 'nginx');
    const fpmMaster = tree.find((p) => p.comm.startsWith('php-fpm') && !procs.get(p.ppid)?.comm.startsWith('php-fpm'));
    return {
      node: nodeProc ? peakRssBytes(nodeProc.pid) : null,
      nginx: nginxMaster ? peakRssBytes(nginxMaster.pid) : null,
      fpm: fpmMaster ? peakRssBytes(fpmMaster.pid) : null,
      nginxPid: nginxMaster?.pid ?? null,
      fpmPid: fpmMaster?.pid ?? null,
      procs: tree.length,
    };
  });
  const benchHwm = peakRssBytes(process.pid);
  const workerHwm = (() => {
    const node = treeOf(readProcs(), worker.pid).find((p) => p.ppid === worker.pid);
    return node ? peakRssBytes(node.pid) : null;
  })();

  // 8. Where the time went: the node operations' timestamps.
  const rows: OpRow[] = await db('panel_sites as s')
    .join('panel_node_ops as o', 'o.id', 's.last_op_id')
    .select('s.id', 's.node_name', 's.php_version', 's.status', 's.updated_at', 'o.created_at', 'o.sent_at', 'o.finished_at', 'o.attempts', 'o.id as op_id');
  const { segs, pulls, pullGaps } = segmentsOf(runs, rows);
  const spread = new Map<string, { static: number; php: number }>();
  for (const r of rows) {
    const e = spread.get(r.node_name) ?? { static: 0, php: 0 };
    if (r.php_version) e.php++;
    else e.static++;
    spread.set(r.node_name, e);
  }
  const retried = rows.filter((r) => r.attempts > 1).length;

  // 9. Temporal histories of a sample of node-op workflows.
  const connection = await Connection.connect({ address: backends.temporalAddress });
  onCleanup('Temporal client', () => connection.close());
  const temporal = new Client({ connection, namespace: 'default' });
  const doneRows = rows.filter((r) => r.finished_at);
  const sample = Array.from({ length: Math.min(HISTORIES, doneRows.length) }, (_, k) => doneRows[Math.floor((k * doneRows.length) / Math.min(HISTORIES, doneRows.length))]);
  const hist = await histories(temporal, sample.map((r) => ({ opId: r.op_id, finished: r.finished_at!.getTime() })));

  // 10. What an apply runs, at the final size of the first node (its nginx and PHP-FPM still running).
  const first = agents[0];
  const np = nodePaths(first.root);
  const vhosts = fs.readdirSync(np.nginxSites).length;
  const pools = fs.readdirSync(`${first.root}/etc/php/${PHP_VERSION}/pool.d`).length;
  const nginxT = await timeCommand('/usr/sbin/nginx', ['-p', `${first.root}/`, '-e', `${np.nginxLogs}/error.log`, '-c', np.nginxConf, '-t', '-q'], 5);
  // one master per site (issue 34): the test of one site's master config
  const oneMaster = fs.readdirSync(`${first.root}/etc/php/${PHP_VERSION}/masters`)[0].replace(/\.conf$/, '');
  const fpmT = await timeCommand(php.bin, [...(process.getuid?.() === 0 ? ['-R'] : []), '-F', '-y', np.siteFpmConf(PHP_VERSION, oneMaster), '-t'], 5);
  const scans: number[] = [];
  for (let k = 0; k < 20 && hwm[0].nginxPid; k++) {
    const t = performance.now();
    childrenOf(hwm[0].nginxPid);
    scans.push(performance.now() - t);
  }
  const procCount = readProcs().size;
  // PHP-FPM notes every reload in its log: counted before the reloads timed below
  const fpmReloads = agents.map((a) => {
    try {
      const logs = fs.readdirSync(nodePaths(a.root).phpFpmLogs).map((f) => `${nodePaths(a.root).phpFpmLogs}/${f}`);
      return logs.reduce((n, f) => n + (fs.readFileSync(f, 'utf8').match(/Reloading in progress/g) ?? []).length, 0);
    } catch {
      return NaN;
    }
  });
  // the same reloads the agent runs per op, on its idle node (configuration unchanged)
  const nginxReloads: number[] = [];
  const fpmReloadMs: number[] = [];
  for (let k = 0; k < 5 && hwm[0].nginxPid; k++) nginxReloads.push(await timeNginxReload(hwm[0].nginxPid));
  for (let k = 0; k < 3 && hwm[0].fpmPid; k++) fpmReloadMs.push(await timeFpmReload(hwm[0].fpmPid, np.siteFpmLog(oneMaster)));

  // 11. A sample of sites answers on its node by Host header.
  const byNode = new Map(agents.map((a) => [a.name, a]));
  const step = Math.max(1, Math.floor(active.length / P.verify));
  const checks = active.filter((_, k) => k % step === 0).slice(0, P.verify);
  let served = 0;
  const wrong: string[] = [];
  for (const s of checks) {
    const a = byNode.get(s.node!)!;
    const page = await fetchByHost(a.webPort, s.domain).catch((err: Error) => ({ status: 0, body: err.message }));
    const ok = page.status === 200 && page.body.includes(`${s.domain} works`) && (!s.php || /PHP 8\.2\.\d+ is running/.test(page.body));
    if (ok) served++;
    else wrong.push(`${s.domain} on ${a.name}: HTTP ${page.status} ${page.body.slice(0, 120)}`);
  }
  const unknown = await fetchByHost(first.webPort, 'no-such-site.sites-bench.example');
  const otherNode = checks.find((s) => s.node !== first.name);
  const elsewhere = otherNode ? await fetchByHost(first.webPort, otherNode.domain) : null;
  log(`verified ${served}/${checks.length} sites by Host header`);

  const problems = agents.map((a) => a.child.logProblems());
  const report: Report = {
    commit,
    dirty,
    load0,
    load1: os.loadavg(),
    pgVersion: (await db.raw('SHOW server_version')).rows[0].server_version as string,
    flags: flagArgs,
    runs,
    wallS,
    segs,
    pulls,
    pullGaps,
    machineCores: ((machine1.busy - machine0.busy) / Math.max(1, machine1.total - machine0.total)) * os.availableParallelism(),
    loadRange: [Math.min(...loads), Math.max(...loads)],
    spread,
    retried,
    tracked,
    agentTracked,
    agents,
    hwm,
    benchHwm,
    workerHwm,
    access,
    locks: locks.summary(),
    hist,
    micro: { vhosts, pools, nginxT, fpmT, scan: percentile(scans, 0.5), procCount, fpmReloads, nginxReload: percentile(nginxReloads, 0.5), fpmReload: percentile(fpmReloadMs, 0.5) },
    verify: { checked: checks.length, served, wrong, unknown: unknown.status, elsewhere: elsewhere?.status ?? null },
    logs: { panel: sink.seen, agents: problems, worker: worker.logProblems() },
  };
  appendResults('panel-sites', render(report));
}

// ---------------------------------------------------------------------------------------------

interface Report {
  commit: string;
  dirty: string[];
  load0: number[];
  load1: number[];
  pgVersion: string;
  flags: string[];
  runs: SiteRun[];
  wallS: number;
  segs: Segments[];
  pulls: Map<string, number[]>;
  pullGaps: number[];
  /** cores the whole machine was busy during the run (/proc/stat) */
  machineCores: number;
  /** 1-minute load average during the run, min and max of the samples */
  loadRange: number[];
  spread: Map<string, { static: number; php: number }>;
  retried: number;
  tracked: Tracked[];
  agentTracked: Tracked[];
  agents: Agent[];
  hwm: Array<{ node: number | null; nginx: number | null; fpm: number | null; procs: number }>;
  benchHwm: number | null;
  workerHwm: number | null;
  access: AccessLog;
  locks: { waits: number[]; holds: number[]; commits: number[] };
  hist: History[];
  micro: {
    vhosts: number;
    pools: number;
    nginxT: { ms: number; ok: boolean };
    fpmT: { ms: number; ok: boolean };
    scan: number;
    procCount: number;
    fpmReloads: number[];
    nginxReload: number;
    fpmReload: number;
  };
  verify: { checked: number; served: number; wrong: string[]; unknown: number; elsewhere: number | null };
  logs: { panel: { warn: number; error: number; last: string }; agents: Array<{ warn: number; error: number; last: string }>; worker: { warn: number; error: number; last: string } };
}

const ms0 = (v: number) => fixed(v, 0);
const mb = (v: number | null) => (v === null ? 'n/a' : fixed(v / MB, 0));
const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);
const pct = (s: Summary) => `${ms0(s.p50)} / ${ms0(s.p90)} / ${ms0(s.p99)}`;

function render(r: Report): string {
  const out: string[] = [];
  const active = r.runs.filter((s) => s.status === 'active');
  const notActive = r.runs.filter((s) => s.status !== 'active');
  const e2e = summarize(active.map((s) => s.e2e!));
  const post = summarize(r.runs.map((s) => s.postMs).filter(Number.isFinite));
  const rate = active.length / r.wallS;
  const phpOf = (php: boolean) => summarize(active.filter((s) => s.php === php).map((s) => s.e2e!));
  out.push(`## Panel: ${r.runs.length.toLocaleString('en-US')} sites created across ${r.agents.length} agents — ${new Date().toISOString()} · commit ${r.commit}${dirtyNote(r.dirty)}`);
  out.push('');
  out.push(
    [
      ...machine(),
      `load average ${loadText(r.load0)} at start, ${loadText(r.load1)} at end (other work shares this machine)`,
      `PostgreSQL ${r.pgVersion}, embedded, fresh cluster`,
      'Temporal dev server, in memory',
      `one panel API process in the benchmark's own node process (startPanelApi, flags \`${r.flags.join(' ').replace(/\/tmp\/\S+/g, '…')}\`; node operations at their defaults: poll ${NODE_OP_DEFAULTS.pollMs} ms, timeout ${NODE_OP_DEFAULTS.timeoutMs / 1000} s; controller tick ${CONTROLLER_DEFAULTS.tickMs / 1000} s; node API heartbeat 10 s, long poll 25 s)`,
      'the panel worker (createPanelWorker, no hosting node of its own) in a child process',
      `${r.agents.length} \`panel-host serve\` agents as child processes (tsx), each with its own root, nginx (2 workers) and PHP-FPM ${PHP_VERSION}, as root (sites' workers as www-data)`,
      `${P.customers} customer accounts below one provider, each signed in; site i belongs to customer i mod ${P.customers}; odd i PHP ${PHP_VERSION}, even i static`,
      `POST /v1/orgs/{id}/sites at concurrency ${P.concurrency} (undici keep-alive), each site timed from its POST to status \`active\` (panel_sites watched every ${WATCH_MS} ms)`,
    ].join(' · '),
  );
  out.push('');

  out.push('### Throughput and end-to-end time');
  out.push('');
  out.push(
    table(
      ['sites', 'concurrency', 'wall time', 'sites/s', 'POST → active p50 / p90 / p99 ms', 'max ms', 'static p50 / p99 ms', 'PHP p50 / p99 ms', 'POST (201) p50 / p99 ms', 'not active'],
      [
        [
          `${active.length} of ${r.runs.length}`,
          P.concurrency,
          `${fixed(r.wallS, 1)} s`,
          fixed(rate, 2),
          pct(e2e),
          ms0(Math.max(...active.map((s) => s.e2e!))),
          `${ms0(phpOf(false).p50)} / ${ms0(phpOf(false).p99)}`,
          `${ms0(phpOf(true).p50)} / ${ms0(phpOf(true).p99)}`,
          `${ms0(post.p50)} / ${ms0(post.p99)}`,
          notActive.length ? `${notActive.length} (${notActive[0].status}: ${notActive[0].error ?? ''})` : '0',
        ],
      ],
    ),
  );
  out.push('');

  // Spread and the agents.
  out.push('### The scheduler\'s spread and the agents');
  out.push('');
  const service = (node: string, php: boolean) => summarize(r.segs.filter((s) => s.node === node && s.php === php).map((s) => s.nodeService));
  out.push(
    table(
      ['node', 'sites (static + PHP)', 'apply+report p50 / p90 ms static', 'PHP', 'busy', 'long polls that handed out ops; ops per pull mean / max', 'CPU s (ms per site)', 'peak RSS of the tree MB (node / nginx / php-fpm at the peak)', 'VmHWM MB node / nginx master / php-fpm master', 'processes'],
      r.agents.map((a, k) => {
        const sp = r.spread.get(a.name) ?? { static: 0, php: 0 };
        const t = r.agentTracked[k];
        const st = service(a.name, false);
        const ph = service(a.name, true);
        const busyMs = r.segs.filter((s) => s.node === a.name).reduce((acc, s) => acc + s.nodeService, 0);
        const batches = r.pulls.get(a.name) ?? [];
        const comm = (re: RegExp) => [...t.peakByComm].filter(([c]) => re.test(c)).reduce((acc, [, v]) => acc + v, 0);
        const h = r.hwm[k];
        return [
          a.name,
          `${sp.static + sp.php} (${sp.static} + ${sp.php})`,
          `${ms0(st.p50)} / ${ms0(st.p90)}`,
          `${ms0(ph.p50)} / ${ms0(ph.p90)}`,
          `${fixed((100 * busyMs) / 1000 / r.wallS, 0)} %`,
          `${batches.length}; ${fixed(mean(batches), 1)} / ${batches.length ? Math.max(...batches) : 0}`,
          `${fixed(t.cpuSeconds, 1)} (${fixed((t.cpuSeconds * 1000) / Math.max(1, sp.static + sp.php), 0)})`,
          `${mb(t.peakRss)} (${mb(comm(/^node$/))} / ${mb(comm(/^nginx$/))} / ${mb(comm(/^php-fpm/))})`,
          `${mb(h.node)} / ${mb(h.nginx)} / ${mb(h.fpm)}`,
          h.procs,
        ];
      }),
    ),
  );
  out.push('');
  out.push(
    '"apply+report": from the moment the agent could start the op (handed out, and the op before it on the node finished) to its result recorded by the panel — the agent applies one op at a time and reports each before the next. ' +
      '"busy": the sum of those over the wall time. CPU: user + system seconds of the agent\'s process tree over the run, including processes that ended meanwhile (`nginx -t`, `php-fpm -t`, nginx workers replaced by reloads: counted through their parent\'s cutime/cstime). ' +
      `RSS: the tree sampled every ${SAMPLE_MS} ms (pages shared between nginx or PHP-FPM processes are counted in each); VmHWM: the peak of the process itself.`,
  );
  out.push('');
  out.push(
    table(
      ['process', 'CPU s over the run', 'CPU ms per site', 'share of one core', 'peak RSS MB'],
      r.tracked
        .filter((t) => !r.agentTracked.includes(t))
        .map((t) => [
          t.label,
          fixed(t.cpuSeconds, 1),
          fixed((t.cpuSeconds * 1000) / Math.max(1, active.length), 1),
          `${fixed((100 * t.cpuSeconds) / r.wallS, 0)} %`,
          t.label.startsWith('benchmark') ? `${mb(r.benchHwm)} (VmHWM)` : t.label.startsWith('panel worker') ? `${mb(t.peakRss)} (node VmHWM ${mb(r.workerHwm)})` : mb(t.peakRss),
        ]),
    ),
  );
  out.push('');
  const agentCpu = r.agentTracked.reduce((a, t) => a + t.cpuSeconds, 0);
  const allCpu = r.tracked.reduce((a, t) => a + t.cpuSeconds, 0);
  out.push(
    `All measured processes: ${fixed(allCpu, 1)} CPU s in ${fixed(r.wallS, 1)} s = ${fixed(allCpu / r.wallS, 2)} cores of ${os.availableParallelism()} (agents ${fixed(agentCpu, 1)} s); ` +
      `the whole machine was busy ${fixed(r.machineCores, 2)} cores (/proc/stat), so other work took about ${fixed(Math.max(0, r.machineCores - allCpu / r.wallS), 2)} cores; 1-minute load average ${fixed(r.loadRange[0], 1)}–${fixed(r.loadRange[1], 1)} during the run. ` +
      `The benchmark's own client (POSTs and the panel_sites watch) runs in the panel API's process and is counted there. PostgreSQL's RSS counts its shared buffers once per backend.`,
  );
  out.push('');

  // Where the time goes.
  out.push('### Where the time goes (per site, from the node operation\'s timestamps)');
  out.push('');
  const parts: Array<[string, keyof Segments]> = [
    ['API: POST sent → operation queued (create transaction)', 'api'],
    ['queued → the agent starts it (long poll pickup, waiting behind the ops before it on the node)', 'nodeWait'],
    ['agent: apply on the node + report the result', 'nodeService'],
    [`result recorded → site active (the workflow's next status read, every ${NODE_OP_DEFAULTS.pollMs} ms, + finishSiteOp)`, 'workflow'],
    [`site active → seen by the benchmark (watch every ${WATCH_MS} ms)`, 'seen'],
  ];
  const meanE2e = mean(r.segs.map((s) => s.e2e));
  out.push(
    table(
      ['segment', 'mean ms', 'share of mean', 'p50 ms', 'p99 ms'],
      [
        ...parts.map(([label, key]) => {
          const xs = r.segs.map((s) => s[key] as number);
          const s = summarize(xs);
          return [label, ms0(mean(xs)), `${fixed((100 * mean(xs)) / meanE2e, 0)} %`, ms0(s.p50), ms0(s.p99)];
        }),
        ['POST → active (sum)', ms0(meanE2e), '100 %', ms0(summarize(r.segs.map((s) => s.e2e)).p50), ms0(summarize(r.segs.map((s) => s.e2e)).p99)],
      ],
    ),
  );
  out.push('');
  // Growth: the node's ops in fifths.
  const fifths = [0, 1, 2, 3, 4].map((f) => r.segs.filter((s) => Math.min(4, Math.floor(s.place * 5)) === f));
  out.push(
    table(
      ['ops of each node, in order', 'apply+report p50 ms static / PHP', 'queued → started mean ms', 'POST → active p50 / p99 ms'],
      fifths.map((list, f) => [
        `${f * 20}-${(f + 1) * 20} %`,
        `${ms0(summarize(list.filter((s) => !s.php).map((s) => s.nodeService)).p50)} / ${ms0(summarize(list.filter((s) => s.php).map((s) => s.nodeService)).p50)}`,
        ms0(mean(list.map((s) => s.nodeWait))),
        `${ms0(summarize(list.map((s) => s.e2e)).p50)} / ${ms0(summarize(list.map((s) => s.e2e)).p99)}`,
      ]),
    ),
  );
  out.push('');
  const a = r.access;
  const h = r.hist;
  const m = r.micro;
  const hs = (f: (x: History) => number) => fixed(mean(h.map(f)), 1);
  const phpSites = [...r.spread.values()].reduce((acc, v) => acc + v.php, 0);
  out.push(
    [
      `- Node API over the run: ${a.polls.length} long polls (GET /node/v1/operations; duration p50 ${ms0(summarize(a.polls).p50)} ms, p99 ${ms0(summarize(a.polls).p99)} ms), ` +
        `${[...r.pulls.values()].reduce((acc, b) => acc + b.length, 0)} of which handed out operations; ${a.results.length} result reports (p50 ${fixed(summarize(a.results).p50, 1)} ms, p99 ${fixed(summarize(a.results).p99, 1)} ms), ${a.heartbeats.length} heartbeats; POST /v1/orgs/{id}/sites in the server p50 ${fixed(summarize(a.creates).p50, 1)} ms, p99 ${fixed(summarize(a.creates).p99, 1)} ms. ` +
        `${r.pullGaps.length} times an op was already queued when the agent finished the op before it but came with the next long poll: that round trip (the result acknowledged, the next poll sent, the pull recorded, the op claimed) took p50 ${ms0(summarize(r.pullGaps).p50)} ms, p99 ${ms0(summarize(r.pullGaps).p99)} ms, ${fixed(r.pullGaps.reduce((x, y) => x + y, 0) / 1000, 1)} s of agent idle time in all. ${r.retried} operation(s) handed out more than once.`,
      `- Create transactions (${r.locks.waits.length} seen): waiting for the org chain's row locks (SELECT … FOR UPDATE of the path, the platform's row first) p50 ${ms0(summarize(r.locks.waits).p50)} ms, ` +
        `p99 ${ms0(summarize(r.locks.waits).p99)} ms, mean ${ms0(mean(r.locks.waits))} ms; holding them (placement, inserts, queueing the op, audit, COMMIT) p50 ${ms0(summarize(r.locks.holds).p50)} ms, ` +
        `p99 ${ms0(summarize(r.locks.holds).p99)} ms, of which the COMMIT p50 ${ms0(summarize(r.locks.commits).p50)} ms; held ${fixed((100 * r.locks.holds.reduce((x, y) => x + y, 0)) / 1000 / r.wallS, 0)} % of the wall time, so creates through one platform row top out near ` +
        `${fixed(1000 / mean(r.locks.holds), 1)}/s.`,
      `- Workflow per op (Temporal histories of ${h.length} node-op workflows spread over the run): ${hs((x) => x.events)} events, ${hs((x) => x.workflowTasks)} workflow tasks, ` +
        `${hs((x) => x.timers)} timers (status reads that found no result yet), ${hs((x) => x.markers)} local activities (readNodeOp each poll, finishSiteOp); ` +
        `workflow start → first task ${fixed(mean(h.map((x) => x.firstTaskMs)), 0)} ms; result recorded → the read that saw it mean ${fixed(mean(h.map((x) => x.noticedMs).filter(Number.isFinite)), 0)} ms ` +
        `(max ${fixed(Math.max(...h.map((x) => x.noticedMs).filter(Number.isFinite)), 0)} ms).`,
      `- Per op on the agent: one \`nginx -t\` and one nginx reload (SIGHUP, then polling the master's children every 50 ms until only new workers run) for every site; for a PHP site also \`php-fpm -t\` and a PHP-FPM reload (SIGUSR2, polling its log every 50 ms) — ` +
        `PHP-FPM logs counted ${m.fpmReloads.join(' + ')} = ${m.fpmReloads.reduce((x, y) => x + y, 0)} reloads for ${phpSites} PHP sites. ` +
        `At the end of the run on ${r.agents[0].name} (${m.vhosts} vhosts, ${m.pools} pools): \`nginx -t\` ${ms0(m.nginxT.ms)} ms${m.nginxT.ok ? '' : ' (FAILED)'}, \`php-fpm${PHP_VERSION} -t\` ${ms0(m.fpmT.ms)} ms${m.fpmT.ok ? '' : ' (FAILED)'} (median of 5), ` +
        `an nginx reload until only new workers run ${ms0(m.nginxReload)} ms (median of 5), a PHP-FPM reload until ready ${ms0(m.fpmReload)} ms (median of 3) — both timed with a 5 ms poll where the agent polls every 50 ms — ` +
        `and one scan of /proc for nginx's workers ${fixed(m.scan, 1)} ms (${m.procCount} processes on the machine). ` +
        `So a static op is about ${ms0(m.nginxT.ms + m.nginxReload)} ms of nginx test + reload and a PHP op about ${ms0(m.nginxT.ms + m.nginxReload + m.fpmT.ms + m.fpmReload)} ms with PHP-FPM's, against the measured apply+report p50 of ` +
        `${ms0(summarize(r.segs.filter((x) => !x.php).map((x) => x.nodeService)).p50)} and ${ms0(summarize(r.segs.filter((x) => x.php).map((x) => x.nodeService)).p50)} ms.`,
      `- Served: ${r.verify.served} of ${r.verify.checked} sampled active sites answered GET / by Host header on their own node's web port with their welcome page (PHP ones with "PHP 8.2.x is running")` +
        `${r.verify.wrong.length ? `; NOT: ${r.verify.wrong.slice(0, 3).join('; ')}` : ''}; an unknown Host answers ${r.verify.unknown}, a site of another node asked of ${r.agents[0].name} answers ${r.verify.elsewhere ?? 'n/a'}.`,
      `- Logs during the run: panel ${r.logs.panel.warn} warn / ${r.logs.panel.error} error${r.logs.panel.last ? ` (last: ${r.logs.panel.last.slice(0, 160)})` : ''}; worker ${r.logs.worker.warn} / ${r.logs.worker.error}; agents ${r.logs.agents.map((x) => `${x.warn} / ${x.error}`).join(', ')}` +
        `${r.logs.agents.some((x) => x.last) ? ` (last: ${r.logs.agents.find((x) => x.last)!.last.slice(0, 160)})` : ''}.`,
    ].join('\n'),
  );
  out.push('');

  // What bounds it, from the figures.
  const shares = parts.map(([label, key]) => ({ label, key, mean: mean(r.segs.map((x) => x[key] as number)) })).sort((x, y) => y.mean - x.mean);
  const busiest = Math.max(...r.agents.map((ag) => r.segs.filter((x) => x.node === ag.name).reduce((acc, x) => acc + x.nodeService, 0) / 1000 / r.wallS));
  const svcAll = mean(r.segs.map((x) => x.nodeService));
  const nodeCeiling = r.agents.length / (svcAll / 1000);
  const lockBusy = r.locks.holds.reduce((x, y) => x + y, 0) / 1000 / r.wallS;
  const lockCeiling = 1000 / mean(r.locks.holds);
  const nodeQueue = mean(r.segs.map((x) => x.nodeWait));
  const pieces: Array<[string, number]> = (
    [
      ['the nginx reload', r.micro.nginxReload],
      ['`nginx -t`', r.micro.nginxT.ms],
      ['the PHP-FPM reload (PHP sites)', r.micro.fpmReload],
      ['`php-fpm -t` (PHP sites)', r.micro.fpmT.ms],
    ] as Array<[string, number]>
  ).sort((x, y) => y[1] - x[1]);
  out.push(
    `What bounds it (generated from the figures above): ${fixed(rate, 2)} sites/s with ${P.concurrency} in flight is Little's law on a mean POST → active of ${ms0(meanE2e)} ms ` +
      `(${P.concurrency} / ${fixed(meanE2e / 1000, 2)} s = ${fixed(P.concurrency / (meanE2e / 1000), 2)} sites/s). Of that time, ${shares.map((x) => `${ms0(x.mean)} ms ${x.key === 'api' ? 'creating (API)' : x.key === 'nodeWait' ? 'queued for the agent' : x.key === 'nodeService' ? 'applying on the node' : x.key === 'workflow' ? 'waiting for the workflow to read the result' : 'until the benchmark saw it'}`).join(', ')}. ` +
      `Serial resources: each agent applies one op at a time (busiest ${fixed(100 * busiest, 0)} % busy; ${ms0(svcAll)} ms per op gives ${r.agents.length} agents a ceiling near ${fixed(nodeCeiling, 1)} sites/s), ` +
      `and every create transaction takes the platform's row lock (${fixed(100 * lockBusy, 0)} % held; ceiling near ${fixed(lockCeiling, 1)} creates/s). ` +
      (busiest >= 0.85
        ? `The agents are the bound: near saturation, the ${ms0(nodeQueue)} ms a site waits for its agent is queueing behind the serial applies, so more concurrency only lengthens that queue. ` +
          `Inside an apply, ${pieces.map(([k, v]) => `${k} ${ms0(v)} ms`).join(', ')} (at ${r.micro.vhosts} vhosts / ${r.micro.pools} pools): the nginx reload is ${pieces[0][0] === 'the nginx reload' ? 'the largest piece, paid once per site' : `not the largest piece (${pieces[0][0]} is)`}; ` +
          `long-poll round trips between ops cost ${fixed((100 * r.pullGaps.reduce((x, y) => x + y, 0)) / 1000 / (r.wallS * r.agents.length), 1)} % of the agents' time, and the workflow's status poll adds latency (${ms0(mean(r.segs.map((x) => x.workflow)))} ms mean) but no agent waits for it.`
        : lockBusy >= 0.85
          ? 'The create lock is the bound: creates queue on the platform row, and more concurrency only lengthens that queue.'
          : `Neither is saturated: the rate follows from the time each site spends in the pipeline, ${shares[0].key === 'workflow' ? `led by the workflow's ${NODE_OP_DEFAULTS.pollMs} ms status poll` : `led by "${shares[0].label}"`}; more sites in flight would raise it toward the agents' ceiling.`),
  );
  return out.join('\n');
}

// ---------------------------------------------------------------------------------------------

if (process.argv[2] === 'worker') {
  workerProcess().catch((err) => {
    process.stderr.write(`panel worker failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
} else {
  runBench(main, { budgetMs: P.budgetMs, log });
}
