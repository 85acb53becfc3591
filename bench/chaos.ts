import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection, WorkflowNotFoundError } from '@temporalio/client';
import Decimal from 'decimal.js';
import { createAccount } from '../services/accounts/accounts';
import { createKey } from '../services/keys/keys';
import { setRoute } from '../services/catalog/routes';
import { seedSimulatorCatalog } from '../simulator/seed';
import { startSimulator } from '../simulator/server';
import { createDb, migrate, type Db } from '../platform/db';
import { createLogger } from '../platform/logger';
import { startEmbeddedPostgres, type EmbeddedDatabase } from '../platform/postgres';
import { startTemporalDevServer, type DevServer } from '../platform/temporal-server';
import { killPostgres } from '../test/helpers/pg-crash';
import { freePorts, sleep, spawnChild, stopAll, TSX_BIN, type Child } from './children';
import { send, startLoad, target, type LoadPlan, type Sent, type Target } from './chaos/load';
import { startTcpProxy, type TcpProxy } from './chaos/tcp-proxy';
import { startBalancer, type Balancer } from './chaos/balancer';
import { check, passed, type Checks, type Prices } from './chaos/audit';
import { num, table } from './stats';

// `npm run chaos` (issue 14): the kill -9 fault matrix against a running system, every part in
// a process of its own as `npm start` runs them (PostgreSQL, the Temporal dev server with its
// SQLite file, the role commands `worker --queues credits` (with the settlement relay) and
// `gateway` for the credits and the keyed variant; the provider simulator runs in this process).
// The load mixes in `models` fallbacks, route retries after a 503 and response-cache hits (issue
// 36). Under load, one
// after the other: the API processes killed during streams and non-streaming requests; the
// worker killed between claims and their workflows' starts, and during settlement; Temporal
// killed and kept down 30 s; PostgreSQL killed (and started again, crash recovery); PostgreSQL
// killed and kept down 120 s (outcomes wait in the API processes' journals); a rolling restart
// (SIGTERM, drain, start) of two credits API processes behind a balancer. After each:
// the client-visible errors, the recovery time (the fault's end → every reservation it touched
// resolved), and the money checks: no reservation charged twice, every answered request charged
// exactly once with the charge its answer showed (at its answering model's prices), no hold left, ledger drift 0, the key's spend
// within its limit. A stream longer than every liveness threshold (configured down) runs across
// the worker, Temporal and PostgreSQL faults and must be charged. Appends the report to
// bench/chaos-results.md (CHAOS_RESULTS_FILE) with the commit; exits 1 when a check fails.

const ROOT = path.resolve(__dirname, '..');
const RESULTS = path.resolve(process.env.CHAOS_RESULTS_FILE ?? path.join(__dirname, 'chaos-results.md'));
const T0 = Date.now();
const BUDGET_MS = num('CHAOS_BUDGET_MS', 1_200_000);
const log = (msg: string) => process.stderr.write(`[chaos +${((Date.now() - T0) / 1000).toFixed(0)}s] ${msg}\n`);

// The thresholds, configured down so that the run stays short (defaults: 60 s, 900 s, 120 s).
const DEAD_AFTER_S = 15;
const HOLD_TIMEOUT_S = 30;
const UPSTREAM_TIMEOUT_MS = 20_000;
/** the long stream: 300 chunks 500 ms apart */
const LONG_STREAM = 'the long one [sim tokens=300 chunk_delay=500]';

const CONTENT = 'chaos [sim tokens=8 latency=20]';
const STREAM_CONTENT = 'chaos stream [sim tokens=24 chunk_delay=80]';

// The routing mix (issue 36). Fallback: FAILING's only route answers 503 (the simulator's default
// for its upstream model), so `models: [FALLBACK]` answers, charged at FALLBACK's prices out of a
// hold sized for the dearer FAILING. Retry: RETRYING's route has `retries` set and each ask's
// first attempt meets a 503 with Retry-After 1 s (see retryAsks).
const FAILING = { id: 'sim-reasoner', upstream: 'sim-reasoner-2026-01-15' };
const FALLBACK = 'sim-gpt';
const RETRYING = { id: 'sim-gpt-mini', provider: 'simulator', upstream: 'sim-gpt-mini-2026-01-15', retries: 3 };
const MIX_RATE = { credits: 2, keyed: 0.5 };
/** a quarter of the plain non-streaming requests opt in to the response cache with one content: hits */
const CACHED = { share: 0.25, content: `${CONTENT} (cached)`, headers: { 'x-gateway-cache': 'ttl=600' } };

