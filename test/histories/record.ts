import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { Client, Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { call, newAccount, settled, startStack, type Stack } from '../helpers/stack';
import { jobReaches, startVideoStack, type VideoStack } from '../helpers/video-stack';
import { chatCase, newProject, startRun, startTestRunWorker, waitRun } from '../helpers/testruns';
import { env } from '../setup/env';
import { freePort } from '../../platform/ports';
import { addNode, recordHeartbeat } from '../../services/panel/nodes/nodes';
import { ALERT_EVAL_SCHEDULE_ID, webhookWorkflowId } from '../../domain/panel/workflows';
import { createOrgWithLogin, platformAdmin, startHostingPanel, startPanel } from '../helpers/panel';
import { sweepHoldsWorkflow } from '../../workflows/credits/sweeper';
import { runPass, setPolicy, siteActive } from '../helpers/reconcile';
import { addSite, addLabelledNode, startBillingPanel } from '../helpers/billing';
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
  it('panel: an alert evaluation (the alert-eval schedule) and a webhook delivery retried after a 500', async function () {
    const panel = await startHostingPanel({ flags: ['-metrics-interval', '60s'], reportEveryMs: 3_600_000, webhooks: { allowTargets: ['127.0.0.1'], retry: { initialMs: 200, maxMs: 400, giveUpAfterMs: 10_000 } } });
    let calls = 0;
    const receiver = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(calls++ === 0 ? 500 : 200).end());
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    const connection = await Connection.connect({ address: env.temporalAddress });
    const admin = await platformAdmin(panel.url);
    const rules = ['node_heartbeat', 'node_cpu', 'node_load', 'node_memory', 'node_rootfs', 'disk_quota_80', 'disk_quota_100', 'inode_quota_80', 'inode_quota_100'];
    try {
      for (const key of rules) await admin.patch(`/v1/alert-rules/${key}`, { enabled: key === 'node_cpu', threshold: key === 'node_cpu' ? 80 : undefined, for_seconds: key === 'node_cpu' ? 0 : undefined });
      const platform = (await env.db('panel_orgs').where({ type: 'platform' }).first('id')).id;
      const hook = await admin.post(`/v1/orgs/${platform}/webhooks`, { url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`, events: ['alert.fired'] });
      if (hook.status !== 201) throw new Error(`webhook: ${hook.status} ${JSON.stringify(hook.json)}`);
      await env.db('panel_nodes').update({ metrics_at: null }); // only the node below counts
      const node = `rec-${randomUUID().slice(0, 8)}`;
      await addNode(env.db, null, node);
      const metrics = { bootId: 'b', uptimeSeconds: 1, cpuPercent: 99, load: [0, 0, 0] as [number, number, number], memory: { totalMb: 100, availableMb: 90 }, rootFs: { totalMb: 100, freeMb: 90 }, network: { rxBytes: 0, txBytes: 0 }, sampledAt: new Date().toISOString() };
      await recordHeartbeat(env.db, node, { facts: { webServer: 'builtin', phpVersions: [], mariadb: false, roles: ['web'], webAddress: '127.0.0.1:1' }, metrics, usage: [], agentStartedAt: new Date().toISOString(), reconnects: 0 });
      const client = new Client({ connection });
      const schedule = client.schedule.getHandle(ALERT_EVAL_SCHEDULE_ID);
      await schedule.trigger();
      let delivery: { id: string } | undefined;
      for (let i = 0; i < 300 && !delivery; i++) {
        delivery = await env.db('panel_webhook_deliveries').where({ endpoint_id: hook.json.id, status: 'delivered' }).first('id');
        if (!delivery) await new Promise((res) => setTimeout(res, 100));
      }
      if (!delivery) throw new Error('the webhook was not delivered');
      const evaluation = (await schedule.describe()).info.recentActions.at(-1)!.action.workflow.workflowId;
      await save(client, 'panel', 'alert-eval', evaluation);
      await save(client, 'panel', 'webhook-retried', webhookWorkflowId(delivery.id));
      await admin.del(`/v1/webhooks/${hook.json.id}`);
    } finally {
      for (const key of rules) await admin.post(`/v1/alert-rules/${key}/restore`);
      await connection.close();
      await panel.close();
      await new Promise((r) => receiver.close(r));
    }
  });
  it('panel: a reconciliation pass that finds a drifted vhost and rewrites it (remediate policy, -reconcile on)', async function () {
    const panel = await startHostingPanel({ flags: ['-reconcile', 'on'], reconcile: { batchSize: 2 } });
    const connection = await Connection.connect({ address: env.temporalAddress });
    try {
      const admin = await platformAdmin(panel.url);
      const provider = await createOrgWithLogin(admin, { type: 'provider' });
      const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const r = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: `record-${randomUUID().slice(0, 8)}.example.com` });
        if (r.status !== 201) throw new Error(`create: ${r.status} ${JSON.stringify(r.json)}`);
        ids.push(r.json.id);
      }
      for (const id of ids) await siteActive(customer.client, id);
      await setPolicy(admin, ids[0], 'remediate');
      const domain = (await customer.client.get(`/v1/sites/${ids[0]}`)).json.domain;
      fs.appendFileSync(path.join(panel.root, 'etc/nginx/sites', `${domain}.conf`), '# edited by hand\n');
      const pass = await runPass(admin);
      if (pass.remediated !== 1) throw new Error(`pass: ${JSON.stringify(pass)}`);
      await save(new Client({ connection }), 'panel', 'reconcile-remediated', `reconcile-${pass.id}`);
      await env.db('panel_sites').whereIn('id', ids).delete();
    } finally {
      await connection.close();
      await panel.close();
    }
  });

  it('panel: a metering tick over two due hours, a metered hour, and a month close', async function () {
    const bp = await startBillingPanel('2032-05-31T21:30:00Z');
    try {
      const admin = await platformAdmin(bp.url);
      const provider = await createOrgWithLogin(admin, { type: 'provider' });
      const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
      const plan = await provider.client.post(`/v1/orgs/${provider.id}/billing-plans`, { name: 'Record', currency: 'EUR', base_price: '10', account_price: '1', rates: 'default 1 1 1' });
      await provider.client.put(`/v1/orgs/${customer.id}/billing-plan`, { plan_id: plan.json.id });
      const node = `record-${randomUUID().slice(0, 8)}`;
      await addLabelledNode(node, { logical_region: 'eu' });
      await addSite(customer.id, node, 1024);
      await bp.meterUntil('2032-06-01T00:30:00Z');
      const recent = (await bp.temporal.schedule.getHandle(bp.scheduleId).describe()).info.recentActions;
      await save(bp.temporal, 'panel', 'meter-tick', recent[recent.length - 1].action.workflow.workflowId);
      await save(bp.temporal, 'panel', 'meter-hour', 'meter-2032-05-31T23');
      const closed = await provider.client.post(`/v1/orgs/${customer.id}/billing/close`, { period: '2032-05', confirm: true });
      if (closed.status !== 200) throw new Error(`close: ${closed.status} ${JSON.stringify(closed.json)}`);
      await save(bp.temporal, 'panel', 'month-close', `month-close-${customer.id}-2032-05`);
    } finally {
      await bp.close();
    }
  });

  it('panel: backups on the hosting node (a restore point, a restore into another account, a scheduled backup, inspections removed by request and by timer)', async function () {
    const panel = await startHostingPanel({ mariadb: true, backups: true, backupInspectionMs: 1500 });
    const connection = await Connection.connect({ address: env.temporalAddress });
    try {
      const client = new Client({ connection });
      const admin = await platformAdmin(panel.url);
      const provider = await createOrgWithLogin(admin, { type: 'provider' });
      const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
      const target = await createOrgWithLogin(provider.client, { type: 'customer' });
      const until = async (path: string, done: (b: { status: string }) => boolean) => {
        for (let i = 0; i < 600; i++) {
          const r = await admin.get(path);
          if (r.status === 200 && done(r.json)) return r.json;
          await new Promise((res) => setTimeout(res, 100));
        }
        throw new Error(`${path} did not settle`);
      };
      const site = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: `record-${randomUUID().slice(0, 8)}.example.com` });
      await until(`/v1/sites/${site.json.id}`, (b) => b.status === 'active');
      const db = await customer.client.post(`/v1/orgs/${customer.id}/databases`, { name: `rec_${randomUUID().slice(0, 8)}` });
      await until(`/v1/databases/${db.json.id}`, (b) => b.status === 'active');
      const rp = await customer.client.post(`/v1/sites/${site.json.id}/restore-points`);
      if (rp.status !== 202) throw new Error(`backup: ${rp.status} ${JSON.stringify(rp.json)}`);
      await until(`/v1/restore-points/${rp.json.id}`, (b) => b.status === 'ready');
      await save(client, 'panel', 'backup-op-create', `node-op-${rp.json.operation_id}`);
      const restored = await admin.post(`/v1/restore-points/${rp.json.id}/restore`, { into_account: target.id, domain: `record-${randomUUID().slice(0, 8)}.example.com` });
      if (restored.status !== 202) throw new Error(`restore: ${restored.status} ${JSON.stringify(restored.json)}`);
      await until(`/v1/sites/${restored.json.site.id}`, (b) => b.status === 'active');
      await save(client, 'panel', 'backup-op-restore', `node-op-${restored.json.site.operation_id}`);

      const set = await customer.client.put(`/v1/sites/${site.json.id}/backup-schedule`, { every: 'daily', keep: 1 });
      if (set.status !== 200) throw new Error(`schedule: ${set.status} ${JSON.stringify(set.json)}`);
      const schedule = client.schedule.getHandle(set.json.schedule_id);
      await schedule.trigger();
      let runId: string | undefined;
      for (let i = 0; i < 100 && !runId; i++) {
        runId = (await schedule.describe()).info.recentActions[0]?.action.workflow.workflowId;
        if (!runId) await new Promise((res) => setTimeout(res, 100));
      }
      await save(client, 'panel', 'scheduled-backup', runId!);
      await schedule.delete();

      const early = await admin.post(`/v1/restore-points/${rp.json.id}/inspection`);
      await until(`/v1/inspections/${early.json.id}`, (b) => b.status === 'ready');
      await admin.del(`/v1/inspections/${early.json.id}`);
      await save(client, 'panel', 'inspection-remove-now', `inspection-${early.json.id}`);
      const timed = await admin.post(`/v1/restore-points/${rp.json.id}/inspection`);
      await save(client, 'panel', 'inspection-timer', `inspection-${timed.json.id}`);
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
  it('credits: an account webhook delivery (account-webhook-<id>) retried after a 500', async function () {
    const stack = await startStack({ adminToken: 'record-token', accountWebhooks: { allowTargets: ['127.0.0.1'], retry: { initialMs: 200, maxMs: 400, giveUpAfterMs: 10_000 } } });
    let seen = 0;
    const receiver = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.statusCode = seen++ === 0 ? 500 : 204;
        res.end();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    try {
      const acct = await newAccount({ credits: '10' });
      const admin = (p: string, body: unknown, method = 'POST') => call(stack.gateway.url, p, { body, method, headers: { authorization: 'Bearer record-token' } });
      const hook = await admin(`/admin/accounts/${acct.accountId}/webhooks`, { url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook` });
      if (hook.status !== 201) throw new Error(`webhook: ${hook.status} ${hook.text}`);
      await admin(`/admin/accounts/${acct.accountId}/low-balance-threshold`, { low_balance_threshold: '10' }, 'PUT');
      const ok = await chat(stack, acct.key, 'hi [sim tokens=3]');
      await settled(ok.headers.get('x-gateway-request-id')!);
      let delivery: { id: string } | undefined;
      for (let i = 0; i < 200 && !delivery; i++) {
        delivery = await env.db('account_webhook_deliveries').where({ endpoint_id: hook.json.id, status: 'delivered' }).first('id');
        if (!delivery) await new Promise((r) => setTimeout(r, 100));
      }
      if (!delivery) throw new Error('the account webhook was not delivered');
      await save(stack.temporal, 'credits', 'account-webhook-retried', `account-webhook-${delivery.id}`);
      await admin(`/admin/webhooks/${hook.json.id}`, undefined, 'DELETE');
    } finally {
      receiver.close();
      await stack.close();
    }
  });
});
