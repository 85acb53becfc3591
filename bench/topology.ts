import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import Decimal from 'decimal.js';
import { Pool } from 'undici';
import { createAccount } from '../services/accounts/accounts';
import { HOLD_SWEEPER_SCHEDULE_ID } from '../domain/credits/reservation';
import { createKey } from '../services/keys/keys';
import { seedSimulatorCatalog } from '../simulator/seed';
import { startSimulator } from '../simulator/server';
import { loadConfig } from '../platform/config';
import { databaseUrl } from '../platform/database-url';
import { createDb, migrate, type Db } from '../platform/db';
import { temporalConnectOptions, temporalSecurity } from '../platform/temporal-connection';
import { TestCa } from '../test/helpers/pki';
import { check, passed, type Checks } from './chaos/audit';
import { startLoad, target, type Load, type Sent, type Target } from './chaos/load';
import { sleep, spawnChild, stopAll, TSX_BIN, type Child } from './children';
import { firstSignIn, send as panelSend } from './panel-harness';
import { currentLeader } from '../services/panel/nodes/controller';
import { addressOf, createNetwork, nsOf, setLink, SUBNET, teardown, type Host } from './topology/net';

// `npm run topology` (issue 35 item 6): the system on simulated hosts, one Linux network
// namespace per host on a private subnet (bench/topology/net.ts): a database host (PostgreSQL), a
// Temporal host (the dev server), two gateway hosts, two worker hosts (credits worker + relay;
// the first keeps the schedules), two panel hosts (panel-api serve with the node API and a
// controller candidate; the second with -no-hosting-node) and two hosting nodes (panel-host serve),
// every role from the compiled build. This script and the load run on a client host. Every process
// reaches the others by their subnet address only (its own 127.0.0.1 holds nothing of theirs) and
// keeps its files in a directory of its own. Under steady load through both gateways, one after
// the other: a gateway host's processes killed, a worker host's, the schedule owner's, a hosting
// node's link cut for 60 s, and the panel controller leader's panel-api killed; after each the
// money audit of `npm run chaos`, the time to takeover, and at the end every panel operation
// final. Appends the report to bench/topology-results.md; exits 1 when a check fails. Needs root.

const ROOT = path.resolve(__dirname, '..');
const RESULTS = path.join(__dirname, 'topology-results.md');
const T0 = Date.now();
const log = (msg: string) => process.stderr.write(`[topology +${((Date.now() - T0) / 1000).toFixed(0)}s] ${msg}\n`);

const HOSTS = {
  client: { name: 'client', octet: 100 },
  db: { name: 'db', octet: 2 },
  temporal: { name: 'temporal', octet: 3 },
  gw1: { name: 'gw1', octet: 11 },
  gw2: { name: 'gw2', octet: 12 },
  wk1: { name: 'wk1', octet: 21 },
  wk2: { name: 'wk2', octet: 22 },
  panel: { name: 'panel', octet: 31 },
  panel2: { name: 'panel2', octet: 32 },
  web1: { name: 'web1', octet: 41 },
  web2: { name: 'web2', octet: 42 },
} satisfies Record<string, Host>;

/**
 * The command of each role: the role commands of docs/deploy.md (`gateway`, `worker --queues
 * credits`, `panel-api serve`, `panel-host serve`) from the compiled build (`npm run build` runs
 * first), as the guide and deploy/systemd/ write them; TOPOLOGY_RUNTIME=tsx: from the sources
 * through tsx (to compare start-up time and memory). The database and Temporal hosts run the
 * embedded servers (bench/topology/roles/), standing in for managed ones.
 */
const FROM_DIST = process.env.TOPOLOGY_RUNTIME !== 'tsx';
const entry = (name: string) => (FROM_DIST ? [process.execPath, '--enable-source-maps', `dist/main/${name}.js`] : [TSX_BIN, `main/${name}.ts`]);
const ROLE = {
  database: [TSX_BIN, 'bench/topology/roles/database.ts'],
  temporal: [TSX_BIN, 'bench/topology/roles/temporal.ts'],
  gateway: entry('gateway-cli'),
  worker: [...entry('worker'), '--queues', 'credits'],
  panel: [...entry('panel-api-cli'), 'serve', '-node-api-listen', '0.0.0.0:8091', '-controller-state'],
  node: [...entry('panel-host'), 'serve'],
};