/**
 * The retry asks. `status_times=N` answers the model's first N requests (since the simulator
 * started) with the status, so an ask's N is one more than the 503s given before it: the asks that
 * reached the simulator (an answer, or a provider error after every attempt) plus those under way.
 * One refused before routing (the database down, the key's limit) never reaches it and is not
 * counted; the few the count misses (a killed process) make later asks meet one 503 more or less.
 */
function retryAsks() {
  let reached = 0;
  let open = 0;
  return {
    ask: () => {
      open++;
      return { kind: 'retry', model: RETRYING.id, content: `chaos retry [sim status=503 retry_after=1 status_times=${reached + open} tokens=8 latency=20]` };
    },
    done: (s: Sent) => {
      open--;
      if (s.status === 200 || s.error?.startsWith('provider_')) reached++;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Processes

/** The role commands as `npm start` runs them (through tsx, as bench/children.ts expects: its SIGTERM goes to the node process under tsx). */
const WORKER = [TSX_BIN, 'main/worker.ts', '--queues', 'credits'];
const GATEWAY = [TSX_BIN, 'main/gateway-cli.ts'];
/** their ready lines at LOG_LEVEL info */
const READY = /"msg":"(worker|gateway process) ready"/;

/** A child process the run starts again when it dies on its own (as a supervisor would). */
class Supervised {
  child: Child | null = null;
  /** the current process logged its ready line (latched: its output buffer keeps only the last few KB) */
  isReady = false;
  held = false;
  stopping = false;
  /** exits nobody asked for */
  readonly unexpected: string[] = [];
  constructor(
    readonly name: string,
    private readonly command: string[],
    private readonly env: NodeJS.ProcessEnv,
  ) {}

  start(): void {
    const child = spawnChild(this.name, this.command[0], this.command.slice(1), this.env, ROOT);
    this.child = child;
    this.isReady = false;
    const watch = setInterval(() => {
      if (this.child !== child || child.exited()) clearInterval(watch);
      else if (READY.test(child.output())) {
        this.isReady = true;
        clearInterval(watch);
      }
    }, 20);
    void child.exit.then((how) => {
      if (this.held || this.stopping || this.child !== child) return;
      const last = child.output().trim().split('\n').slice(-1)[0]?.slice(0, 160) ?? '';
      this.unexpected.push(`${this.name} exited on its own (${how}) at +${((Date.now() - T0) / 1000).toFixed(0)} s: ${last}`);
      log(`${this.name} exited on its own (${how}); starting it again in 1 s`);
      setTimeout(() => {
        if (!this.held && !this.stopping && this.child === child) this.start();
      }, 1000);
    });
  }

  /** Resolves once the current process logged its ready line (a process that dies is replaced). */
  async ready(timeoutMs = 120_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (this.child && !this.child.exited() && this.isReady) return;
      await sleep(50);
    }
    throw new Error(`${this.name} not ready within ${timeoutMs} ms:\n${this.child?.output().slice(-2000)}`);
  }

  /** kill -9 of the process (its whole process group); not started again until restart(). */
  async kill9(): Promise<void> {
    this.held = true;
    const child = this.child!;
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      // gone already
    }
    await child.exit;
  }

  async restart(): Promise<void> {
    this.held = false;
    this.start();
    await this.ready();
  }

  /** SIGTERM (the process drains, then exits), then started again; how it exited. */
  async drainAndRestart(): Promise<string> {
    this.held = true;
    const how = await this.child!.stop(60_000);
    await this.restart();
    return how;
  }
}

/** Outcomes waiting in the outcome journals of the API processes at these URLs (their /metrics). */
async function journalDepth(urls: string[]): Promise<number> {
  const depths = await Promise.all(
    urls.map(async (u) => {
      const text = await fetch(`${u}/metrics`).then((r) => r.text(), () => '');
      return Number(/^credits_outcome_journal_entries (\S+)$/m.exec(text)?.[1] ?? 0);
    }),
  );
  return depths.reduce((a, b) => a + b, 0);
}


// ---------------------------------------------------------------------------------------------
// Phases

interface PhaseResult {
  name: string;
  fault: string;
  sent: Sent[];
  faultMs: number;
  recoveryMs: number | null;
  recoveryNote: string;
  checks: Checks;
  notes: string[];
  /** answers a clean fault must not produce (the rolling restart: 5xx, failed connections, cut streams); null: not counted */
  clientFailures: number | null;
}

const phasePassed = (x: PhaseResult) => passed(x.checks) && x.recoveryMs !== null && !x.clientFailures;

/** The routing mix of a phase: per kind, requests, answered, answered by a fallback, answered after a retry. */
const mixOf = (c: Checks) =>
  Object.entries(c.mix)
    .map(([k, m]) => {
      const others = Object.entries(m.unanswered).map(([why, n]) => `${why}: ${n}`);
      return `${k} ${m.answered} of ${m.sent} answered (${m.fellBack} by a fallback model, ${m.retried} after a retry, ${m.cacheHits} from the cache${others.length ? `; not answered: ${others.join(', ')}` : ''})`;
    })
    .join('; ');

function errorsOf(sent: Sent[]): string {
  const by = new Map<string, number>();
  for (const s of sent) {
    const k = s.answered ? '200 answered' : s.status === 0 ? `connection failed (${s.error})` : s.status === 200 ? `200 then ${s.error}` : `${s.status} ${s.error ?? ''}`.trim();
    by.set(k, (by.get(k) ?? 0) + 1);
  }
  return [...by]
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k}: ${v}`)
    .join('; ');
}

async function main(): Promise<number> {
  const commit = git(['rev-parse', '--short', 'HEAD']);
  const dirty = git(['status', '--porcelain']);
  const load0 = os.loadavg();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-chaos-'));
  fs.chmodSync(tmp, 0o755); // as root, PostgreSQL runs as the `postgres` user
  const logger = createLogger('warn');
  const [pgPort, temporalPort, simPort, creditsPort, keyedPort] = await freePorts(5);
  const pgDir = path.join(tmp, 'pg');
  const temporalOpts = { port: temporalPort, dbFile: path.join(tmp, 'temporal.sqlite'), pidFile: path.join(tmp, 'temporal.pid'), namespace: 'default', logger };
  let pg: EmbeddedDatabase | null = null;
  let temporal: DevServer | null = null;
  let db: Db | null = null;
  let proxy: TcpProxy | null = null;
  let balancer: Balancer | null = null;
  let sim: { url: string; close(): Promise<void> } | null = null;
  let connection: Connection | null = null;
  const supervised: Supervised[] = [];
  const targets: Target[] = [];
  cleanup = async () => {
    cleanup = async () => {};
    for (const s of supervised) s.stopping = true;
    await Promise.all(targets.map((t) => t.pool.destroy().catch(() => {})));
    for (const line of await stopAll()) log(line);
    await connection?.close().catch(() => {});
    await proxy?.close().catch(() => {});
    await balancer?.close().catch(() => {});
    await sim?.close().catch(() => {});
    await db?.destroy().catch(() => {});
    await (temporal as DevServer | null)?.stop().catch(() => {});
    await (pg as EmbeddedDatabase | null)?.stop().catch(() => {});
    fs.rmSync(tmp, { recursive: true, force: true });
  };
  try {
    log(`starting PostgreSQL and Temporal (${tmp})`);
    [pg, temporal] = await Promise.all([startEmbeddedPostgres({ dir: pgDir, port: pgPort, database: 'gateway', persistent: true, logger }), startTemporalDevServer(temporalOpts)]);
    db = createDb(pg.url, 5);
    await migrate(db);
    sim = await startSimulator({ port: simPort });
    await seedSimulatorCatalog(db, sim.url);
    // Cache hits are charged a cache-hit price above 0, so the audit's "every answered request charged exactly once" covers them too.
    await db('models').where({ id: 'sim-gpt' }).update({ cache_hit_credits: '0.000001' });
    await setRoute(db, { model: RETRYING.id, provider: RETRYING.provider, upstream: RETRYING.upstream, retries: RETRYING.retries });
    const failing = await fetch(`${sim.url}/_sim/behaviour`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: FAILING.upstream, status: 503 }) });
    if (!failing.ok) throw new Error(`simulator behaviour: ${failing.status} ${await failing.text()}`);
    const prices = new Map<string, Prices>(
      (await db('models').select('id', 'input_multiplier', 'output_multiplier', 'cache_multiplier', 'cache_creation_multiplier', 'cache_hit_credits')).map((m) => [m.id, m]),
    );
    const retries = retryAsks();
    /** the plain load's rate, a share of it opting in to the cache, and the routing mix */
    const plan = (rate: number, streams: number, mixRate: number): LoadPlan => ({
      rate: rate * (1 - CACHED.share),
      streams,
      content: CONTENT,
      streamContent: STREAM_CONTENT,
      mix: [
        { rate: rate * CACHED.share, ask: () => ({ kind: 'cache', content: CACHED.content, headers: CACHED.headers }) },
        { rate: mixRate, ask: () => ({ kind: 'fallback', model: FAILING.id, models: [FALLBACK], content: CONTENT }) },
        { rate: mixRate, ask: retries.ask, done: retries.done },
      ],
    });
    proxy = await startTcpProxy({ host: '127.0.0.1', port: temporalPort });
    connection = await Connection.connect({ address: temporal.address });
    const temporalClient = new Client({ connection });
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      DATA_DIR: tmp,
      DATABASE_URL: pg.url,
      TEMPORAL_ADDRESS: temporal.address,
      LOG_LEVEL: 'info',
      GATEWAY_PROCESSES: '1',
      API_PROCESS_DEAD_AFTER_SECONDS: String(DEAD_AFTER_S),
      HOLD_TIMEOUT_SECONDS: String(HOLD_TIMEOUT_S),
      UPSTREAM_TIMEOUT_MS: String(UPSTREAM_TIMEOUT_MS),
    };
    const apis = [
      new Supervised('api (credits)', GATEWAY, { ...env, GATEWAY_PORT: String(creditsPort), GATEWAY_VARIANT: 'credits' }),
      new Supervised('api (keyed)', GATEWAY, { ...env, GATEWAY_PORT: String(keyedPort), GATEWAY_VARIANT: 'keyed' }),
    ];
    // The worker reaches Temporal through a proxy the run can hold (claims commit, starts cannot leave).
    const worker = new Supervised('worker', WORKER, { ...env, TEMPORAL_ADDRESS: `127.0.0.1:${proxy.port}` });
    supervised.push(...apis, worker);
    for (const s of supervised) s.start();
    await Promise.all(supervised.map((s) => s.ready()));
    log('system ready');
    const creditsUrl = `http://127.0.0.1:${creditsPort}`;
    const keyedUrl = `http://127.0.0.1:${keyedPort}`;

    // A probe per variant: the system answers, and what one request holds and costs (for the key's limit).
    const probe = await account(db, 'probe', 'mt', null);
    const probeTarget = target('probe', keyedUrl, probe.key);
    targets.push(probeTarget);
    const p = await send(probeTarget, { content: CONTENT, stream: false });
    if (!p.answered || !p.cost) throw new Error(`probe failed: ${JSON.stringify(p)}`);
    const probeRow = await db('reservations').where({ id: p.id }).first('held_credits');
    const perRequest = new Decimal(p.cost);
    const held = new Decimal(probeRow.held_credits);
    log(`one request holds ${held.toFixed()} and costs ${perRequest.toFixed()}`);

    const results: PhaseResult[] = [];
    const phaseAccounts: string[] = [probe.accountId];

    /** One fault under load: `inject` returns when the system is whole again (the fault's end). */
    const phase = async (name: string, fault: string, inject: (notes: string[]) => Promise<void>, recoveryLimitMs: number, opts: { creditsUrl?: string; clean?: boolean } = {}) => {
      log(`${name}: load`);
      const notes: string[] = [];
      const credits = await account(db!, name, 'gw_ai', null);
      // The keyed key's limit binds during the phase: about 40 requests' worth.
      const keyed = await account(db!, `${name} keyed`, 'mt', perRequest.mul(40).plus(held).toFixed(12));
      phaseAccounts.push(credits.accountId, keyed.accountId);
      const tc = target(name, opts.creditsUrl ?? creditsUrl, credits.key);
      const tk = target(`${name} keyed`, keyedUrl, keyed.key);
      targets.push(tc, tk);
      const loads = [
        startLoad(tc, plan(25, 4, MIX_RATE.credits), () => {}),
        startLoad(tk, plan(6, 1, MIX_RATE.keyed), () => {}),
      ];
      let spendMax = new Decimal(0);
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          const k = await db!('api_keys').where({ id: keyed.keyId }).first('spend').catch(() => null);
          if (k && new Decimal(k.spend).gt(spendMax)) spendMax = new Decimal(k.spend);
          await sleep(200);
        }
      })();
      await sleep(5000);
      log(`${name}: ${fault}`);
      const faultStart = Date.now();
      notes.push(`the fault began ${new Date(faultStart).toISOString()}`);
      await inject(notes);
      const faultEnd = Date.now();
      log(`${name}: fault over after ${faultEnd - faultStart} ms; load goes on 5 s`);
      await sleep(5000);
      const sent = (await Promise.all(loads.map((l) => l.stop()))).flat();
      log(`${name}: ${sent.length} requests; waiting until every reservation is resolved`);
      const accounts = [credits.accountId, keyed.accountId];
      const deadline = Date.now() + recoveryLimitMs;
      while (Date.now() < deadline) {
        const left = await db!('reservations').whereIn('account_id', accounts).where({ status: 'held' }).count<{ n: number }[]>({ n: '*' }).first().catch(() => null);
        if (left && Number(left.n) === 0) break;
        await sleep(250);
      }
      sampling = false;
      await sampler;
      // Recovery: from the fault's end until the last reservation the fault touched (taken before its end) resolved.
      const rec = await db!.raw(
        `SELECT extract(epoch from max(settled_at)) * 1000 AS last, count(*) FILTER (WHERE status = 'held')::int AS held
         FROM reservations WHERE account_id = ANY(?::uuid[]) AND (created_at < to_timestamp(? / 1000.0) OR hold_recreated_at IS NOT NULL)`,
        [accounts, faultEnd],
      );
      const r = rec.rows[0];
      const recoveryMs = r.held > 0 ? null : Math.max(0, Number(r.last) - faultEnd);
      const recoveryNote = r.held > 0 ? `NOT recovered: ${r.held} still held after ${recoveryLimitMs / 1000} s` : '';
      const checks = await check(db!, accounts, keyed.keyId, sent, spendMax, prices);
      log(`${name}: mix ${mixOf(checks)}; ${checks.priced} answers priced`);
      for (const s of supervised) for (const u of s.unexpected.splice(0)) notes.push(u);
      // A clean fault: every request answered, or refused by the key's limit (403); never a 5xx, a failed connection or a cut stream.
      const failed = opts.clean ? sent.filter((s) => !s.answered && s.status !== 403) : [];
      const clientFailures = opts.clean ? failed.length : null;
      for (const s of failed.slice(0, 5)) notes.push(`failed: ${s.stream ? 'stream' : (s.kind ?? 'plain')} ${s.status} ${s.error}, sent ${s.startedAt - faultStart} ms after the fault began, ended ${s.endedAt - s.startedAt} ms later`);
      const result: PhaseResult = { name, fault, sent, faultMs: faultEnd - faultStart, recoveryMs, recoveryNote, checks, notes, clientFailures };
      results.push(result);
      log(`${name}: ${phasePassed(result) ? 'checks pass' : 'CHECKS FAIL'}; recovery ${recoveryMs ?? recoveryNote} ms`);
    };

    const describeAll = async (ids: string[]) => {
      const states = await Promise.all(
        ids.map(async (id) => {
          try {
            return (await temporalClient.workflow.getHandle(id).describe()).status.name;
          } catch (err) {
            return err instanceof WorkflowNotFoundError ? 'NOT_FOUND' : 'UNKNOWN';
          }
        }),
      );
      const by = new Map<string, number>();
      for (const s of states) by.set(s, (by.get(s) ?? 0) + 1);
      return by;
    };
    /** Claimed outcomes still held (of this run's accounts), claimed since `since`: their workflow ids and how many reservations. */
    const claimedHeld = async (since: Date | null) => {
      const rows: Array<{ id: string; n: number }> = (
        await db!.raw(
          `SELECT o.workflow_id AS id, count(*)::int AS n FROM settlement_outbox o JOIN reservations r ON r.id = o.reservation_id
           WHERE r.status = 'held' AND o.workflow_id IS NOT NULL AND r.account_id = ANY(?::uuid[]) ${since ? 'AND o.claimed_at >= ?' : ''}
           GROUP BY 1`,
          since ? [phaseAccounts, since] : [phaseAccounts],
        )
      ).rows;
      return { ids: rows.map((r) => r.id), reservations: rows.reduce((a, r) => a + r.n, 0) };
    };

    // 1. The API processes, killed during streams and non-streaming requests, started again at once.
    await phase('API processes killed', 'kill -9 of both gateway API processes (credits and keyed) mid-load, started again at once', async (notes) => {
      await Promise.all(apis.map((a) => a.kill9()));
      await Promise.all(apis.map((a) => a.restart()));
      notes.push(`the dead processes' holds without an outcome are released by the hold-sweeper schedule (every 60 s) once their heartbeat is ${DEAD_AFTER_S} s old`);
    }, 150_000);

    // The long stream, across the worker, Temporal and PostgreSQL faults.
    const longAccount = await account(db, 'long stream', 'gw_ai', null);
    phaseAccounts.push(longAccount.accountId);
    const longTarget = target('long stream', creditsUrl, longAccount.key);
    targets.push(longTarget);
    const longStarted = Date.now();
    const longStream = send(longTarget, { content: LONG_STREAM, stream: true });
    log('long stream started');

    // 2. The worker, killed between claims and their workflows' starts.
    await phase('worker killed between claim and start', 'the worker’s link to Temporal held (its starts wait in the proxy) until new claims commit, then kill -9 of the worker; started again', async (notes) => {
      const since = new Date((await db!.raw('SELECT now() AS t')).rows[0].t);
      proxy!.hold();
      // The relay claims a batch, then its start waits (up to 5 s) in the proxy.
      const until = Date.now() + 15_000;
      let claimed = { ids: [] as string[], reservations: 0 };
      while (Date.now() < until && claimed.ids.length === 0) {
        await sleep(100);
        claimed = await claimedHeld(since);
      }
      await worker.kill9();
      proxy!.drop();
      const states = await describeAll(claimed.ids);
      notes.push(
        `at the kill, ${claimed.reservations} reservations claimed in ${claimed.ids.length} batch(es) since the link was held; their workflows in Temporal: ` +
          `${[...states].map(([k, v]) => `${k} ${v}`).join(', ') || 'none'} (NOT_FOUND: claimed, never started)`,
      );
      proxy!.release();
      await worker.restart();
    }, 90_000);

    // 3. The worker, killed during settlement.
    await phase('worker killed during settlement', 'kill -9 of the worker while settlement workflows run; started again after 2 s', async (notes) => {
      let claimed = { ids: [] as string[], reservations: 0 };
      const until = Date.now() + 10_000;
      while (Date.now() < until && claimed.ids.length === 0) {
        claimed = await claimedHeld(null);
        if (!claimed.ids.length) await sleep(20);
      }
      await worker.kill9();
      const states = await describeAll(claimed.ids);
      notes.push(`at the kill, ${claimed.reservations} claimed reservations not yet settled in ${claimed.ids.length} workflow(s); in Temporal: ${[...states].map(([k, v]) => `${k} ${v}`).join(', ') || 'none'}`);
      await sleep(2000);
      await worker.restart();
    }, 90_000);

    // 4. Temporal, killed and kept down 30 s.
    await phase('Temporal killed for 30 s', 'kill -9 of the Temporal dev server, started again 30 s later on the same SQLite file', async (notes) => {
      const pid = Number(fs.readFileSync(temporalOpts.pidFile, 'utf8').trim());
      process.kill(pid, 'SIGKILL');
      await sleep(30_000);
      temporal = await startTemporalDevServer(temporalOpts);
      await worker.ready();
      notes.push('API answers never wait for Temporal; recorded outcomes wait in PostgreSQL and the relay starts their workflows again (stale claims after 10 s)');
    }, 90_000);

    // 5. PostgreSQL, killed and started again (crash recovery), three times 3 s apart.
    await phase('PostgreSQL killed (3 times)', 'kill -9 of PostgreSQL (the server and every process of it), started again at once (crash recovery); three times, 3 s apart', async (notes) => {
      const restarts: string[] = [];
      for (let i = 0; i < 3; i++) {
        if (i) await sleep(3000);
        const t = Date.now();
        const pids = await killPostgres(pgDir);
        pg = await startEmbeddedPostgres({ dir: pgDir, port: pgPort, database: 'gateway', persistent: true, logger });
        restarts.push(`${pids.length} processes, up again in ${((Date.now() - t) / 1000).toFixed(1)} s`);
      }
      notes.push(`kills: ${restarts.join('; ')}; an outcome write that met an outage waits in its process's outcome journal until the database takes it`);
    }, 90_000);

    // 6. PostgreSQL, killed and kept down 120 s: answers that end meanwhile keep their outcomes in the journals.
    await phase('PostgreSQL down 120 s', 'kill -9 of PostgreSQL, kept down 120 s, started again (crash recovery)', async (notes) => {
      await killPostgres(pgDir);
      let most = 0;
      const until = Date.now() + 120_000;
      while (Date.now() < until) {
        most = Math.max(most, await journalDepth([creditsUrl, keyedUrl]));
        await sleep(2000);
      }
      pg = await startEmbeddedPostgres({ dir: pgDir, port: pgPort, database: 'gateway', persistent: true, logger });
      const back = Date.now();
      while ((await journalDepth([creditsUrl, keyedUrl])) > 0 && Date.now() - back < 60_000) await sleep(250);
      const left = await journalDepth([creditsUrl, keyedUrl]);
      notes.push(`at most ${most} outcomes waited in the two API processes' outcome journals; ${left === 0 ? `all written ${((Date.now() - back) / 1000).toFixed(1)} s after the database was back` : `${left} STILL WAITING 60 s after the database was back`}`);
    }, 180_000);

    // 7. A rolling restart: two credits API processes behind a balancer, each drained (SIGTERM) and started again in turn.
    const [rollA, rollB] = await freePorts(2);
    const rolling = [rollA, rollB].map((p, i) => new Supervised(`api (credits ${i + 1})`, GATEWAY, { ...env, GATEWAY_PORT: String(p), GATEWAY_VARIANT: 'credits', GATEWAY_DRAIN_SECONDS: '30' }));
    supervised.push(...rolling);
    for (const r of rolling) r.start();
    await Promise.all(rolling.map((r) => r.ready()));
    balancer = await startBalancer([rollA, rollB]);
    await phase('rolling restart of two API processes', 'two credits API processes behind a balancer (a refused connection is tried on the other); each in turn gets SIGTERM (drains up to 30 s, exits), is started again and is ready before the next', async (notes) => {
      const how: string[] = [];
      for (const r of rolling) how.push(await r.drainAndRestart());
      notes.push(`${how.join('; ')}; the balancer sent ${balancer!.retried()} connection(s) to the other process because the first refused; streams last about 2 s, under the 30 s grace`);
    }, 90_000, { creditsUrl: `http://127.0.0.1:${balancer.port}`, clean: true });

    log('waiting for the long stream');
    const long = await longStream;
    const longMs = long.endedAt - longStarted;
    let longCheck: Checks | null = null;
    const until = Date.now() + 30_000;
    while (Date.now() < until && (await db('reservations').where({ account_id: longAccount.accountId, status: 'held' }).first('id'))) await sleep(250);
    longCheck = await check(db, [longAccount.accountId], null, [long], new Decimal(0), prices);

    // Everything of the run, the probe and the long stream included.
    const all = await check(db, phaseAccounts, null, [], new Decimal(0));
    const loadEnd = os.loadavg();
    const text = render({ commit, dirty, load0, load1: loadEnd, results, long, longMs, longCheck, all, perRequest, held });
    process.stdout.write(text + '\n');
    fs.appendFileSync(RESULTS, (fs.existsSync(RESULTS) ? '\n' : '# Chaos results\n\nAppended by `npm run chaos` (bench/chaos.ts); one section per run.\n\n') + text + '\n');
    log(`appended to ${path.relative(ROOT, RESULTS)}`);
    const ok = results.every(phasePassed) && long.answered && passed(longCheck) && passed(all);
    return ok ? 0 : 1;
  } finally {
    await cleanup();
  }
}

