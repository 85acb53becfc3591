import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Heartbeat, NodeFacts, NodeOperation } from '../../../domain/panel/node-ops';
import type { PanelRuntime } from '../../../main/panel-api';
import { insertLogin } from '../../../services/panel/logins/logins';
import { addNode, getNode, nodeRefusal, selectableNodes } from '../../../services/panel/nodes/nodes';
import { operationStatus, queueOperation } from '../../../services/panel/nodes/queue';
import { hashPassword } from '../../../services/panel/logins/passwords';
import { createOrgWithLogin, PanelClient, platformAdmin, signInFresh, startPanel, unique } from '../../helpers/panel';
import { env } from '../../setup/env';

// The panel's side of the cluster (spec 2 sections 2.6, 3, 4.1, 4.3; PANEL.md sections 1, 2, 4):
// node records, the node API agents call (enrol, long poll, results, heartbeats) and the operator's
// panel-controller command line.

const ROOT = path.join(__dirname, '../../..');

/** A panel process with the node API on a free port and node records access. */
async function startClusterPanel(flags: string[] = ['-controller-state', '-node-api-listen', '127.0.0.1:0']): Promise<PanelRuntime> {
  return startPanel({ flags });
}

const FACTS: NodeFacts = { webServer: 'builtin', phpVersions: [], mariadb: false, roles: ['web'], webAddress: '127.0.0.1:18080' };

const heartbeat = (o: Partial<Heartbeat> & { bootId?: string } = {}): Heartbeat => ({
  facts: FACTS,
  metrics: {
    bootId: o.bootId ?? 'boot-1',
    uptimeSeconds: 3600,
    cpuPercent: 12.5,
    load: [0.5, 0.25, 0.125],
    memory: { totalMb: 4096, availableMb: 2048 },
    rootFs: { totalMb: 100_000, freeMb: 60_000 },
    network: { rxBytes: 1000, txBytes: 2000 },
    sampledAt: new Date().toISOString(),
  },
  usage: [],
  agentStartedAt: '2026-01-01T00:00:00.000Z',
  reconnects: 0,
  ...o,
});

/** An agent's calls to the node API. */
class Agent {
  constructor(
    readonly base: string,
    readonly name: string,
    readonly token: string,
  ) {}