// Thresholds configured down so that takeovers happen within the run (defaults 60 s, 900 s, 120 s).
const DEAD_AFTER_S = 15;
const HOLD_TIMEOUT_S = 30;
const UPSTREAM_TIMEOUT_MS = 20_000;
const PLAN = { rate: Number(process.env.TOPOLOGY_RATE ?? 4), streams: 2, content: 'topology [sim tokens=8 latency=20]', streamContent: 'topology stream [sim tokens=24 chunk_delay=80]' };
const PHASE_MS = Number(process.env.TOPOLOGY_PHASE_SECONDS ?? 30) * 1000;
const LINK_DOWN_MS = 60_000;
const SECRET = 'topology run secret, not for production';
/** TOPOLOGY_PHASES=gateway,link (say) runs only those fault phases (steady, gateway, worker, schedule, link, controller); default all; `none`: start and stop only */
const PHASES = new Set((process.env.TOPOLOGY_PHASES ?? 'steady,gateway,worker,schedule,link,controller').split(','));
const roles: Role[] = [];
/** PostgreSQL with ssl=on admitting the subnet over TLS only (verify-full), Temporal behind an mTLS front; TOPOLOGY_TLS=0: plain */
const TLS = process.env.TOPOLOGY_TLS !== '0';

// ---------------------------------------------------------------------------------------------
// Hosts and their processes

/** A role's process on its host, started again by restart() (as a supervisor would). */
class Role {
  child: Child | null = null;
  private startedAt = 0;
  /** the first start: ms from spawn to its ready line, and the RSS of its processes then (MB) */
  firstStart: { readyMs: number; rssMb: number } | null = null;
  constructor(
    readonly name: string,
    readonly host: Host,
    private readonly command: string[],
    private readonly env: NodeJS.ProcessEnv,
  ) {}

  start(): Child {
    if (!roles.includes(this)) roles.push(this);
    fs.mkdirSync(this.dataDir, { recursive: true, mode: 0o755 });
    this.child = spawnChild(this.name, 'ip', ['netns', 'exec', nsOf(this.host), ...this.command], { ...process.env, ...this.env, DATA_DIR: this.dataDir }, ROOT);
    this.startedAt = Date.now();
    return this.child;
  }

  get dataDir(): string {
    return path.join(this.env.TOPO_RUN_DIR!, this.host.name);
  }

  /** Resolves with the first match of `pattern` in its output: by default its `ready` line (a role command logs `worker ready`, `gateway process ready`). */
  async ready(timeoutMs = 120_000, pattern = /(^|\n)ready\b[^\n]*|"msg":"(worker|gateway process) ready"/): Promise<string> {
    const child = this.child!;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const m = pattern.exec(child.output());
      if (m) {
        this.firstStart ??= { readyMs: Date.now() - this.startedAt, rssMb: rssOfGroup(child.pid) };
        return m[0];
      }
      if (child.exited()) throw new Error(`${this.name} exited (${await child.exit}) before it was ready:\n${child.output().slice(-3000)}`);
      if (Date.now() > deadline) throw new Error(`${this.name} not ready within ${timeoutMs} ms:\n${child.output().slice(-3000)}`);
      await sleep(100);
    }
  }

  /** kill -9 of every process of the role (its process group): the host's processes die. */
  async kill9(): Promise<void> {
    const child = this.child!;
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      // gone already
    }
    await child.exit;
  }
}

/** The process group of `pid` (null once it is gone). */
function pgidOf(pid: number): number | null {
  try {
    // "pid (comm) state ppid pgrp …"; comm may hold spaces, so split after its ')'
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
  } catch {
    return null;
  }
}

/** The resident memory of every process in process group `pgid` (a role's processes), in MB. */
function rssOfGroup(pgid: number): number {
  let kb = 0;
  for (const pid of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      if (pgidOf(Number(pid)) !== pgid) continue;
      kb += Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
    } catch {
      // exited meanwhile
    }
  }
  return Math.round(kb / 1024);
}

// ---------------------------------------------------------------------------------------------
// Phases

interface PhaseResult {
  name: string;
  sent: Sent[];
  takeover: string;
  checks: Checks | null;
  notes: string[];
}

const errorsOf = (sent: Sent[]) => {
  const by = new Map<string, number>();
  for (const s of sent) {
    const k = `${s.api}: ${s.answered ? 'answered' : s.status === 0 ? `connection failed (${s.error})` : `${s.status} ${s.error ?? ''}`.trim()}`;
    by.set(k, (by.get(k) ?? 0) + 1);
  }
  return [...by].sort().map(([k, v]) => `${k} ${v}`).join('; ');
};

