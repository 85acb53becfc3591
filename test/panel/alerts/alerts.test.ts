import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Client, Connection, ScheduleNotFoundError } from '@temporalio/client';
import type { Heartbeat } from '../../../domain/panel/node-ops';
import { BUILT_IN_RULES } from '../../../domain/panel/alerts';
import { evaluateAlerts } from '../../../services/panel/alerts/evaluate';
import { ALERT_EVAL_SCHEDULE_ID } from '../../../domain/panel/workflows';
import { addNode, recordHeartbeat } from '../../../services/panel/nodes/nodes';
import { createOrgWithLogin, platformAdmin, startHostingPanel, startPanel, unique, type HostingPanel, type PanelClient } from '../../helpers/panel';
import { env } from '../../setup/env';

// Metrics samples, alert rules and alerts (issue 17 items 1-3) over real HTTP: a real panel with
// its hosting node and the panel worker, -metrics-interval on. Samples are driven by writing
// heartbeats (recordHeartbeat, as the node API does) and evaluation by calling it directly (and
// once through the alert-eval schedule).

type Metrics = Partial<{ cpu: number; load: number; memAvail: number }>;

const heartbeat = (m: Metrics = {}, usage: Heartbeat['usage'] = []): Heartbeat => ({
  facts: { webServer: 'builtin', phpVersions: [], mariadb: false, roles: ['web'], webAddress: '127.0.0.1:1' },
  metrics: {
    bootId: 'boot-1',
    uptimeSeconds: 3600,
    cpuPercent: m.cpu ?? 10,
    load: [m.load ?? 0.5, 0.4, 0.3],
    memory: { totalMb: 4096, availableMb: m.memAvail ?? 3000 },
    rootFs: { totalMb: 100_000, freeMb: 60_000 },
    network: { rxBytes: 1000, txBytes: 2000 },
    sampledAt: new Date().toISOString(),
  },
  usage,
  agentStartedAt: '2026-01-01T00:00:00.000Z',
  reconnects: 0,
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('panel: metrics samples, alert rules and alerts', function () {
  this.timeout(120_000);
  let panel: HostingPanel;
  let admin: PanelClient;

  async function newNode(): Promise<string> {
    const name = unique('n');
    await addNode(env.db, null, name);
    return name;
  }
  const report = (node: string, m: Metrics) => recordHeartbeat(env.db, node, heartbeat(m));
  const rule = async (key: string, change: Record<string, unknown>) => {
    const r = await admin.patch(`/v1/alert-rules/${key}`, change);
    assert.equal(r.status, 200, JSON.stringify(r.json));
    return r.json;
  };
  const alertsOf = async (node: string) => (await admin.get(`/v1/alerts?node=${node}`)).json.alerts as Array<{ id: string; rule: string; state: string; reopened: number }>;

  before(async function () {
    this.timeout(90_000);
    panel = await startHostingPanel({ flags: ['-metrics-interval', '60s', '-controller-state'], reportEveryMs: 3_600_000 });
    admin = await platformAdmin(panel.url);
    // only the rules a case turns on fire (every node of the shared database is evaluated)
    for (const r of BUILT_IN_RULES) await rule(r.key, { enabled: false });
  });
  after(async () => {
    for (const r of BUILT_IN_RULES) await admin.post(`/v1/alert-rules/${r.key}/restore`);
    await panel?.close();
  });

  it('takes one sample per report at each evaluation and charts them per step, validated and bounded', async () => {
    const node = await newNode();
    await report(node, { cpu: 50 });
    const first = await evaluateAlerts(env.db);
    assert.ok(first.samples >= 1, JSON.stringify(first));
    const again = await evaluateAlerts(env.db);
    assert.equal(Number((await env.db('panel_node_samples').where({ node_name: node }).count('* as n').first())!.n), 1, 'an unchanged report is not sampled twice');
    assert.ok(again.ms >= 0, `the evaluation reports its duration: ${again.ms} ms`);
    await report(node, { cpu: 70 });
    await evaluateAlerts(env.db);
    const to = new Date(Date.now() + 60_000).toISOString();
    const from = new Date(Date.now() - 3_600_000).toISOString();
    const chart = await admin.get(`/v1/cluster/nodes/${node}/metrics?from=${from}&to=${to}&step=7200`);
    assert.equal(chart.status, 200, JSON.stringify(chart.json));
    assert.equal(chart.json.metrics_sampling, true, 'the chart says sampling is on');
    assert.equal(chart.json.points.length, 1, 'both samples fall in one 2-hour step');
    assert.equal(chart.json.points[0].samples, 2, 'the step holds the two samples');
    assert.equal(chart.json.points[0].cpu_percent, 60, "the step's CPU is the average of 50 and 70");
    assert.equal(chart.json.points[0].cpu_percent_max, 70, "the step's highest CPU is 70");
    assert.ok(Math.abs(chart.json.points[0].memory_used_percent - (100 * (4096 - 3000)) / 4096) < 1e-9, `memory used percent: ${chart.json.points[0].memory_used_percent}`);
    // the hosting node's own report is sampled too
    const hosting = await admin.get('/v1/cluster/nodes/hosting/metrics');
    assert.equal(hosting.status, 200, "the hosting node's chart answers");
    assert.ok(hosting.json.points.length >= 1, JSON.stringify(hosting.json));

    // older than 2 days: rolled up hourly (averages weighted by samples, the highest CPU); older than 14 days: gone
    const hour = new Date(Math.floor((Date.now() - 3 * 86_400_000) / 3_600_000) * 3_600_000);
    const at = (min: number) => new Date(hour.getTime() + min * 60_000);
    await env.db('panel_node_samples').insert([
      { node_name: node, at: at(1), cpu_percent: 20, memory_used_percent: 10 },
      { node_name: node, at: at(2), cpu_percent: 40, memory_used_percent: null },
    ]);
    await env.db('panel_node_samples_hourly').insert({ node_name: node, hour: new Date(Date.now() - 15 * 86_400_000), samples: 60, cpu_percent: 1 });
    await evaluateAlerts(env.db);
    assert.equal(Number((await env.db('panel_node_samples').where({ node_name: node }).where('at', '<', new Date(Date.now() - 2 * 86_400_000)).count('* as n').first())!.n), 0, 'samples older than 2 days are rolled up, none left raw');
    const hourly = await env.db('panel_node_samples_hourly').where({ node_name: node }).select('*');
    assert.equal(hourly.length, 1, 'the 15-day-old hour is gone');
    assert.deepEqual([hourly[0].samples, hourly[0].cpu_percent, hourly[0].cpu_percent_max, hourly[0].memory_used_percent], [2, 30, 40, 10], 'the hour rolled up: 2 samples, average CPU 30, highest 40, memory 10 (the null left out)');
    const old = await admin.get(`/v1/cluster/nodes/${node}/metrics?from=${at(-60).toISOString()}&to=${at(120).toISOString()}&step=10800`);
    assert.equal(old.status, 200, JSON.stringify(old.json));
    assert.deepEqual(old.json.points.map((p: Record<string, number>) => [p.samples, p.cpu_percent, p.cpu_percent_max, p.memory_used_percent]), [[2, 30, 40, 10]], 'the chart of the old hour reads the hourly rollup');

    for (const [qs, field] of [
      ['step=1', 'step'],
      ['step=0', 'step'],
      ['from=yesterday', 'from'],
      [`from=${to}&to=${from}`, 'from'],
      [`from=2026-01-01T00:00:00Z&to=2026-03-01T00:00:00Z&step=86400`, 'from'],
    ]) {
      const r = await admin.get(`/v1/cluster/nodes/${node}/metrics?${qs}`);
      assert.equal(r.status, 400, `${qs}: ${JSON.stringify(r.json)}`);
      assert.equal(r.json.error.details.field, field, qs);
    }
    assert.equal((await admin.get('/v1/cluster/nodes/no-such-node/metrics')).status, 404, "an unknown node's chart is not found");
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const hidden = await provider.client.get(`/v1/cluster/nodes/${node}/metrics`);
    assert.equal(hidden.status, 404, "a provider cannot see a node's chart");
    assert.equal(hidden.json.error.code, 'route_not_found', 'the cluster routes do not exist for a provider');
  });

  it('lists the built-in rules, changes them (bad values change nothing) and restores their built-in values', async () => {
    const list = await admin.get('/v1/alert-rules');
    assert.equal(list.status, 200, 'the rules are listed');
    assert.deepEqual(list.json.rules.map((r: { key: string }) => r.key), BUILT_IN_RULES.map((r) => r.key), 'every built-in rule is listed, in order');
    const cpu = list.json.rules.find((r: { key: string }) => r.key === 'node_cpu');
    assert.deepEqual(cpu.built_in, { threshold: 90, for_seconds: 300, reopen_seconds: 900, severity: 'warning', enabled: true }, "the node_cpu rule's built-in values");
    const changed = await rule('node_cpu', { threshold: 75, severity: 'critical' });
    assert.equal(changed.threshold, 75, 'the threshold is changed');
    assert.equal(changed.severity, 'critical', 'the severity is changed');
    assert.equal(changed.changed, true, 'the rule is marked changed from its built-in values');
    assert.equal(changed.condition, 'CPU busy above 75 %', 'the condition shows the new threshold');
    for (const [body, field] of [
      [{ threshold: -1 }, 'threshold'],
      [{ for_seconds: 1.5 }, 'for_seconds'],
      [{ reopen_seconds: 10 ** 9 }, 'reopen_seconds'],
      [{ severity: 'page' }, 'severity'],
      [{ colour: 'red' }, 'colour'],
      [{}, 'body'],
    ] as const) {
      const r = await admin.patch('/v1/alert-rules/node_cpu', body);
      assert.equal(r.status, 400, JSON.stringify(r.json));
      assert.equal(r.json.error.details.field, field, `the refusal names the field: ${JSON.stringify(r.json)}`);
    }
    const after = (await admin.get('/v1/alert-rules')).json.rules.find((r: { key: string }) => r.key === 'node_cpu');
    assert.equal(after.threshold, 75, 'a refused change changes nothing');
    assert.equal((await admin.patch('/v1/alert-rules/no_such_rule', { threshold: 1 })).status, 404, 'an unknown rule is not found');
    const restored = await admin.post('/v1/alert-rules/node_cpu/restore');
    assert.equal(restored.status, 200, 'the rule is restored');
    assert.equal(restored.json.threshold, 90, 'the built-in threshold is back');
    assert.equal(restored.json.enabled, true, 'the restored rule is enabled');
    assert.equal(restored.json.changed, false, 'a restored rule is no longer marked changed');
    await rule('node_cpu', { enabled: false });
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    assert.equal((await provider.client.get('/v1/alert-rules')).status, 404, 'a provider cannot list the rules');
    assert.equal((await provider.client.patch('/v1/alert-rules/node_cpu', { threshold: 1 })).status, 404, 'a provider cannot change a rule');
  });

  it('fires, is acknowledged, resolves, re-opens inside the re-open window and opens a new alert outside it', async () => {
    const node = await newNode();
    await rule('node_cpu', { enabled: true, threshold: 80, for_seconds: 0, reopen_seconds: 3600 });
    await report(node, { cpu: 95 });
    const fired = await evaluateAlerts(env.db);
    assert.ok(fired.fired >= 1, `the cpu rule fired: ${JSON.stringify(fired)}`);
    let [a] = await alertsOf(node);
    assert.equal(a.state, 'open', 'the alert is open');
    assert.equal(a.rule, 'node_cpu', 'the alert is of the cpu rule');
    const ack = await admin.post(`/v1/alerts/${a.id}/acknowledge`, { note: 'looking' });
    assert.equal(ack.status, 200, JSON.stringify(ack.json));
    assert.equal(ack.json.state, 'acknowledged', 'the alert is acknowledged');
    assert.equal(ack.json.note, 'looking', 'the acknowledgement keeps its note');
    assert.equal((await admin.post(`/v1/alerts/${a.id}/acknowledge`)).status, 409, 'acknowledging twice is a conflict');
    // still high: nothing changes; then the condition clears: resolved
    await report(node, { cpu: 96 });
    await evaluateAlerts(env.db);
    assert.equal((await alertsOf(node))[0].state, 'acknowledged', 'still high: the alert stays acknowledged');
    await report(node, { cpu: 10 });
    await evaluateAlerts(env.db);
    assert.equal((await alertsOf(node))[0].state, 'resolved', 'the condition cleared: the alert is resolved');
    // it returns inside the window: the same alert re-opens
    await report(node, { cpu: 97 });
    await evaluateAlerts(env.db);
    let all = await alertsOf(node);
    assert.equal(all.length, 1, 'back inside the re-open window: still one alert');
    assert.equal(all[0].id, a.id, 'the same alert re-opens');
    assert.equal(all[0].state, 'open', 'the re-opened alert is open');
    assert.equal(all[0].reopened, 1, 'the alert was re-opened once');
    // resolved by hand while the condition holds: stays resolved until the condition returns
    const res = await admin.post(`/v1/alerts/${a.id}/resolve`, { note: 'fixed the runaway job' });
    assert.equal(res.json.state, 'resolved', 'the alert is resolved by hand');
    assert.equal((await admin.post(`/v1/alerts/${a.id}/resolve`)).status, 409, 'resolving twice is a conflict');
    await report(node, { cpu: 98 });
    await evaluateAlerts(env.db);
    assert.equal((await alertsOf(node))[0].state, 'resolved', 'resolved by hand while the condition holds: it stays resolved');
    const detail = await admin.get(`/v1/alerts/${a.id}`);
    assert.deepEqual(detail.json.events.map((e: { kind: string }) => e.kind), ['fired', 'acknowledged', 'resolved', 'reopened', 'resolved'], "the alert's events in order");
    assert.equal(detail.json.events[1].actor, 'admin', "the acknowledgement's actor is the admin");
    assert.equal(detail.json.events[4].note, 'fixed the runaway job', 'the resolve by hand keeps its note');
    assert.equal(detail.json.chart.node, node, "the alert's chart is of its node");
    assert.match(detail.json.chart.metrics, new RegExp(`^/v1/cluster/nodes/${node}/metrics\\?from=`), "the alert links to its node's chart");
    assert.equal((await admin.get(detail.json.chart.metrics)).status, 200, "the alert's chart link answers");
    // outside the window (1 s): a new alert
    await rule('node_cpu', { reopen_seconds: 1 });
    await report(node, { cpu: 10 });
    await evaluateAlerts(env.db);
    await sleep(1200);
    await report(node, { cpu: 99 });
    await evaluateAlerts(env.db);
    all = await alertsOf(node);
    assert.equal(all.length, 2, 'outside the re-open window: a second alert');
    [a] = all;
    assert.notEqual(a.id, all[1].id, 'the new alert is another one');
    assert.equal(a.state, 'open', 'the new alert is open');
    assert.equal(a.reopened, 0, 'the new alert was never re-opened');
    // related: another rule's alert on the same node at the same time
    await rule('node_memory', { enabled: true, threshold: 50, for_seconds: 0 });
    await report(node, { cpu: 99, memAvail: 100 });
    await evaluateAlerts(env.db);
    const mem = (await alertsOf(node)).find((x) => x.rule === 'node_memory')!;
    const rel = await admin.get(`/v1/alerts/${mem.id}`);
    assert.deepEqual(rel.json.related.map((x: { id: string }) => x.id), [a.id], 'the memory alert is related to the cpu alert on the same node at the same time');
    await rule('node_memory', { enabled: false });
    await rule('node_cpu', { enabled: false });
    await evaluateAlerts(env.db);
    assert.deepEqual((await alertsOf(node)).map((x) => x.state), ['resolved', 'resolved', 'resolved'], 'a disabled rule resolves its alerts');
  });

  it('waits for the for-time before firing', async () => {
    const node = await newNode();
    await rule('node_load', { enabled: true, threshold: 4, for_seconds: 2 });
    await report(node, { load: 20 });
    await evaluateAlerts(env.db);
    assert.equal((await alertsOf(node)).length, 0, 'pending, not fired yet');
    await sleep(2100);
    await report(node, { load: 21 });
    await evaluateAlerts(env.db);
    const [a] = await alertsOf(node);
    assert.equal(a.state, 'open', 'after the for-time the alert fires');
    await rule('node_load', { enabled: false });
  });

  it('a flapping node has one alert, re-opened, never two open', async () => {
    const node = await newNode();
    await rule('node_cpu', { enabled: true, threshold: 80, for_seconds: 0, reopen_seconds: 3600 });
    for (let i = 0; i < 6; i++) {
      await report(node, { cpu: i % 2 ? 5 : 95 });
      await evaluateAlerts(env.db);
    }
    const all = await alertsOf(node);
    assert.equal(all.length, 1, 'a flapping node has one alert');
    assert.equal(all[0].reopened, 2, 'the alert was re-opened twice');
    const events = await env.db('panel_events').whereRaw(`data->'alert'->>'subject' = ?`, [`node:${node}`]).orderBy('created_at').pluck('type');
    assert.deepEqual(events, ['alert.fired', 'alert.resolved', 'alert.fired', 'alert.resolved', 'alert.fired', 'alert.resolved'], 'the events: fired and resolved three times');
    await rule('node_cpu', { enabled: false });
  });

  it('shows platform alerts at the root only and soft-quota alerts to the account chain (404 elsewhere)', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const customer = await createOrgWithLogin(provider.client, { type: 'customer', limits: { disk_mb: 100, inodes: 10 } });
    const other = await createOrgWithLogin(admin, { type: 'provider' });
    // a site of the customer on the hosting node, measured at 90 MB of the account's 100 and of its own
    // quota of 100, and at 10 files of the account's 10
    const siteId = randomUUID();
    await env.db('panel_sites').insert({ id: siteId, org_id: customer.id, domain: `${unique('v')}.example.com`, node_name: 'hosting', quota_mb: 100, status: 'active', placement: JSON.stringify({}) });
    await recordHeartbeat(env.db, 'hosting', heartbeat({}, [{ siteId, diskMb: 90, inodes: 10 }]));
    for (const key of ['disk_quota_80', 'disk_quota_100', 'inode_quota_80', 'inode_quota_100']) await rule(key, { enabled: true });
    await rule('node_heartbeat', { enabled: true, threshold: 0 });
    const node = await newNode();
    await evaluateAlerts(env.db);
    const seen = (await customer.client.get('/v1/alerts')).json.alerts;
    assert.deepEqual(
      seen.map((x: { rule: string; subject: string; severity: string }) => `${x.rule} ${x.subject} ${x.severity}`).sort(),
      [`disk_quota_80 org:${customer.id} warning`, `disk_quota_80 site:${siteId} warning`, `inode_quota_100 org:${customer.id} critical`, `inode_quota_80 org:${customer.id} warning`],
      'the customer sees its soft-quota alerts: disk 80 % of account and site, inodes 80 and 100 %',
    );
    const quota = seen.filter((x: { rule: string; subject: string }) => x.rule === 'disk_quota_80' && x.subject === `org:${customer.id}`);
    assert.equal(quota[0].scope, 'account', "the account's disk alert has the account scope");
    assert.equal(quota[0].value, 90, "the disk alert's value is the 90 MB measured");
    const nodeAlert = (await alertsOf(node))[0];
    assert.equal(nodeAlert.rule, 'node_heartbeat', 'a new node without heartbeat fires the heartbeat rule');
    // the account and the level above see it; another provider gets 404; node alerts are the root's
    assert.equal((await provider.client.get(`/v1/alerts/${quota[0].id}`)).status, 200, "the level above sees the account's alert");
    assert.equal((await other.client.get(`/v1/alerts/${quota[0].id}`)).status, 404, 'another provider does not see it');
    assert.equal((await other.client.post(`/v1/alerts/${quota[0].id}/acknowledge`)).status, 404, 'another provider cannot acknowledge it');
    assert.equal((await customer.client.get(`/v1/alerts/${nodeAlert.id}`)).status, 404, 'an account does not see a node alert');
    assert.ok(!(await provider.client.get('/v1/alerts')).json.alerts.some((x: { id: string }) => x.id === nodeAlert.id), `the provider does not see the node alert ${nodeAlert.id}`);
    assert.equal((await admin.get(`/v1/alerts/${quota[0].id}`)).status, 200, "the root sees the account's alert");
    const ack = await customer.client.post(`/v1/alerts/${quota[0].id}/acknowledge`, { note: 'cleaning up' });
    assert.equal(ack.json.state, 'acknowledged', 'the account acknowledges its own alert');
    for (const key of ['disk_quota_80', 'disk_quota_100', 'inode_quota_80', 'inode_quota_100', 'node_heartbeat']) await rule(key, { enabled: false });
    await evaluateAlerts(env.db);
    await env.db('panel_sites').where({ id: siteId }).delete();
    // the account can still be deleted: its alerts and events go with it
    const gone = await provider.client.del(`/v1/orgs/${customer.id}`, { confirm: customer.id });
    assert.equal(gone.status, 204, JSON.stringify(gone.json));
    assert.equal((await admin.get(`/v1/alerts/${quota[0].id}`)).status, 404, "the deleted account's alerts are gone");
  });

  it('runs the evaluation from the alert-eval schedule', async () => {
    const node = await newNode();
    await rule('node_cpu', { enabled: true, threshold: 80, for_seconds: 0 });
    await report(node, { cpu: 95 });
    const connection = await Connection.connect({ address: env.temporalAddress });
    try {
      const temporal = new Client({ connection });
      const schedule = await temporal.schedule.getHandle(ALERT_EVAL_SCHEDULE_ID).describe();
      assert.equal(schedule.action.type, 'startWorkflow', 'the alert-eval schedule starts a workflow');
      await temporal.schedule.getHandle(ALERT_EVAL_SCHEDULE_ID).trigger();
      const deadline = Date.now() + 30_000;
      while (!(await alertsOf(node)).length && Date.now() < deadline) await sleep(200);
      assert.equal((await alertsOf(node))[0]?.state, 'open', 'the scheduled evaluation opened the alert');
    } finally {
      await connection.close();
      await rule('node_cpu', { enabled: false });
    }
  });
});

describe('panel: alerts without -metrics-interval', function () {
  this.timeout(60_000);
  it('says sampling is off on reads and refuses rule changes', async () => {
    const panel = await startPanel({ flags: [] });
    try {
      const admin = await platformAdmin(panel.url);
      const list = await admin.get('/v1/alerts');
      assert.equal(list.status, 200, 'the alerts list answers without sampling');
      assert.equal(list.json.metrics_sampling, false, 'the alerts list says sampling is off');
      assert.match(list.json.message, /-metrics-interval/, 'the alerts list names the -metrics-interval flag');
      const rules = await admin.get('/v1/alert-rules');
      assert.equal(rules.json.metrics_sampling, false, 'the rules list says sampling is off');
      const change = await admin.patch('/v1/alert-rules/node_cpu', { threshold: 1 });
      assert.equal(change.status, 409, 'a rule change is refused with 409 without sampling');
      assert.match(change.json.error.message, /-metrics-interval/, 'the refusal names the -metrics-interval flag');
      const chart = await admin.get('/v1/cluster/nodes/hosting/metrics');
      assert.equal(chart.json.metrics_sampling, false, 'the chart says sampling is off');
      assert.deepEqual(chart.json.points, [], 'the chart has no points without sampling');
    } finally {
      await panel.close();
    }
  });

  it('removes the alert-eval schedule of an earlier start', async () => {
    const connection = await Connection.connect({ address: env.temporalAddress });
    const hosting = await startHostingPanel({ flags: [] });
    try {
      await assert.rejects(new Client({ connection }).schedule.getHandle(ALERT_EVAL_SCHEDULE_ID).describe(), ScheduleNotFoundError);
    } finally {
      await hosting.close();
      await connection.close();
    }
  });
});
