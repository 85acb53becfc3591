import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { Client, Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { call, newAccount, settled, startStack, type Stack } from '../helpers/stack';
import { jobReaches, startVideoStack, type VideoStack } from '../helpers/video-stack';
import { chatCase, newProject, startRun, startTestRunWorker, waitRun } from '../helpers/testruns';
import { env } from '../setup/env';
import { freePort } from '../../platform/ports';
import { addNode } from '../../services/panel/nodes/nodes';
import { createOrgWithLogin, platformAdmin, startHostingPanel, startPanel } from '../helpers/panel';
import { sweepHoldsWorkflow } from '../../workflows/credits/sweeper';
import { settledImport, uploadArchive } from '../helpers/imports';
import { writeAccountArchive } from '../helpers/legacy-archive';

// Records real workflow histories into test/histories/<domain>/<case>.json, for
// test/replay.test.ts to replay on every `npm test` (a change that breaks running workflows
// then fails CI). Run when a workflow gains a path worth guarding, and commit the files:
//   npm run histories:record

async function save(client: Client, domain: string, name: string, workflowId: string): Promise<void> {
  const handle = client.workflow.getHandle(workflowId);
  await handle.result().catch(() => undefined);
  const history = await handle.fetchHistory();
  const file = path.join(__dirname, domain, `${name}.json`);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  // Protobuf, base64: exact, and read back without the JSON converter (whose protobufjs copy
  // differs from the SDK's here); the event count and types are there for a reader.
  const protobuf = Buffer.from(temporal.api.history.v1.History.encode(history).finish()).toString('base64');
  const events = (history.events ?? []).map((e) => temporal.api.enums.v1.EventType[e.eventType ?? 0]);
  fs.writeFileSync(file, JSON.stringify({ workflowId, events, protobuf }, null, 1) + '\n');
}

const chat = (stack: Stack, key: string, content: string) => call(stack.gateway.url, '/v1/chat/completions', { key, body: { model: 'sim-gpt', messages: [{ role: 'user', content }] } });

describe('record workflow histories', function () {
  this.timeout(120_000);

  it('credits: a settled batch, an uncertain outcome kept for its grace, the hold sweeper', async function () {
    const stack = await startStack({ upstreamTimeoutMs: 1500, uncertainGraceMs: 300 });
    try {
      const acct = await newAccount({ credits: '5' });
      const ok = await chat(stack, acct.key, 'hi [sim tokens=3]');
      const row = await settled(ok.headers.get('x-gateway-request-id')!);
      await save(stack.temporal, 'credits', 'settlement-batch', row.settlement_workflow_id);
      const timedOut = await chat(stack, acct.key, '[sim latency=4000]');
      if (timedOut.status !== 504) throw new Error(`expected 504, got ${timedOut.status}`);
      const other = await env.db('reservations').where({ account_id: acct.accountId }).whereNot({ id: row.id }).first('id');
      const uncertain = await settled(other.id);
      await save(stack.temporal, 'credits', 'reservation-uncertain', uncertain.settlement_workflow_id);
      const sweep = await stack.temporal.workflow.start(sweepHoldsWorkflow, { taskQueue: stack.taskQueue, workflowId: `sweep-record-${Date.now()}`, args: [] });
      await save(stack.temporal, 'credits', 'hold-sweep', sweep.workflowId);
    } finally {
      await stack.close();
    }
  });

  it('media: a video job that completes with a provider cost', async function () {
    const stack: VideoStack = await startVideoStack({ polling: { initialMs: 50, factor: 1.5, maxMs: 200, createWaitMs: 5_000, lateCostWaitMs: 2_500, unbilledCostWaitMs: 300, pollsPerRun: 3 } });
    try {
      const acct = await newAccount({ credits: '10' });
      const res = await call(stack.url, '/v1/videos', { key: acct.key, body: { model: 'sim-video-1', prompt: 'a red fox in snow [sim render_ms=600 cost=0.2]' } });
      if (res.status !== 202) throw new Error(`create: ${res.status} ${res.text}`);
      await jobReaches(res.json.id, ['completed']);
      await save(stack.temporal, 'media', 'video-completed', `video-${res.json.id}`);
    } finally {
      await stack.close();
    }
  });

  it('testruns: a passing run', async function () {
    const stack = await startStack();
    const worker = await startTestRunWorker({ gatewayUrl: stack.gateway.url });
    try {
      const p = await newProject({ taskQueue: worker.taskQueue, cases: [chatCase('ok-1', 'first [sim tokens=3]', { assertions: { contains: 'first' } }), chatCase('ok-2', 'second [sim tokens=3]')] });
      const id = await startRun(stack.gateway.url, p, { cases: ['ok-1', 'ok-2'] });
      const done = await waitRun(stack.gateway.url, p.token, id);
      if (done.status !== 'passed') throw new Error(`run ${done.status}`);
      await save(stack.temporal, 'testruns', 'run-passed', done.workflow_id);
    } finally {
      await worker.stop();
      await stack.close();
    }
  });

  it('panel: a site created on the hosting node, and one on an agent node that never reports (expired)', async function () {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'panel-record-'));
    fs.chmodSync(root, 0o755);
    const taskQueue = `panel-record-${randomUUID()}`;
    const panel = await startPanel({
      databaseUrl: env.databaseUrl,
      nodeOps: { taskQueue, timeoutMs: 1500, pollMs: 300 },
      hosting: { root, webPort: await freePort(), webHost: '127.0.0.1', workflowBundle: env.bundles.panel },
    });
    const connection = await Connection.connect({ address: env.temporalAddress });
    try {
      const admin = await platformAdmin(panel.url);
      const provider = await createOrgWithLogin(admin, { type: 'provider' });
      const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
      const waitFor = async (id: string, status: string) => {
        for (let i = 0; i < 300; i++) {
          const r = await customer.client.get(`/v1/sites/${id}`);
          if (r.json.status === status) return r.json;
          await new Promise((res) => setTimeout(res, 100));
        }
        throw new Error(`site ${id} never ${status}`);
      };
      const client = new Client({ connection });
      const hosted = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: `record-${randomUUID().slice(0, 8)}.example.com` });
      if (hosted.status !== 201) throw new Error(`create: ${hosted.status} ${JSON.stringify(hosted.json)}`);
      await waitFor(hosted.json.id, 'active');
      await save(client, 'panel', 'node-op-hosting', `node-op-${hosted.json.operation_id}`);

      const node = `rec-${randomUUID().slice(0, 8)}`;
      await addNode(env.db, null, node);
      await env.db('panel_nodes').where({ name: node }).update({ state: 'alive', roles: ['web'] });
      const agent = await admin.post(`/v1/orgs/${customer.id}/sites`, { domain: `record-${randomUUID().slice(0, 8)}.example.com`, node });
      if (agent.status !== 201) throw new Error(`create: ${agent.status} ${JSON.stringify(agent.json)}`);
      await waitFor(agent.json.id, 'failed');
      await save(client, 'panel', 'node-op-agent-expired', `node-op-${agent.json.operation_id}`);
      await env.db('panel_nodes').where({ name: node }).update({ draining: true });
    } finally {
      await connection.close();
      await panel.close();
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  it('panel: a site on an agent node whose result the node API records and signals (nodeOpReported)', async function () {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'panel-record-'));
    fs.chmodSync(root, 0o755);
    const taskQueue = `panel-record-${randomUUID()}`;
    const panel = await startPanel({
      databaseUrl: env.databaseUrl,
      flags: ['-node-api-listen', '127.0.0.1:0'],
      // a long poll, so the result can only be seen in time through the signal
      nodeOps: { taskQueue, timeoutMs: 60_000, pollMs: 30_000 },
      hosting: { root, webPort: await freePort(), webHost: '127.0.0.1', workflowBundle: env.bundles.panel },
    });
    const connection = await Connection.connect({ address: env.temporalAddress });
    const node = `rec-${randomUUID().slice(0, 8)}`;
    try {
      const admin = await platformAdmin(panel.url);
      const provider = await createOrgWithLogin(admin, { type: 'provider' });
      const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
      const { token } = await addNode(env.db, null, node);
      await env.db('panel_nodes').where({ name: node }).update({ state: 'alive', roles: ['web'] });
      const site = await admin.post(`/v1/orgs/${customer.id}/sites`, { domain: `record-${randomUUID().slice(0, 8)}.example.com`, node });
      if (site.status !== 201) throw new Error(`create: ${site.status} ${JSON.stringify(site.json)}`);
      // the agent's side, over the node API: pull the operation, report it applied
      const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
      const pulled = await fetch(`${panel.nodeApiUrl}/node/v1/operations?wait=5`, { headers });
      const { operations } = (await pulled.json()) as { operations: Array<{ id: string }> };
      if (operations[0]?.id !== site.json.operation_id) throw new Error(`pulled ${JSON.stringify(operations)}`);
      // the workflow has read the operation and waits (on the signal, with the 30 s poll as its timeout)
      await new Promise((res) => setTimeout(res, 2000));
      const reported = await fetch(`${panel.nodeApiUrl}/node/v1/operations/${site.json.operation_id}/result`, { method: 'POST', headers, body: JSON.stringify({ ok: true }) });
      if (reported.status !== 204) throw new Error(`result: ${reported.status}`);
      await save(new Client({ connection }), 'panel', 'node-op-agent-signalled', `node-op-${site.json.operation_id}`);
    } finally {
      await env.db('panel_nodes').where({ name: node }).update({ draining: true });
      await connection.close();
      await panel.close();
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  it('panel: a database created and deleted on the hosting node (MariaDB), and one on an agent node that never reports (expired)', async function () {
    const panel = await startHostingPanel({ mariadb: true });
    const connection = await Connection.connect({ address: env.temporalAddress });
    try {
      const admin = await platformAdmin(panel.url);
      const provider = await createOrgWithLogin(admin, { type: 'provider' });
      const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
      const waitFor = async (id: string, done: (status: number, body: { status: string }) => boolean) => {
        for (let i = 0; i < 300; i++) {
          const r = await customer.client.get(`/v1/databases/${id}`);
          if (done(r.status, r.json)) return;
          await new Promise((res) => setTimeout(res, 100));
        }
        throw new Error(`database ${id} did not settle`);
      };
      const client = new Client({ connection });
      const created = await customer.client.post(`/v1/orgs/${customer.id}/databases`, { name: `rec_${randomUUID().slice(0, 8)}` });
      if (created.status !== 201) throw new Error(`create: ${created.status} ${JSON.stringify(created.json)}`);
      await waitFor(created.json.id, (_, b) => b.status === 'active');
      await save(client, 'panel', 'database-op-create', `database-op-${created.json.operation_id}`);
      const deleted = await customer.client.del(`/v1/databases/${created.json.id}`);
      if (deleted.status !== 202) throw new Error(`delete: ${deleted.status} ${JSON.stringify(deleted.json)}`);
      await waitFor(created.json.id, (status) => status === 404);
      await save(client, 'panel', 'database-op-delete', `database-op-${deleted.json.operation_id}`);

      const node = `rec-db-${randomUUID().slice(0, 8)}`;
      await addNode(env.db, null, node);
      await env.db('panel_nodes').where({ name: node }).update({ state: 'alive', roles: ['db'] });
      const far = await admin.post(`/v1/orgs/${customer.id}/databases`, { name: `rec_${randomUUID().slice(0, 8)}`, node });
      if (far.status !== 201) throw new Error(`create: ${far.status} ${JSON.stringify(far.json)}`);
      await waitFor(far.json.id, (_, b) => b.status === 'failed');
      await save(client, 'panel', 'database-op-agent-expired', `database-op-${far.json.operation_id}`);
      await env.db('panel_nodes').where({ name: node }).update({ draining: true });
    } finally {
      await connection.close();
      await panel.close();
    }
  });
  it('panel: a legacy import run (import-<id>) into a customer account, all items in spec order', async function () {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rec-import-'));
    const panel = await startHostingPanel({ mariadb: true, opTimeoutMs: 30_000, imports: { dir: path.join(dir, 'uploads') } });
    const connection = await Connection.connect({ address: env.temporalAddress });
    try {
      const admin = await platformAdmin(panel.url);
      const provider = await createOrgWithLogin(admin, { type: 'provider' });
      const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
      const user = `rec${randomUUID().slice(0, 8)}`;
      const file = await writeAccountArchive(path.join(dir, `cpmove-${user}.tar.gz`), { user, domain: `${user}.test` });
      const up = await uploadArchive(provider.client, customer.id, file);
      if (up.status !== 201) throw new Error(`upload: ${up.status} ${JSON.stringify(up.json)}`);
      await provider.client.post(`/v1/imports/${up.json.id}/run`);
      await settledImport(provider.client, up.json.id);
      await save(new Client({ connection }), 'panel', 'import-run', `import-${up.json.id}`);
    } finally {
      await connection.close();
      await panel.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
