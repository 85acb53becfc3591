import assert from 'node:assert/strict';
import { createHmac, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client, Connection } from '@temporalio/client';
import { BUILT_IN_RULES } from '../../../domain/panel/alerts';
import type { Heartbeat } from '../../../domain/panel/node-ops';
import { webhookSettings } from '../../../main/panel-api';
import { evaluateAlerts } from '../../../services/panel/alerts/evaluate';
import { emitEvent } from '../../../services/panel/alerts/events';
import { startPendingDeliveries } from '../../../services/panel/alerts/webhooks';
import { webhookWorkflowId } from '../../../domain/panel/workflows';
import { addNode, recordHeartbeat } from '../../../services/panel/nodes/nodes';
import { createOrgWithLogin, platformAdmin, startHostingPanel, unique, type HostingPanel, type PanelClient } from '../../helpers/panel';
import { env } from '../../setup/env';
import { until } from '../../helpers/until';

// Webhooks (spec 2 section 6, issue 17 item 4) end to end: a real receiver (an HTTP server on
// 127.0.0.1, which the test operator setting allows) checks the HMAC-SHA256 signature exactly as
// docs/panel/alerts.md tells integrators to; deliveries run in webhook-<delivery_id> workflows with short
// retries; attempts are recorded; redelivery; private targets refused; org scoping.