async function waitFor<T>(what: string, timeoutMs: number, probe: () => Promise<T | null | undefined | false>): Promise<{ value: T; ms: number }> {
  const t = Date.now();
  for (;;) {
    const v = await probe().catch(() => null);
    if (v) return { value: v, ms: Date.now() - t };
    if (Date.now() - t > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(250);
  }
}

async function inner(): Promise<number> {
  const runDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gwtopo-'));
  fs.chmodSync(runDir, 0o755); // PostgreSQL (as 'postgres') and the node agents' www-data enter it
  const dbUrl = `postgres://postgres:postgres@${addressOf(HOSTS.db)}:5432/gateway`;
  const temporalAddress = `${addressOf(HOSTS.temporal)}:7233`;
  const common: NodeJS.ProcessEnv = {
    TOPO_RUN_DIR: runDir,
    TOPO_SUBNET: `${SUBNET}.0/24`,
    DATABASE_URL: dbUrl,
    TEMPORAL_ADDRESS: temporalAddress,
    LOG_LEVEL: 'warn',
    API_PROCESS_DEAD_AFTER_SECONDS: String(DEAD_AFTER_S),
    HOLD_TIMEOUT_SECONDS: String(HOLD_TIMEOUT_S),
    UPSTREAM_TIMEOUT_MS: String(UPSTREAM_TIMEOUT_MS),
    GATEWAY_DRAIN_SECONDS: '5',
    // secrets come from the environment, as on real hosts: nothing is shared through a file
    TESTRUN_SECRET: SECRET,
    PANEL_SECRET: SECRET,
    DB_POOL_MAX_GATEWAY: '10',
    DB_POOL_MAX_WORKER: '10',
    DB_POOL_MAX_PANEL: '10',
  };
  // TLS: certificates made here; each host gets its own copies in its own directory (no shared files).
  let tlsFiles: (host: Host, server?: 'db' | 'temporal') => NodeJS.ProcessEnv = () => ({});
  if (TLS) {
    const pki = path.join(runDir, 'pki');
    fs.mkdirSync(pki, { mode: 0o755 });
    const ca = new TestCa(pki, 'topology');
    const servers = { db: ca.issue('db', [`IP:${addressOf(HOSTS.db)}`], 'server'), temporal: ca.issue('temporal', ['temporal.internal'], 'server') };
    const client = ca.issue('role', ['topology-role'], 'client');
    tlsFiles = (host, server) => {
      const dir = path.join(runDir, host.name, 'tls');
      fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
      const copy = (file: string) => {
        const to = path.join(dir, path.basename(file));
        fs.copyFileSync(file, to);
        return to;
      };
      if (server) return { TOPO_TLS_CERT: copy(servers[server].cert), TOPO_TLS_KEY: copy(servers[server].key), TOPO_TLS_CA: copy(ca.cert) };
      const caCopy = copy(ca.cert);
      return {
        DATABASE_SSLMODE: 'verify-full',
        DATABASE_SSL_CA: caCopy,
        TEMPORAL_TLS_SERVER_CA_CERT_PATH: caCopy,
        TEMPORAL_TLS_CLIENT_CERT_PATH: copy(client.cert),
        TEMPORAL_TLS_CLIENT_KEY_PATH: copy(client.key),
        TEMPORAL_TLS_SERVER_NAME: 'temporal.internal',
      };
    };
  }
  const role = (name: string, host: Host, command: string[], env: NodeJS.ProcessEnv = {}) =>
    new Role(name, host, command, { ...common, TOPO_ADDRESS: addressOf(host), ...tlsFiles(host, host === HOSTS.db ? 'db' : host === HOSTS.temporal ? 'temporal' : undefined), ...env });
  const results: PhaseResult[] = [];
  const failures: string[] = [];
  let db: Db | null = null;
  let temporal: Client | null = null;
  try {
    // The database and Temporal hosts.
    const database = role('database', HOSTS.db, ROLE.database);
    const temporalHost = role('temporal', HOSTS.temporal, ROLE.temporal);
    database.start();
    temporalHost.start();
    await Promise.all([database.ready(), temporalHost.ready()]);
    log(`database ${dbUrl.replace(/:[^:@]*@/, ':…@')}, Temporal ${temporalAddress}`);
    // this script connects as the roles do, with the client host's own copies of the certificates
    const own = loadConfig({ DATABASE_URL: dbUrl, TEMPORAL_ADDRESS: temporalAddress, ...tlsFiles(HOSTS.client) });
    db = createDb(databaseUrl(own), 5);
    await migrate(db);
    temporal = new Client({ connection: await Connection.connect(temporalConnectOptions(temporalAddress, temporalSecurity(own))) });
    const sim = await startSimulator({ port: 8199, host: '0.0.0.0' });
    await seedSimulatorCatalog(db, `http://${addressOf(HOSTS.client)}:8199`);
    const account = await createAccount(db, { name: 'topology', tier: 'business', credits: '100000' });
    const { key } = await createKey(db, { accountId: account.id, label: 'topology', format: 'gw_ai' });

    // Two worker hosts and two gateway hosts, each one process of its role command (docs/deploy.md).
    // Worker host 1 starts first, so it takes the schedules' lock (platform/leader.ts) and keeps them.
    const KEEPS = /leader: this process keeps creditsSchedules/;
    // (at LOG_LEVEL info: the roles say `… ready` and `leader: …` there)
    const info = { LOG_LEVEL: 'info' };
    const workers = [role('worker-1', HOSTS.wk1, ROLE.worker, info), role('worker-2', HOSTS.wk2, ROLE.worker, info)];
    const gateways = [role('gateway-1', HOSTS.gw1, ROLE.gateway, { ...info, GATEWAY_PORT: '8080', GATEWAY_PROCESSES: '1' }), role('gateway-2', HOSTS.gw2, ROLE.gateway, { ...info, GATEWAY_PORT: '8080', GATEWAY_PROCESSES: '1' })];
    workers[0].start();
    await workers[0].ready(120_000, KEEPS);
    for (const r of [workers[1], ...gateways]) r.start();
    await Promise.all([...workers, ...gateways].map((r) => r.ready()));
    log('workers and gateways ready');
    const targets: Target[] = gateways.map((g) => target(g.name, `http://${addressOf(g.host)}:8080`, key));

    /** Runs load on both gateways around `fault`, then waits for quiescence and audits the money. */
    const phase = async (name: string, fault: (sentSoFar: () => Sent[]) => Promise<{ takeover: string; notes?: string[] }>) => {
      log(`phase: ${name}`);
      const sent: Sent[] = [];
      const loads: Load[] = targets.map((t) => startLoad(t, PLAN, (s) => sent.push(s)));
      let outcome: { takeover: string; notes?: string[] };
      try {
        outcome = await fault(() => sent);
      } finally {
        await Promise.all(loads.map((l) => l.stop()));
      }
      // Quiescence: every hold of the phase settled or released (the sweeper releases a dead API process's).
      const held = await waitFor('holds resolved', (DEAD_AFTER_S + 60 + HOLD_TIMEOUT_S) * 1000 + 60_000, async () => {
        const { rows } = await db!.raw(`SELECT count(*)::int AS n FROM reservations WHERE account_id = ? AND status = 'held'`, [account.id]);
        return rows[0].n === 0;
      }).catch((err: Error) => ({ ms: -1, value: err.message }));
      const checks = await check(db!, [account.id], null, sent, new Decimal(0));
      const ok = passed(checks);
      if (!ok) failures.push(`${name}: money audit failed`);
      const notes = [...(outcome.notes ?? []), held.ms < 0 ? `holds left: ${String(held.value)}` : `all holds resolved ${(held.ms / 1000).toFixed(1)} s after the load stopped`];
      results.push({ name, sent, takeover: outcome.takeover, checks, notes });
      log(`${name}: ${ok ? 'audit passed' : 'AUDIT FAILED'}; ${outcome.takeover}; ${errorsOf(sent)}`);
    };

    if (PHASES.has('steady')) await phase('steady load, no fault', async () => {
      await sleep(PHASE_MS);
      return { takeover: '—' };
    });

    if (PHASES.has('gateway')) await phase('gateway host 1: its processes killed (kill -9)', async (sentSoFar) => {
      await sleep(PHASE_MS / 3);
      const g = gateways[0];
      const killedAt = Date.now();
      await g.kill9();
      // Takeover: the dead process's holds released by the sweeper on a worker host; gateway 2 kept answering.
      await sleep(PHASE_MS / 3);
      g.start();
      await g.ready();
      const restartMs = Date.now() - killedAt;
      const released = await waitFor('the dead gateway’s holds released', 150_000, async () => {
        const { rows: held } = await db!.raw(`SELECT count(*)::int AS n FROM reservations WHERE account_id = ? AND status = 'held' AND created_at < to_timestamp(? / 1000.0)`, [account.id, killedAt]);
        return held[0].n === 0;
      });
      const during = sentSoFar().filter((s) => s.startedAt >= killedAt && s.startedAt < killedAt + restartMs);
      const other = during.filter((s) => s.api === 'gateway-2');
      return {
        takeover: `holds of the killed process released ${((Date.now() - killedAt) / 1000).toFixed(1)} s after the kill; gateway host 1 back (restarted, ready) after ${(restartMs / 1000).toFixed(1)} s`,
        notes: [`while host 1 was down: gateway 2 answered ${other.filter((s) => s.answered).length} of ${other.length} requests`, `release wait ${(released.ms / 1000).toFixed(1)} s after the restart`],
      };
    });

    const settledAfter = async (t: number) =>
      waitFor('a request answered after the fault settled', 120_000, async () => {
        const { rows } = await db!.raw(`SELECT count(*)::int AS n FROM reservations WHERE account_id = ? AND status = 'settled' AND created_at > to_timestamp(? / 1000.0)`, [account.id, t]);
        return rows[0].n > 0;
      });

    if (PHASES.has('worker')) await phase('worker host 2: its processes killed (kill -9)', async () => {
      await sleep(PHASE_MS / 3);
      const killedAt = Date.now();
      await workers[1].kill9();
      const s = await settledAfter(killedAt);
      await sleep(PHASE_MS / 3);
      workers[1].start();
      await workers[1].ready();
      return { takeover: `settlement went on on worker host 1: first request taken after the kill settled ${(s.ms / 1000).toFixed(1)} s after it`, notes: [`worker host 2 back after ${((Date.now() - killedAt) / 1000).toFixed(1)} s`] };
    });

    if (PHASES.has('schedule')) await phase('schedule owner (worker host 1): its processes killed (kill -9)', async () => {
      await sleep(PHASE_MS / 3);
      const killedAt = Date.now();
      await workers[0].kill9();
      // the other worker takes the schedules' lock once the dead one's session is gone
      await workers[1].ready(150_000, KEEPS);
      const tookOver = Date.now() - killedAt;
      const s = await settledAfter(killedAt);
      // The schedules live in Temporal: the next hold sweep runs on the surviving worker.
      const sweep = await waitFor('a hold sweep completed after the kill', 150_000, async () => {
        const d = await temporal!.schedule.getHandle(HOLD_SWEEPER_SCHEDULE_ID).describe();
        const after = d.info.recentActions.filter((a) => a.takenAt.getTime() > killedAt);
        if (!after.length) return null;
        const wf = temporal!.workflow.getHandle(after[0].action.workflow.workflowId, after[0].action.workflow.firstExecutionRunId);
        return (await wf.describe()).status.name === 'COMPLETED';
      });
      workers[0].start();
      await workers[0].ready();
      return {
        takeover: `worker host 2 kept the schedules ${(tookOver / 1000).toFixed(1)} s after the kill; first request after the kill settled after ${(s.ms / 1000).toFixed(1)} s; the next hold sweep completed on worker host 2 ${(sweep.ms / 1000).toFixed(1)} s after the kill (schedule every minute)`,
        notes: [`worker host 1 back after ${((Date.now() - killedAt) / 1000).toFixed(1)} s`],
      };
    });

    // Two panel hosts (docs/deploy.md): panel host 1 runs panel-api with the panel's own hosting node
    // and the panel worker, panel host 2 with -no-hosting-node; both serve the API and the node API
    // and compete for the controller's lock. And two hosting nodes, web-1 pulling from panel host 1,
    // web-2 from panel host 2.
    const PANEL_UP = /Panel\s+http:\S+/;
    const panel = role('panel', HOSTS.panel, ROLE.panel, { PANEL_PORT: '8090' });
    panel.start();
    const login = await panel.ready(180_000, /Panel login\s+admin \/ (\S+)/);
    const password = /admin \/ (\S+)/.exec(login)![1];
    const panel2 = role('panel-2', HOSTS.panel2, [...ROLE.panel, '-no-hosting-node'], { PANEL_PORT: '8090' });
    panel2.start();
    await panel2.ready(180_000, PANEL_UP);
    const panelPool = new Pool(`http://${addressOf(HOSTS.panel)}:8090`, { connections: 8 });
    const admin = await firstSignIn(panelPool, 'admin', password, 'topology admin password 2026');
    const nodes: Role[] = [];
    for (const [name, host, api] of [['web-1', HOSTS.web1, HOSTS.panel], ['web-2', HOSTS.web2, HOSTS.panel2]] as const) {
      const r = await panelSend(panelPool, 'POST', '/v1/cluster/nodes', admin, { name });
      if (r.status !== 201) throw new Error(`POST /v1/cluster/nodes ${name}: HTTP ${r.status} ${r.text}`);
      const node = role(name, host, [...ROLE.node, '-node', name, '-root', path.join(runDir, host.name, 'root'), '-panel', `http://${addressOf(api)}:8091`, '-token-file', path.join(runDir, host.name, 'token'), '-web-listen', `${addressOf(host)}:8201`]);
      fs.mkdirSync(node.dataDir, { recursive: true, mode: 0o755 });
      fs.writeFileSync(path.join(node.dataDir, 'token'), `${(JSON.parse(r.text) as { token: string }).token}\n`, { mode: 0o600 });
      node.start();
      nodes.push(node);
    }
    const alive = async (name: string) => {
      const r = await panelSend(panelPool, 'GET', `/v1/cluster/nodes/${name}`, admin);
      return r.status === 200 && (JSON.parse(r.text) as { node: { state: string } }).node.state === 'alive';
    };
    await waitFor('both hosting nodes alive', 120_000, async () => (await alive('web-1')) && (await alive('web-2')));
    log('panel and hosting nodes ready');
    const provider = await panelSend(panelPool, 'POST', '/v1/orgs', admin, { type: 'provider', name: 'Topology provider', login: { username: 'topo-provider', password: 'temporary provider password' } });
    if (provider.status !== 201) throw new Error(`POST /v1/orgs (provider): HTTP ${provider.status} ${provider.text}`);
    const parentId = (JSON.parse(provider.text) as { id: string }).id;
    const org = await panelSend(panelPool, 'POST', '/v1/orgs', admin, { type: 'customer', name: 'Topology customer', parent_id: parentId, login: { username: 'topo-customer', password: 'temporary customer password' } });
    if (org.status !== 201) throw new Error(`POST /v1/orgs: HTTP ${org.status} ${org.text}`);
    const orgId = (JSON.parse(org.text) as { id: string }).id;
    // placing a site on a named node is the platform's power (site.place): the admin creates them
    const createSite = async (domain: string, node: string) => {
      const r = await panelSend(panelPool, 'POST', `/v1/orgs/${orgId}/sites`, admin, { domain, node });
      if (r.status !== 201 && r.status !== 202) throw new Error(`POST sites ${domain}: HTTP ${r.status} ${r.text}`);
      return (JSON.parse(r.text) as { id: string }).id;
    };
    const siteStatus = async (id: string) => (await db!('panel_sites').where({ id }).first('status'))?.status as string;
    const before = [await createSite('before-1.topology.test', 'web-1'), await createSite('before-2.topology.test', 'web-2')];
    await waitFor('sites before the cut active', 120_000, async () => (await Promise.all(before.map(siteStatus))).every((s) => s === 'active'));

    if (PHASES.has('link')) await phase('hosting node web-1: its link cut for 60 s (ip link set … down)', async () => {
      setLink(HOSTS.web1, false);
      const cutAt = Date.now();
      const during = [await createSite('during-1.topology.test', 'web-1'), await createSite('during-2.topology.test', 'web-2')];
      const states: string[] = [];
      while (Date.now() - cutAt < LINK_DOWN_MS) {
        const r = await panelSend(panelPool, 'GET', '/v1/cluster/nodes/web-1', admin);
        const s = (JSON.parse(r.text) as { node: { state: string } }).node.state;
        if (states[states.length - 1] !== s) states.push(s);
        await sleep(2000);
      }
      const other = await siteStatus(during[1]);
      setLink(HOSTS.web1, true);
      const restoredAt = Date.now();
      const back = await waitFor('web-1 alive again', 120_000, () => alive('web-1'));
      await waitFor('the site placed on web-1 during the cut final', 300_000, async () => (await siteStatus(during[0])) !== 'pending');
      return {
        takeover: `web-1 alive again ${(back.ms / 1000).toFixed(1)} s after its link came back; its site queued during the cut ${await siteStatus(during[0])} ${((Date.now() - restoredAt) / 1000).toFixed(1)} s after`,
        notes: [`web-1 state during the cut: ${states.join(' → ')}`, `the site on web-2 created during the cut was ${other} before the link came back`],
      };
    });

    if (PHASES.has('controller')) await phase('panel controller leader: its panel-api killed (kill -9)', async () => {
      await sleep(PHASE_MS / 3);
      const before = await currentLeader(db!);
      if (!before) throw new Error('no panel controller leader');
      // the leader is `host:pid:…`; a role's processes share its process group
      const leaderPid = Number(before.leader.split(':')[1]);
      const holder = [panel, panel2].find((p) => p.child!.pid === leaderPid || pgidOf(leaderPid) === p.child!.pid);
      if (!holder) throw new Error(`the controller leader ${before.leader} is neither panel-api process`);
      const other = holder === panel ? panel2 : panel;
      // panel operations in flight at the kill: a site on each hosting node
      const started = [await createSite('controller-1.topology.test', 'web-1'), await createSite('controller-2.topology.test', 'web-2')];
      const killedAt = Date.now();
      await holder.kill9();
      const took = await waitFor('another panel-api leads the controller', 60_000, async () => {
        const now = await currentLeader(db!);
        return now && now.leader !== before.leader ? now : null;
      });
      const tookMs = Date.now() - killedAt;
      const newPid = Number(took.value.leader.split(':')[1]);
      const byOther = other.child!.pid === newPid || pgidOf(newPid) === other.child!.pid;
      if (!byOther) failures.push(`controller: taken over by ${took.value.leader}, not by ${other.name}`);
      // a supervisor (systemd's Restart=always) starts the killed one again
      holder.start();
      await holder.ready(180_000, PANEL_UP);
      const restartMs = Date.now() - killedAt;
      const final = await waitFor('the sites started before the kill final', 300_000, async () => (await Promise.all(started.map(siteStatus))).every((x) => x !== 'pending'));
      const statuses = await Promise.all(started.map(siteStatus));
      if (statuses.some((x) => x !== 'active')) failures.push(`controller: sites started before the kill ended ${statuses.join(', ')}`);
      return {
        takeover: `${other.name} took the controller lock ${(tookMs / 1000).toFixed(1)} s after ${holder.name} (the leader) was killed; the sites started before the kill ended ${statuses.join(', ')} ${((Date.now() - killedAt) / 1000).toFixed(1)} s after the kill`,
        notes: [`${holder.name} back (restarted, serving) after ${(restartMs / 1000).toFixed(1)} s`, `final wait ${(final.ms / 1000).toFixed(1)} s after its restart`, holder === panel ? 'the panel worker runs on panel host 1 beside its hosting node: operations waited for its restart' : 'panel host 1 (panel worker) kept running'],
      };
    });

    // Every panel operation final.
    const { rows: open } = await db.raw(`SELECT (SELECT count(*)::int FROM panel_sites WHERE status = 'pending') AS sites, (SELECT count(*)::int FROM panel_node_ops WHERE status IN ('queued', 'sent')) AS ops`);
    const { rows: siteRows } = await db.raw(`SELECT s.domain, s.node_name, s.status, s.error, o.status AS op, o.attempts FROM panel_sites s LEFT JOIN panel_node_ops o ON o.id = s.last_op_id ORDER BY s.domain`);
    type SiteRow = { domain: string; node_name: string; status: string; error: string | null; op: string | null; attempts: number | null };
    const finalNote = `panel: ${siteRows.map((s: SiteRow) => `${s.domain} on ${s.node_name} ${s.status} (operation ${s.op}, ${s.attempts} hand-out(s)${s.error ? `; ${s.error}` : ''})`).join(', ')}; pending sites ${open[0].sites}, node operations not final ${open[0].ops}`;
    if (open[0].sites !== 0 || open[0].ops !== 0) failures.push('panel operations not final');
    results.push({ name: 'panel operations at the end', sent: [], takeover: '—', checks: null, notes: [finalNote] });
    log(finalNote);
    await panelPool.close();
    await Promise.all(targets.map((t) => t.pool.close()));
    await sim.close();
  } catch (err) {
    failures.push(`run failed: ${err instanceof Error ? err.message : String(err)}`);
    log(`run failed: ${err instanceof Error ? err.stack : String(err)}`);
    for (const r of roles) log(`--- ${r.name}, last output:\n${r.child?.output().slice(-1500)}`);
  } finally {
    await temporal?.connection.close().catch(() => {});
    await db?.destroy().catch(() => {});
    const stops = await stopAll();
    log(`stopped: ${stops.join('; ')}`);
    fs.rmSync(runDir, { recursive: true, force: true });
  }
  fs.appendFileSync(RESULTS, render(results, failures));
  log(failures.length ? `FAILED: ${failures.join('; ')}` : 'passed');
  return failures.length ? 1 : 0;
}

function render(results: PhaseResult[], failures: string[]): string {
  const git = (args: string[]) => spawnSync('git', args, { cwd: ROOT }).stdout?.toString().trim() ?? '';
  const lines = [
    `## ${new Date().toISOString()} — commit ${git(['rev-parse', '--short', 'HEAD'])}${git(['status', '--porcelain']) ? ' (uncommitted changes)' : ''}`,
    '',
    `Hosts (network namespaces on ${SUBNET}.0/24): ${Object.values(HOSTS).map((h) => `${h.name} .${h.octet}`).join(', ')}. Load per gateway: ${PLAN.rate} requests/s + ${PLAN.streams} streams; ${TLS ? 'PostgreSQL over TLS (verify-full; hostssl only), Temporal over mTLS (server name override)' : 'plain connections'}; node ${process.version}, ${os.availableParallelism()} cores, load ${os.loadavg().map((l) => l.toFixed(2)).join('/')}.`,
    '',
    `Role commands ${FROM_DIST ? 'from the compiled build (`node --enable-source-maps dist/main/…`)' : 'from the sources through tsx'}; first start, spawn to ready, and the RSS of the role's processes then: ${roles
      .filter((r) => r.firstStart && !['database', 'temporal'].includes(r.name))
      .map((r) => `${r.name} ${(r.firstStart!.readyMs / 1000).toFixed(1)} s ${r.firstStart!.rssMb} MB`)
      .join(', ')}.`,
    '',
    '| phase | requests (answered) | takeover | money audit | notes |',
    '|---|---|---|---|---|',
    ...results.map((r) => {
      const c = r.checks;
      const audit = c ? `${passed(c) ? 'pass' : 'FAIL'}: ${c.answered} answered, not charged once ${c.answeredNotChargedOnce.length}, double ${c.doubleCharged}, holds left ${c.holdsLeft}, drift ${c.drift}` : '—';
      return `| ${r.name} | ${r.sent.length} (${r.sent.filter((s) => s.answered).length}) | ${r.takeover} | ${audit} | ${[...r.notes, r.sent.length ? errorsOf(r.sent) : ''].filter(Boolean).join('; ')} |`;
    }),
    '',
    failures.length ? `**Failed:** ${failures.join('; ')}` : '**Passed.**',
    '',
  ];
  return lines.join('\n') + '\n';
}

/** As root on the machine: makes the hosts, runs the rest on the client host, removes the hosts. */
function outer(): number {
  if (process.getuid?.() !== 0) {
    process.stderr.write('npm run topology needs root (ip netns add); nothing was done\n');
    return 2;
  }
  if (FROM_DIST) {
    // the roles run from the compiled build, as docs/deploy.md installs them
    const build = spawnSync('npm', ['run', 'build'], { cwd: ROOT, stdio: 'inherit' });
    if (build.status !== 0) {
      process.stderr.write('npm run build failed; nothing was run\n');
      return 1;
    }
  }
  createNetwork(Object.values(HOSTS));
  const stop = () => teardown();
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  try {
    const r = spawnSync('ip', ['netns', 'exec', nsOf(HOSTS.client), TSX_BIN, __filename], { cwd: ROOT, stdio: 'inherit', env: { ...process.env, TOPOLOGY_INNER: '1' } });
    return r.status ?? 1;
  } finally {
    teardown();
  }
}

if (process.env.TOPOLOGY_INNER === '1') {
  inner().then(
    (code) => process.exit(code),
    (err) => {
      process.stderr.write(`topology run failed: ${err instanceof Error ? err.stack : String(err)}\n`);
      process.exit(1);
    },
  );
} else process.exit(outer());