/** Stops what the run started (children, servers, pools); set by main as things start. */
let cleanup: () => Promise<void> = async () => {
  for (const line of await stopAll()) log(line);
};

async function account(db: Db, name: string, format: 'gw_ai' | 'mt', spendLimit: string | null) {
  const a = await createAccount(db, { name: `chaos ${name}`, tier: 'pro', credits: '1000' });
  const k = await createKey(db, { accountId: a.id, label: 'chaos', format, settings: spendLimit ? { spend_limit: spendLimit } : {} });
  return { accountId: a.id, keyId: k.id, key: k.key };
}

function git(args: string[]): string {
  try {
    return execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

// ---------------------------------------------------------------------------------------------

interface Report {
  commit: string;
  dirty: string;
  load0: number[];
  load1: number[];
  results: PhaseResult[];
  long: Sent;
  longMs: number;
  longCheck: Checks;
  all: Checks;
  perRequest: Decimal;
  held: Decimal;
}

function render(r: Report): string {
  const out: string[] = [];
  const paths = r.dirty ? r.dirty.split('\n').map((l) => l.replace(/^\s*\S+\s/, '')).filter((p) => /credits|chaos|hold|outbox|relay/.test(p)) : [];
  out.push(`## ${new Date().toISOString()} · commit ${r.commit}${paths.length ? ` (uncommitted: ${paths.join(', ')})` : ''}`);
  out.push('');
  out.push(
    `node ${process.version} · nproc ${os.availableParallelism()} · load average ${r.load0.map((v) => v.toFixed(2)).join('/')} at start, ${r.load1.map((v) => v.toFixed(2)).join('/')} at end · ` +
      `PostgreSQL (embedded), Temporal dev server (SQLite file), the role commands \`worker --queues credits\` (worker + relay) and \`gateway\` (GATEWAY_PROCESSES=1) for the credits and the keyed API: one process each; simulator in the run's process. ` +
      `Thresholds configured down: API_PROCESS_DEAD_AFTER_SECONDS=${DEAD_AFTER_S}, HOLD_TIMEOUT_SECONDS=${HOLD_TIMEOUT_S}, UPSTREAM_TIMEOUT_MS=${UPSTREAM_TIMEOUT_MS}; the hold sweeper runs every 60 s, stale claims are started again after 10 s. ` +
      `Load per fault: credits API 25 non-streaming req/s + 4 streams (24 chunks, 80 ms apart) back to back; keyed API 6 req/s + 1 stream, its key's spend limit ≈ 40 requests (${r.perRequest.toFixed()} each, ${r.held.toFixed()} held), so it binds. ` +
      `A quarter of each API's non-streaming requests opt in to the response cache (\`x-gateway-cache: ttl=600\`, one content: hits, charged sim-gpt's cache-hit price). Routing mix on top, ${MIX_RATE.credits} req/s each on the credits API and ${MIX_RATE.keyed} on the keyed: fallback (\`${FAILING.id}\`, whose route answers 503, with \`models: ["${FALLBACK}"]\`) and retry (\`${RETRYING.id}\`, route retries ${RETRYING.retries}, its first attempt answered 503 with Retry-After 1 s); every non-streaming answer's charge must also be its answering model's table price (a cache hit's: the cache-hit price). ` +
      `5 s of load before each fault and 5 s after its end.`,
  );
  out.push('');
  out.push('### Faults');
  out.push('');
  const yes = (b: boolean) => (b ? 'yes' : 'NO');
  out.push(
    table(
      ['fault', 'requests', 'client-visible outcomes (by status)', 'fault lasted', 'recovery (fault end → all it touched resolved)', 'charged twice', 'answered, not charged exactly once', 'holds left', 'ledger drift', 'key spend ≤ limit (max seen / limit)', 'passed'],
      r.results.map((x) => [
        x.name,
        x.sent.length,
        errorsOf(x.sent),
        `${(x.faultMs / 1000).toFixed(1)} s`,
        x.recoveryMs === null ? x.recoveryNote : `${(x.recoveryMs / 1000).toFixed(1)} s`,
        x.checks.doubleCharged + x.checks.chargeRowMismatch,
        `${x.checks.answeredNotChargedOnce.length} of ${x.checks.answered}`,
        x.checks.holdsLeft,
        x.checks.drift,
        `${yes(x.checks.keyOk)} (${x.checks.keySpendMax} / ${x.checks.keyLimit})`,
        yes(phasePassed(x)),
      ]),
    ),
  );
  out.push('');
  for (const x of r.results) {
    const clean = x.clientFailures === null ? '' : ` ${x.clientFailures} request(s) failed on the client's side (5xx, failed connection or cut stream; must be 0).`;
    out.push(`- **${x.name}**: ${x.fault}.${clean} Mix: ${mixOf(x.checks)}; ${x.checks.priced} non-streaming answers' charges checked against their answering model's price. ${x.checks.abandoned} hold(s) released at 0 as abandoned (requests cut off, never answered); ${x.checks.recreated} hold(s) lost and written again by their outcome write.${x.notes.length ? ' ' + x.notes.join('; ') + '.' : ''}`);
    for (const b of x.checks.answeredNotChargedOnce.slice(0, 5)) out.push(`  - not charged exactly once: ${b}`);
  }
  out.push('');
  const lc = r.longCheck;
  out.push(
    `Long stream (stands in for the 30-minute one: longer than every threshold above and than a sweeper period, across the worker, Temporal and PostgreSQL faults): ` +
      `${(r.longMs / 1000).toFixed(0)} s, ${r.long.answered ? 'answered in full' : `NOT answered (${r.long.status} ${r.long.error})`}, ` +
      `${lc.answeredNotChargedOnce.length === 0 && r.long.answered ? `charged once (${r.long.cost} credits, as its answer showed)` : `NOT charged exactly once: ${lc.answeredNotChargedOnce.join('; ')}`}.`,
  );
  out.push('');
  const a = r.all;
  out.push(
    `Whole run (every account): ${a.doubleCharged + a.chargeRowMismatch} reservations charged twice or with ledger rows that differ, ${a.holdsLeft} holds left, ledger drift ${a.drift}, ${a.recreated} holds written again after the PostgreSQL crash. ` +
      `${r.results.every(phasePassed) && r.long.answered && passed(lc) && passed(a) ? 'Every check passed.' : 'SOME CHECKS FAILED.'}`,
  );
  return out.join('\n');
}

// ---------------------------------------------------------------------------------------------

let exiting = false;
const bail = (why: string, code: number) => {
  if (exiting) return;
  exiting = true;
  log(`${why}: stopping everything`);
  void cleanup().finally(() => process.exit(code));
};
process.on('SIGINT', () => bail('SIGINT', 130));
process.on('SIGTERM', () => bail('SIGTERM', 143));
setTimeout(() => bail('time budget exceeded (CHAOS_BUDGET_MS)', 1), BUDGET_MS).unref();

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`chaos run failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