/** The verification snippet of docs/panel/alerts.md. */
function verifyPanelSignature(secret: string, header: string, rawBody: string, toleranceSeconds = 300): boolean {
  const parts = Object.fromEntries(header.split(',').map((kv) => kv.split('=') as [string, string]));
  const t = Number(parts.t);
  if (!Number.isInteger(t) || Math.abs(Date.now() / 1000 - t) > toleranceSeconds) return false;
  const expected = createHmac('sha256', secret).update(`${t}.${rawBody}`).digest();
  const given = Buffer.from(parts.v1 ?? '', 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A receiver answering each request of a path with the next status of its script (then 200). */
async function receiver() {
  const got: Received[] = [];
  const scripts = new Map<string, number[]>();
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      got.push({ path: req.url ?? '', headers: req.headers, body });
      res.statusCode = scripts.get(req.url ?? '')?.shift() ?? 200;
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return { got, scripts, url: (p: string) => `http://127.0.0.1:${port}${p}`, close: () => new Promise((r) => server.close(r)) };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const heartbeat = (cpu: number): Heartbeat => ({
  facts: { webServer: 'builtin', phpVersions: [], mariadb: false, roles: ['web'], webAddress: '127.0.0.1:1' },
  metrics: { bootId: 'b', uptimeSeconds: 1, cpuPercent: cpu, load: [0, 0, 0], memory: { totalMb: 100, availableMb: 90 }, rootFs: { totalMb: 100, freeMb: 90 }, network: { rxBytes: 0, txBytes: 0 }, sampledAt: new Date().toISOString() },
  usage: [],
  agentStartedAt: '2026-01-01T00:00:00.000Z',
  reconnects: 0,
});

describe('panel: webhooks', function () {
  this.timeout(120_000);
  let panel: HostingPanel;
  let admin: PanelClient;
  let rx: Awaited<ReturnType<typeof receiver>>;
  let temporal: Client;
  let connection: Connection;
  const retry = { initialMs: 200, maxMs: 800, giveUpAfterMs: 2500 };
  const settings = () => webhookSettings({ nodeOps: { taskQueue: panel.taskQueue }, webhooks: { retry } });

  before(async function () {
    this.timeout(90_000);
    rx = await receiver();
    panel = await startHostingPanel({ flags: ['-metrics-interval', '60s', '-controller-state'], reportEveryMs: 3_600_000, webhooks: { allowTargets: ['127.0.0.1'], retry } });
    admin = await platformAdmin(panel.url);
    for (const r of BUILT_IN_RULES) assert.equal((await admin.patch(`/v1/alert-rules/${r.key}`, { enabled: false })).status, 200, `built-in rule ${r.key} disabled for this suite`);
    // only this suite's reports count: earlier suites' nodes and the hosting node's real CPU do not
    await env.db('panel_nodes').update({ metrics_at: null });
    await evaluateAlerts(env.db);
    connection = await Connection.connect({ address: env.temporalAddress });
    temporal = new Client({ connection });
  });
  after(async () => {
    for (const r of BUILT_IN_RULES) await admin.post(`/v1/alert-rules/${r.key}/restore`);
    await panel?.close();
    await rx?.close();
    await connection?.close();
  });

  const platformId = async () => (await env.db('panel_orgs').where({ type: 'platform' }).first('id')).id as string;
  const delivery = async (id: string) => (await admin.get(`/v1/webhook-deliveries/${id}`)).json;

  it('refuses private and loopback targets the operator did not allow, bad URLs and unknown events', async () => {
    const org = await platformId();
    for (const [body, field] of [
      [{ url: 'http://10.1.2.3/hook', events: ['alert.fired'] }, 'url'],
      [{ url: 'http://127.0.0.2:9/hook', events: ['alert.fired'] }, 'url'],
      [{ url: 'http://[::1]:9/hook', events: ['alert.fired'] }, 'url'],
      [{ url: 'http://169.254.169.254/latest', events: ['alert.fired'] }, 'url'],
      [{ url: 'ftp://127.0.0.1/x', events: ['alert.fired'] }, 'url'],
      [{ url: 'http://u:p@127.0.0.1/x', events: ['alert.fired'] }, 'url'],
      [{ url: rx.url('/x'), events: ['alert.exploded'] }, 'events'],
      [{ url: rx.url('/x'), events: [] }, 'events'],
    ] as const) {
      const r = await admin.post(`/v1/orgs/${org}/webhooks`, body);
      assert.equal(r.status, 400, JSON.stringify(r.json));
      assert.equal(r.json.error.details.field, field, JSON.stringify(body));
    }
    assert.equal((await admin.get(`/v1/orgs/${org}/webhooks`)).json.endpoints.length, 0, 'nothing was created');
  });

  it('delivers alert.fired and alert.resolved signed, retries after 500s, gives up after its time, and redelivers', async () => {
    const org = await platformId();
    const created = await admin.post(`/v1/orgs/${org}/webhooks`, { url: rx.url('/platform'), events: ['alert.fired', 'alert.resolved'] });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    const secret: string = created.json.secret;
    assert.match(secret, /^whsec_/, 'the secret is a whsec_ secret');
    const listed = (await admin.get(`/v1/orgs/${org}/webhooks`)).json.endpoints;
    assert.equal(listed.length, 1, 'the endpoint is listed');
    assert.equal(listed[0].secret, undefined, 'the secret is shown once');

    // the receiver fails twice, then takes it
    rx.scripts.set('/platform', [500, 500]);
    const node = unique('w');
    await addNode(env.db, null, node);
    assert.equal((await admin.patch('/v1/alert-rules/node_cpu', { enabled: true, threshold: 80, for_seconds: 0 })).status, 200, 'the node_cpu rule enabled at 80%');
    await recordHeartbeat(env.db, node, heartbeat(95));
    // through the schedule: evaluation, then the delivery's workflow
    await temporal.schedule.getHandle('alert-eval').trigger();
    const fired = await until('the alert.fired delivery', async () => rx.got.filter((g) => g.path === '/platform').length >= 3 && rx.got.filter((g) => g.path === '/platform'));
    const last = fired[2];
    assert.ok(verifyPanelSignature(secret, String(last.headers['panel-signature']), last.body), 'the signature verifies');
    assert.ok(!verifyPanelSignature('whsec_wrong', String(last.headers['panel-signature']), last.body), 'a wrong secret does not verify the signature');
    assert.ok(!verifyPanelSignature(secret, String(last.headers['panel-signature']), last.body.replace('alert', 'alarm')), 'a changed body does not verify the signature');
    const payload = JSON.parse(last.body);
    assert.deepEqual(Object.keys(payload).sort(), ['data', 'id', 'org', 'time', 'type'], 'the payload has exactly data, id, org, time, type');
    assert.equal(payload.type, 'alert.fired', 'the event type');
    assert.equal(payload.org, org, 'the payload names the org');
    assert.equal(payload.data.alert.node, node, 'the alert names the node');
    assert.equal(payload.data.alert.state, 'open', 'the alert is open');
    const deliveryId = String(last.headers['panel-delivery']);
    const d = await until('delivered', async () => {
      const x = await delivery(deliveryId);
      return x.status === 'delivered' && x;
    });
    assert.deepEqual(d.attempts.map((a: { status_code: number }) => a.status_code), [500, 500, 200], 'two 500s, then delivered');
    assert.equal(d.attempts[0].error, 'the receiver answered 500', 'the failed attempt says what the receiver answered');
    assert.ok(d.attempts.every((a: { latency_ms: number }) => a.latency_ms >= 0), `every attempt has a latency: ${JSON.stringify(d.attempts)}`);
    // the attempt is recorded delivered by the activity a moment before its workflow completes
    const handle = temporal.workflow.getHandle(webhookWorkflowId(deliveryId));
    await handle.result();
    const wf = await handle.describe();
    assert.equal(wf.status.name, 'COMPLETED', 'the delivery workflow completed');
    assert.deepEqual(wf.searchAttributes.OrgId, [org], 'the workflow is searchable by its org');
    const byEndpoint = (await admin.get(`/v1/webhooks/${created.json.id}/deliveries`)).json.deliveries;
    assert.equal(byEndpoint[0].id, deliveryId, 'the endpoint\'s delivery list shows this delivery first');

    // resolved, and the receiver keeps failing: the delivery gives up after its time
    rx.scripts.set('/platform', Array(50).fill(503));
    await recordHeartbeat(env.db, node, heartbeat(5));
    await evaluateAlerts(env.db);
    await startPendingDeliveries(env.db, temporal, settings());
    const failedId = await until('the alert.resolved delivery', async () => rx.got.find((g) => g.path === '/platform' && JSON.parse(g.body).type === 'alert.resolved')?.headers['panel-delivery']);
    const failed = await until('failed', async () => {
      const x = await delivery(String(failedId));
      return x.status === 'failed' && x;
    });
    assert.ok(failed.attempts.length >= 3, JSON.stringify(failed.attempts));
    assert.ok(failed.attempts.every((a: { status_code: number }) => a.status_code === 503), `every attempt got the 503: ${JSON.stringify(failed.attempts)}`);

    // redelivery: a new delivery of the same event
    rx.scripts.set('/platform', []);
    const again = await admin.post(`/v1/webhook-deliveries/${failedId}/redeliver`);
    assert.equal(again.status, 202, JSON.stringify(again.json));
    assert.equal(again.json.redelivery_of, failedId, 'the redelivery points at the failed delivery');
    const redelivered = await until('redelivered', async () => {
      const x = await delivery(again.json.id);
      return x.status === 'delivered' && x;
    });
    assert.equal(redelivered.event_id, failed.event_id, 'the redelivery carries the same event');
    assert.equal(redelivered.attempts.length, 1, 'delivered at the first attempt');
    await admin.patch('/v1/alert-rules/node_cpu', { enabled: false });
    assert.equal((await admin.del(`/v1/webhooks/${created.json.id}`)).status, 204, 'the endpoint is deleted');
  });

  it('an endpoint receives the events of its org and everything below, and only it and the levels above see it', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const other = await createOrgWithLogin(admin, { type: 'provider' });
    const mine = await provider.client.post(`/v1/orgs/${provider.id}/webhooks`, { url: rx.url('/provider'), events: ['alert.fired'] });
    assert.equal(mine.status, 201, JSON.stringify(mine.json));
    assert.equal((await other.client.post(`/v1/orgs/${other.id}/webhooks`, { url: rx.url('/other'), events: ['alert.fired'] })).status, 201, 'the other provider creates its endpoint');
    assert.equal((await customer.client.post(`/v1/orgs/${provider.id}/webhooks`, { url: rx.url('/x'), events: ['alert.fired'] })).status, 404, 'a customer cannot create an endpoint on its provider\'s org');
    const e = await emitEvent(env.db, customer.id, 'alert.fired', { note: 'from below' });
    assert.equal(e.deliveries, 1, 'an event from below goes to the provider\'s endpoint');
    assert.equal((await emitEvent(env.db, customer.id, 'alert.resolved', {})).deliveries, 0, 'only the types it asked for');
    // no evaluation runs: the panel's dispatcher starts the delivery within seconds
    const got = await until('the provider delivery', async () => rx.got.find((g) => g.path === '/provider'));
    assert.equal(JSON.parse(got.body).id, e.id, 'the provider got the event from below');
    assert.equal(JSON.parse(got.body).org, customer.id, 'the payload names the customer org');
    await sleep(300);
    assert.ok(!rx.got.some((g) => g.path === '/other'), 'a sibling provider gets nothing');
    const deliveryId = String(got.headers['panel-delivery']);
    assert.equal((await provider.client.get(`/v1/webhook-deliveries/${deliveryId}`)).status, 200, 'the provider sees its delivery');
    assert.equal((await other.client.get(`/v1/webhook-deliveries/${deliveryId}`)).status, 404, 'a sibling provider does not see the delivery');
    assert.equal((await customer.client.get(`/v1/webhooks/${mine.json.id}/deliveries`)).status, 404, 'a customer does not see its provider\'s endpoint');
    assert.equal((await other.client.del(`/v1/webhooks/${mine.json.id}`)).status, 404, 'a sibling provider cannot delete the endpoint');
    assert.equal((await other.client.patch(`/v1/webhooks/${mine.json.id}`, { enabled: false })).status, 404, 'a sibling provider cannot change the endpoint');
    // disabled, it gets nothing; a bad change changes nothing
    assert.equal((await provider.client.patch(`/v1/webhooks/${mine.json.id}`, { url: 'http://10.0.0.1/', enabled: false })).status, 400, 'a private URL is refused');
    assert.equal((await provider.client.get(`/v1/orgs/${provider.id}/webhooks`)).json.endpoints[0].enabled, true, 'the refused change left the endpoint enabled');
    const off = await provider.client.patch(`/v1/webhooks/${mine.json.id}`, { enabled: false });
    assert.equal(off.status, 200, JSON.stringify(off.json));
    assert.equal(off.json.enabled, false, 'the endpoint is disabled');
    assert.equal((await emitEvent(env.db, customer.id, 'alert.fired', {})).deliveries, 0, 'a disabled endpoint gets no delivery');
  });
});