  async call(method: string, p: string, body?: unknown, token = this.token) {
    const res = await fetch(`${this.base}/node/v1${p}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, json: text ? JSON.parse(text) : undefined };
  }

  enrol = (agentStartedAt = '2026-01-01T00:00:00.000Z', token = this.token) => this.call('POST', '/enrol', { node: this.name, facts: FACTS, agentStartedAt }, token);
  heartbeat = (hb: Heartbeat) => this.call('POST', '/heartbeat', hb);
  poll = (wait: number) => this.call('GET', `/operations?wait=${wait}`);
  result = (id: string, r: unknown) => this.call('POST', `/operations/${id}/result`, r);
}

/** Runs panel-controller; with `dataDir` and no DATABASE_URL, as an operator next to `npm start` does. */
function controllerCli(args: string[], dataDir?: string): Promise<{ code: number | null; json: any; stderr: string }> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const { DATABASE_URL: _url, ...rest } = process.env;
  void _url;
  const childEnv = dataDir ? { ...rest, DATA_DIR: dataDir } : { ...process.env, DATABASE_URL: env.databaseUrl };
  return new Promise((resolve, reject) => {
    const child = spawn('npx', ['tsx', 'admin/panel-controller.ts', ...args], { cwd: ROOT, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += String(d)));
    child.stderr.on('data', (d) => (err += String(d)));
    child.once('error', reject);
    child.once('exit', (code) => {
      const lines = out.trim().split('\n');
      let json;
      try {
        json = JSON.parse(lines[lines.length - 1]);
      } catch {
        json = undefined;
      }
      resolve({ code, json, stderr: err });
    });
  });
}

const siteOp = (): Extract<NodeOperation, { kind: 'site.apply' }> => ({
  id: randomUUID(),
  kind: 'site.apply',
  site: { id: randomUUID(), domain: `${unique('s')}.example.com`, aliases: [], phpVersion: null, cron: [], suspended: false, php: { workers: null, allowUrlFopen: false, disabledFunctions: [] }, generation: 1 },
});

describe('panel: cluster nodes and the node API', function () {
  this.timeout(60_000);
  let panel: PanelRuntime;
  let admin: PanelClient;

  before(async function () {
    this.timeout(60_000);
    panel = await startClusterPanel();
    admin = await platformAdmin(panel.url);
  });
  after(async () => {
    await panel?.close();
  });

  async function addAgent(): Promise<Agent> {
    const name = unique('node-');
    const r = await admin.post('/v1/cluster/nodes', { name });
    assert.equal(r.status, 201, JSON.stringify(r.json));
    return new Agent(panel.nodeApiUrl!, name, r.json.token);
  }

  it('the hosting node exists from the start; a platform_admin adds a node and gets its token once (stored as a SHA-256)', async () => {
    const hosting = await admin.get('/v1/cluster/nodes/hosting');
    assert.equal(hosting.status, 200, 'the hosting node is readable from the start');
    assert.equal(hosting.json.node.kind, 'hosting', 'the hosting node is of kind hosting');
    assert.equal(hosting.json.node.state, 'alive', 'the hosting node is alive from the start');

    const name = unique('node-');
    const r = await admin.post('/v1/cluster/nodes', { name });
    assert.equal(r.status, 201, `a platform_admin adds a node: ${JSON.stringify(r.json)}`);
    assert.equal(r.json.name, name, 'the added node has the name asked for');
    assert.match(r.json.token, /^pnd_[A-Za-z0-9_-]{43}$/, 'the token is shown once in the pnd_ format');
    const row = await env.db('panel_nodes').where({ name }).first();
    assert.notEqual(row.token_hash, r.json.token, 'the stored token is not the token itself');
    assert.match(row.token_hash, /^[0-9a-f]{64}$/, 'the stored token is a SHA-256 hex digest');

    const read = await admin.get(`/v1/cluster/nodes/${name}`);
    assert.equal(read.status, 200, 'the added node is readable');
    assert.equal(read.json.node.token, undefined, 'a node read never shows the token');
    assert.equal(read.json.node.token_hash, undefined, 'a node read never shows the token hash');
    assert.equal(read.json.node.state, 'dead', 'never heard from');
    const list = await admin.get('/v1/cluster/nodes');
    assert.equal(list.json.state_available, true, 'the node list says state is available');
    assert.equal(list.json.nodes[0].name, 'hosting', 'the hosting node is listed first');
    assert.ok(list.json.nodes.some((n: { name: string }) => n.name === name), `the enrolled node ${name} is listed`);

    assert.equal((await admin.post('/v1/cluster/nodes', { name })).status, 409, 'a name already taken is refused with 409');
    const bad = await admin.post('/v1/cluster/nodes', { name: 'Not A Label' });
    assert.equal(bad.status, 400, 'a name that is not a DNS label is refused with 400');
    assert.equal(bad.json.error.details.field, 'name', 'the refusal names the name field');
    assert.equal((await admin.post('/v1/cluster/nodes', { name: 'hosting' })).status, 409, "the hosting node's name cannot be taken");
    assert.equal((await admin.get('/v1/cluster/nodes/no-such-node')).status, 404, 'an unknown node is 404');
    const audited = await env.db('panel_audit').where({ action: 'node.add', target_id: name }).first();
    assert.equal(audited.actor_username, 'admin', 'the addition is audited as made by admin');
  });

  it('logins below the platform get 404 on every cluster endpoint; a platform read_only login reads but changes nothing', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const agent = await addAgent();
    for (const [m, p] of [['GET', '/v1/cluster/nodes'], ['GET', `/v1/cluster/nodes/${agent.name}`], ['GET', '/v1/cluster/nodes/hosting'], ['POST', '/v1/cluster/nodes'], ['DELETE', `/v1/cluster/nodes/${agent.name}`]]) {
      const r = await provider.client.req(m, p, m === 'POST' ? { name: unique('node-') } : undefined);
      assert.equal(r.status, 404, `${m} ${p}`);
      assert.equal(r.json.error.code, 'route_not_found', `${m} ${p} is refused as an unknown route`);
    }
    assert.ok(await getNode(env.db, agent.name), 'not deleted');

    const platform = await env.db('panel_orgs').where({ type: 'platform' }).first();
    const username = unique('ro');
    const temporary = `temp-${randomUUID()}`;
    const passwordHash = await hashPassword(temporary);
    await env.db.transaction((trx) => insertLogin(trx, platform, { username, passwordHash, role: 'read_only' }));
    const ro = await signInFresh(panel.url, username, temporary);
    assert.equal((await ro.get('/v1/cluster/nodes')).status, 200, 'a platform read_only login lists the nodes');
    assert.equal((await ro.get(`/v1/cluster/nodes/${agent.name}`)).status, 200, 'a platform read_only login reads a node');
    assert.equal((await ro.post('/v1/cluster/nodes', { name: unique('node-') })).status, 403, 'a platform read_only login cannot add a node');
    assert.equal((await ro.del(`/v1/cluster/nodes/${agent.name}`)).status, 403, 'a platform read_only login cannot delete a node');
  });

  it('an agent enrols with its token (a wrong one is 401, another node\'s name 403) and its heartbeats update facts, metrics, boot id, restarts and reconnects', async () => {
    const agent = await addAgent();
    const other = await addAgent();
    assert.equal((await agent.enrol(undefined, 'pnd_wrong')).status, 401, 'a wrong token of the right format is refused');
    assert.equal((await agent.enrol(undefined, 'no-token-format')).status, 401, 'a token of no known format is refused');
    const noAuth = await fetch(`${agent.base}/node/v1/operations`);
    assert.equal(noAuth.status, 401, 'a node API call with no token is refused');
    assert.equal(((await noAuth.json()) as { error: { code: string } }).error.code, 'unauthenticated', 'the refusal without a token is unauthenticated');
    const mismatch = await agent.call('POST', '/enrol', { node: agent.name, facts: FACTS, agentStartedAt: new Date().toISOString() }, other.token);
    assert.equal(mismatch.status, 403, "a token of another node is refused for this node's name");

    const e = await agent.enrol('2026-01-01T00:00:00.000Z');
    assert.equal(e.status, 200, JSON.stringify(e.json));
    assert.deepEqual(e.json, { node: agent.name, heartbeatSeconds: 10 }, 'the enrolment answers the node name and the heartbeat interval');
    let n = (await admin.get(`/v1/cluster/nodes/${agent.name}`)).json.node;
    assert.equal(n.agent_restarts, 0, 'a first enrolment is no restart');
    assert.deepEqual(n.roles, ['web'], 'the roles come from the facts');
    assert.equal(n.roles_source, 'facts', 'the roles are those of the facts');
    assert.equal(n.facts.web_server, 'builtin', 'the web server fact is recorded');
    assert.ok(n.last_heartbeat_at, `the node has a heartbeat time: ${JSON.stringify(n)}`);

    const bad = await agent.heartbeat({ ...heartbeat(), metrics: { ...heartbeat().metrics, cpuPercent: 140 } });
    assert.equal(bad.status, 400, 'a CPU above 100 % is refused');
    assert.equal(bad.json.error.details.field, 'metrics.cpuPercent', 'the refusal names metrics.cpuPercent');

    assert.equal((await agent.heartbeat(heartbeat({ reconnects: 2, bootId: 'boot-a' }))).status, 204, 'a valid heartbeat is accepted with 204');
    n = (await admin.get(`/v1/cluster/nodes/${agent.name}`)).json.node;
    assert.equal(n.boot_id, 'boot-a', "the heartbeat's boot id is recorded");
    assert.equal(n.agent_reconnects, 2, 'the reconnects reported are recorded');
    assert.equal(n.agent_restarts, 0, 'heartbeats of the same process are no restart');
    assert.deepEqual(n.metrics.load, [0.5, 0.25, 0.125], 'the load averages are recorded');
    assert.deepEqual(n.metrics.memory, { total_mb: 4096, available_mb: 2048 }, 'the memory is recorded in MB');
    assert.equal(n.metrics.cpu_percent, 12.5, 'the CPU use is recorded');
    assert.deepEqual(n.location, { logical_region: null, physical_region: null, zone: null, cell: null }, 'a node without labels has no location');
    assert.equal(n.controller_role, 'none', 'a plain node has no controller role');
    assert.equal(n.leader, false, 'a plain node is not the leader');

    // The same process reports 3 (one more), then the agent restarts and its count starts again.
    await agent.heartbeat(heartbeat({ reconnects: 3, bootId: 'boot-a' }));
    await agent.heartbeat(heartbeat({ reconnects: 3, bootId: 'boot-a' }));
    assert.equal((await agent.enrol('2026-01-01T01:00:00.000Z')).status, 200, 'the agent enrols again after its restart');
    await agent.heartbeat(heartbeat({ reconnects: 1, bootId: 'boot-b', agentStartedAt: '2026-01-01T01:00:00.000Z' }));
    n = (await admin.get(`/v1/cluster/nodes/${agent.name}`)).json.node;
    assert.equal(n.agent_restarts, 1, 'an enrolment with a new start time counts one restart');
    assert.equal(n.agent_reconnects, 4, 'reconnects add up across processes: 2, one more, then 1 after the restart');
    assert.equal(n.boot_id, 'boot-b', 'the new boot id is recorded');
    assert.equal(new Date(n.agent_started_at).toISOString(), '2026-01-01T01:00:00.000Z', "the new process's start time is recorded");
  });

  it('a long poll returns at once when an operation is queued for its node (< 1 s while wait=25), and at once with operations already queued', async () => {
    const agent = await addAgent();
    await agent.enrol();
    const other = await addAgent();

    const t0 = Date.now();
    const empty = await agent.poll(0);
    assert.deepEqual(empty.json, { operations: [] }, 'an empty poll gets no operations');
    assert.ok(Date.now() - t0 < 1000, `an empty wait=0 poll answers at once: ${Date.now() - t0} ms`);

    const started = Date.now();
    const polling = agent.poll(25);
    const otherPolling = other.poll(2);
    await new Promise((r) => setTimeout(r, 700));
    const op = siteOp();
    const queuedAt = Date.now();
    await env.db.transaction((trx) => queueOperation(trx, agent.name, op));
    const r = await polling;
    const answeredAfter = Date.now() - queuedAt;
    assert.equal(r.status, 200, 'the long poll is answered');
    assert.deepEqual(r.json.operations, [op], 'the long poll gets the operation queued for its node');
    assert.ok(answeredAfter < 1000, `answered ${answeredAfter} ms after the operation was queued`);
    console.log(`      long poll (wait=25) answered ${answeredAfter} ms after the operation was queued`);
    assert.ok(Date.now() - started >= 600, 'the poll waited for it');
    assert.deepEqual((await otherPolling).json.operations, [], "another node's poll gets nothing");

    const status = await operationStatus(env.db, op.id);
    assert.equal(status!.status, 'sent', 'a delivered operation is marked sent');
    assert.equal(status!.siteId, op.site.id, 'the operation belongs to its site');
    assert.equal(status!.attempts, 1, 'the operation was sent once');
    const pulled = await getNode(env.db, agent.name);
    assert.ok(pulled!.last_pull_at && Date.now() - pulled!.last_pull_at.getTime() < 5000, `the pull time is recorded and recent: ${pulled!.last_pull_at}`);

    // Queued before the poll: returned at once, in queue order; the same id twice queues once.
    const [a, b] = [siteOp(), siteOp()];
    await env.db.transaction(async (trx) => {
      assert.equal(await queueOperation(trx, agent.name, a), true, 'the first operation is queued');
      assert.equal(await queueOperation(trx, agent.name, b), true, 'the second operation is queued');
      assert.equal(await queueOperation(trx, agent.name, a), false, 'the same id twice is queued once');
    });
    const t1 = Date.now();
    const both = await agent.poll(25);
    assert.ok(Date.now() - t1 < 1000, `a poll with operations queued answers at once: ${Date.now() - t1} ms`);
    assert.deepEqual(both.json.operations.map((o: NodeOperation) => o.id), [a.id, b.id], 'operations queued before the poll come at once, in queue order');
    await assert.rejects(env.db.transaction((trx) => queueOperation(trx, 'no-such-node', siteOp())), /node/);

    // wait=0 … 30: a poll with nothing queued ends when its time is up.
    const t2 = Date.now();
    assert.deepEqual((await agent.poll(1)).json.operations, [], 'an empty wait=1 poll gets no operations');
    assert.ok(Date.now() - t2 >= 900, `an empty wait=1 poll waits its second: ${Date.now() - t2} ms`);
  });

  it('when the LISTEN connection is lost, a waiting long poll still gets its operation (poll fallback, then LISTEN again after reconnecting)', async () => {
    const agent = await addAgent();
    const polling = agent.poll(20);
    await new Promise((r) => setTimeout(r, 300));
    const killed = await env.db.raw(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'panel-node-ops'`);
    assert.ok(killed.rows.length >= 1, `the node-ops listener connection was terminated: ${killed.rows.length} backends`);
    await new Promise((r) => setTimeout(r, 200));
    const op = siteOp();
    const queuedAt = Date.now();
    await env.db.transaction((trx) => queueOperation(trx, agent.name, op));
    assert.deepEqual((await polling).json.operations, [op], 'the waiting poll gets the operation despite the lost LISTEN connection');
    assert.ok(Date.now() - queuedAt < 2500, `answered ${Date.now() - queuedAt} ms after queueing`);
    // Reconnected: the next wait is woken by NOTIFY again.
    await new Promise((r) => setTimeout(r, 1500));
    const next = agent.poll(20);
    await new Promise((r) => setTimeout(r, 300));
    const op2 = siteOp();
    const t = Date.now();
    await env.db.transaction((trx) => queueOperation(trx, agent.name, op2));
    assert.deepEqual((await next).json.operations, [op2], 'after reconnecting the waiting poll gets the next operation');
    assert.ok(Date.now() - t < 1000, `answered ${Date.now() - t} ms after queueing`);
  });

  it('a result is recorded once; a result for another node\'s operation is 404; a database password leaves the row once done; a new agent process gets its unreported operations again', async () => {
    const agent = await addAgent();
    const other = await addAgent();
    await agent.enrol();
    const op = siteOp();
    const db: NodeOperation = { id: randomUUID(), kind: 'database.create', database: 'shop', user: 'shop', password: 's3cret-pass' };
    const lost = siteOp();
    await env.db.transaction(async (trx) => {
      await queueOperation(trx, agent.name, op);
      await queueOperation(trx, agent.name, db);
      await queueOperation(trx, agent.name, lost);
    });
    assert.equal((await agent.poll(0)).json.operations.length, 3, 'the poll gets all three queued operations');

    assert.equal((await other.result(op.id, { ok: true })).status, 404, "another node cannot report a result for this node's operation");
    assert.equal((await agent.result(randomUUID(), { ok: true })).status, 404, 'a result for an unknown operation id is 404');
    assert.equal((await agent.result('not-a-uuid', { ok: true })).status, 404, 'a result for an id that is no UUID is 404');
    assert.equal((await agent.result(op.id, { ok: 'yes' })).status, 400, 'a malformed result is refused with 400');

    assert.equal((await agent.result(op.id, { ok: true, detail: { generation: 1 } })).status, 204, 'the result is recorded');
    assert.equal((await agent.result(op.id, { ok: false, error: 'late', refused: false })).status, 204, 'a second result for the same operation is accepted and ignored');
    const s = await operationStatus(env.db, op.id);
    assert.equal(s!.status, 'done', 'the operation is done');
    assert.deepEqual(s!.result, { ok: true, detail: { generation: 1 } }, 'the first result is the one kept');
    assert.ok(s!.finishedAt, `the finished operation has a finish time: ${JSON.stringify(s)}`);

    const before = await env.db('panel_node_ops').where({ id: db.id }).first();
    assert.equal(before.payload.password, 's3cret-pass', 'the database password is in the row while the operation is pending');
    assert.equal((await agent.result(db.id, { ok: false, error: 'MariaDB is not running', refused: true })).status, 204, 'the database result is recorded');
    const after = await env.db('panel_node_ops').where({ id: db.id }).first();
    assert.equal(after.status, 'failed', 'the refused database operation is failed');
    assert.equal(after.payload.password, undefined, 'the password leaves the row once the operation is done');
    assert.equal(after.payload.user, 'shop', 'the rest of the payload is kept');
    assert.deepEqual(after.result, { ok: false, error: 'MariaDB is not running', refused: true }, 'the refusal is recorded as reported');

    // `lost` was sent but never reported: an agent restart (a new enrolment) gets it again.
    assert.equal((await agent.enrol('2026-01-02T00:00:00.000Z')).status, 200, 'the agent enrols again after a restart');
    const again = await agent.poll(0);
    assert.deepEqual(again.json.operations.map((o: NodeOperation) => o.id), [lost.id], 'a new agent process gets only its unreported operation again');
    assert.equal((await operationStatus(env.db, lost.id))!.attempts, 2, 'the unreported operation is sent a second time');
    assert.equal(await operationStatus(env.db, randomUUID()), null, 'an unknown operation has no status');
  });

  it('panel-controller drain / undrain / label edit node records (audited, actor the operator CLI); exit 1 for an unknown node, 2 for a usage error', async () => {
    const agent = await addAgent();
    await agent.enrol();
    await agent.heartbeat(heartbeat());

    const drain = await controllerCli(['drain', agent.name]);
    assert.equal(drain.code, 0, drain.stderr);
    assert.deepEqual(drain.json, { node: agent.name, draining: true, changed: true }, 'drain reports the node drained and changed');
    let n = (await admin.get(`/v1/cluster/nodes/${agent.name}`)).json.node;
    assert.equal(n.draining, true, 'the node record is draining');
    const audited = await env.db('panel_audit').where({ action: 'node.drain', target_id: agent.name }).first();
    assert.equal(audited.actor_login_id, null, 'the operator CLI is audited with no login');
    assert.deepEqual(audited.after, { draining: true }, 'the audit records draining on');
    const again = await controllerCli(['drain', '-node', agent.name]);
    assert.equal(again.code, 0, 'draining again succeeds');
    assert.equal(again.json.changed, false, 'draining again changes nothing');
    assert.equal((await env.db('panel_audit').where({ action: 'node.drain', target_id: agent.name })).length, 1, 'no change, no entry');

    const label = await controllerCli(['label', '-node', agent.name, '-logical-region', 'eu', '-physical-region', 'eu-west', '--zone=eu-west-1a', '-cell', 'c1', '-roles', 'web,db']);
    assert.equal(label.code, 0, label.stderr);
    assert.equal(label.json.changed, true, 'the label is applied');
    n = (await admin.get(`/v1/cluster/nodes/${agent.name}`)).json.node;
    assert.deepEqual(n.location, { logical_region: 'eu', physical_region: 'eu-west', zone: 'eu-west-1a', cell: 'c1' }, 'the location labels are recorded');
    assert.deepEqual(n.roles, ['db', 'web'], 'the labelled roles replace those of the facts, sorted');
    assert.equal(n.roles_source, 'label', 'the roles come from the label');
    assert.ok(await env.db('panel_audit').where({ action: 'node.label', target_id: agent.name }).first(), `the label change is audited for ${agent.name}`);

    // An empty value clears: the zone, and the labelled roles (back to the facts).
    const clear = await controllerCli(['label', '-node', agent.name, '-zone', '', '-roles', '']);
    assert.equal(clear.code, 0, clear.stderr);
    n = (await admin.get(`/v1/cluster/nodes/${agent.name}`)).json.node;
    assert.equal(n.location.zone, null, 'an empty zone clears it');
    assert.equal(n.location.cell, 'c1', 'the cell is kept');
    assert.deepEqual(n.roles, ['web'], 'an empty roles value brings back the roles of the facts');
    assert.equal(n.roles_source, 'facts', 'the roles come from the facts again');

    // Draining: no new sites; undrain brings it back.
    await env.db('panel_nodes').where({ name: agent.name }).update({ state: 'alive' });
    assert.equal(nodeRefusal((await getNode(env.db, agent.name))!), 'node is draining', 'a draining node is refused for new sites');
    assert.ok(!(await selectableNodes(env.db)).some((x) => x.name === agent.name), `the draining node ${agent.name} is not selectable`);
    const undrain = await controllerCli(['undrain', agent.name]);
    assert.equal(undrain.code, 0, 'undrain succeeds');
    assert.deepEqual(undrain.json, { node: agent.name, draining: false, changed: true }, 'undrain reports the node undrained and changed');
    assert.ok((await selectableNodes(env.db)).some((x) => x.name === agent.name), `the undrained node ${agent.name} is selectable again`);
    assert.equal(nodeRefusal((await getNode(env.db, agent.name))!, { role: 'db' }), 'node does not have the db role', 'a node without the db role is refused for a database');

    const unknown = await controllerCli(['drain', 'no-such-node']);
    assert.equal(unknown.code, 1, 'an unknown node exits 1');
    assert.equal(unknown.json.error.code, 'not_found', 'an unknown node is not_found');
    for (const args of [[], ['frobnicate'], ['drain'], ['label', '-node', agent.name], ['label', '-node', agent.name, '-colour', 'red'], ['label', '-node', agent.name, '-zone', 'Bad Zone']]) {
      const r = await controllerCli(args);
      assert.equal(r.code, 2, `${args.join(' ')}: ${JSON.stringify(r.json)}`);
      assert.match(r.stderr, /usage: panel-controller label/, `${args.join(' ')}: the usage text is printed`);
      assert.ok(r.json.error, `${args.join(' ')}: a usage error carries an error message: ${JSON.stringify(r.json)}`);
    }
  });

  it('panel-controller reaches the database `npm start` recorded in DATA_DIR/connection.json, like the admin CLI (issue 32 item 15)', async () => {
    const agent = await addAgent();
    await agent.enrol();
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'controller-data-'));
    try {
      // the recorded URL is the only way to this test's database (its port is not the default 54320)
      fs.writeFileSync(path.join(dataDir, 'connection.json'), JSON.stringify({ DATABASE_URL: env.databaseUrl }), { mode: 0o600 });
      const drain = await controllerCli(['drain', agent.name], dataDir);
      assert.equal(drain.code, 0, `exit status: ${JSON.stringify(drain.json)} ${drain.stderr}`);
      assert.deepEqual(drain.json, { node: agent.name, draining: true, changed: true }, 'the node is drained in the recorded database');
      assert.equal((await getNode(env.db, agent.name))?.draining, true, 'the record changed');
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('a node without sites is deleted with its operations; the hosting node is not', async () => {
    const agent = await addAgent();
    await env.db.transaction((trx) => queueOperation(trx, agent.name, siteOp()));
    assert.equal((await admin.del(`/v1/cluster/nodes/${agent.name}`)).status, 204, 'a node without sites is deleted');
    assert.equal((await admin.get(`/v1/cluster/nodes/${agent.name}`)).status, 404, 'the deleted node is gone');
    assert.equal((await agent.enrol()).status, 401, 'its token is gone with it');
    assert.equal((await admin.del(`/v1/cluster/nodes/${agent.name}`)).status, 404, 'deleting a deleted node is 404');
    assert.equal((await admin.del('/v1/cluster/nodes/hosting')).status, 409, 'the hosting node cannot be deleted');
    assert.ok(await env.db('panel_audit').where({ action: 'node.delete', target_id: agent.name }).first(), `the node deletion is audited for ${agent.name}`);
  });

  it('without -controller-state the cluster endpoints say node state is unavailable, with no state fields', async () => {
    const plain = await startPanel();
    try {
      const a = await platformAdmin(plain.url);
      const expected = { state_available: false, message: 'node state is unavailable: panel-api runs without -controller-state' };
      for (const p of ['/v1/cluster/nodes', '/v1/cluster/nodes/hosting', '/v1/cluster/nodes/whatever']) {
        const r = await a.get(p);
        assert.equal(r.status, 200, p);
        assert.deepEqual(r.json, expected, p);
      }
      const add = await a.post('/v1/cluster/nodes', { name: unique('node-') });
      assert.equal(add.status, 409, 'adding a node without -controller-state is refused with 409');
      assert.match(add.json.error.message, /without -controller-state/, 'the refusal says the panel runs without -controller-state');
      const provider = await createOrgWithLogin(a, { type: 'provider' });
      assert.equal((await provider.client.get('/v1/cluster/nodes')).status, 404, 'logins below the platform still get 404 without -controller-state');
    } finally {
      await plain.close();
    }
  });

  it('node selection: only alive, not draining nodes with the role; an agent that has not pulled lately is refused when asked', async () => {
    const { name } = await addNode(env.db, null, unique('node-'));
    let n = (await getNode(env.db, name))!;
    assert.equal(nodeRefusal(n), 'node is dead', 'a node never heard from is refused as dead');
    await env.db('panel_nodes').where({ name }).update({ state: 'alive', facts: JSON.stringify(FACTS) });
    n = (await getNode(env.db, name))!;
    assert.equal(nodeRefusal(n), null, 'an alive node with the web role is selectable');
    assert.match(nodeRefusal(n, { pulledWithinMs: 120_000 })!, /has not pulled/, 'a node that has not pulled lately is refused when asked');
    await env.db('panel_nodes').where({ name }).update({ last_pull_at: env.db.fn.now() });
    assert.equal(nodeRefusal((await getNode(env.db, name))!, { pulledWithinMs: 120_000 }), null, 'a node that pulled just now is selectable when asked');
  });
});
