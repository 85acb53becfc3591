import assert from 'node:assert/strict';
import { Client, Connection } from '@temporalio/client';
import { MockActivityEnvironment } from '@temporalio/testing';
import { heartbeating } from '../../../activities/panel/shared/heartbeating';
import { createOrgWithLogin, platformAdmin, startHostingPanel, unique, type HostingPanel, type PanelClient } from '../../helpers/panel';
import { env } from '../../setup/env';
import { readUntil } from '../../helpers/until';

// Long node activities heartbeat with a heartbeat timeout of seconds (issue 32 item 10): a worker
// that dies during a backup, restore, extraction or database statement is noticed within seconds
// and the activity retried, instead of a restore point staying `pending` for the 60-minute
// start-to-close timeout. Checked on the histories of real operations on a real hosting node.

/** the longest heartbeat timeout a node activity may have */
const MAX_HEARTBEAT_S = 30;

describe('panel: node activities heartbeat', function () {
  this.timeout(180_000);
  let panel: HostingPanel;
  let admin: PanelClient;
  let temporal: Client;

  before(async function () {
    this.timeout(120_000);
    panel = await startHostingPanel({ mariadb: true, backups: true });
    admin = await platformAdmin(panel.url);
    temporal = new Client({ connection: await Connection.connect({ address: env.temporalAddress }) });
  });
  after(async () => {
    await panel?.close();
    await temporal?.connection.close();
  });

  it('heartbeating() beats every second while its work runs, and stops after', async () => {
    const env = new MockActivityEnvironment();
    let beats = 0;
    env.on('heartbeat', () => beats++);
    const out = await env.run(() => heartbeating(() => new Promise<string>((r) => setTimeout(() => r('done'), 2500))));
    assert.equal(out, 'done', 'the work’s result is returned');
    assert.ok(beats >= 2, `at least two heartbeats in 2.5 s, saw ${beats}`);
    const after = beats;
    await new Promise((r) => setTimeout(r, 1200));
    assert.equal(beats, after, 'no heartbeat once the work ended');
  });

  it('site, database, backup and inspection activities are scheduled with a heartbeat timeout of seconds', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const s = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: `${unique('beat')}.example.com` });
    assert.equal(s.status, 201, JSON.stringify(s.json));
    await readUntil('site active', () => customer.client.get(`/v1/sites/${s.json.id}`), (r) => r.json.status === 'active');
    const d = await customer.client.post(`/v1/orgs/${customer.id}/databases`, { name: unique('beat_').replace(/-/g, '_') });
    assert.equal(d.status, 201, JSON.stringify(d.json));
    await readUntil('database active', () => customer.client.get(`/v1/databases/${d.json.id}`), (r) => r.json.status === 'active');
    const rp = await customer.client.post(`/v1/sites/${s.json.id}/restore-points`);
    assert.equal(rp.status, 202, JSON.stringify(rp.json));
    const ready = await readUntil('restore point ready', () => customer.client.get(`/v1/restore-points/${rp.json.id}`), (x) => x.json.status !== 'pending');
    assert.equal(ready.json.status, 'ready', JSON.stringify(ready.json));
    const insp = await admin.post(`/v1/restore-points/${rp.json.id}/inspection`);
    assert.equal(insp.status, 202, JSON.stringify(insp.json));
    await readUntil('inspection extracted', () => admin.get(`/v1/inspections/${insp.json.id}`), (x) => x.json.status !== 'extracting');

    const scheduled = new Map<string, number | null>();
    for await (const wf of temporal.workflow.list({ query: `TaskQueue = '${panel.taskQueue}'` })) {
      const history = await temporal.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory();
      for (const e of history.events ?? []) {
        const a = e.activityTaskScheduledEventAttributes;
        if (!a) continue;
        const t = a.heartbeatTimeout;
        scheduled.set(`${wf.type}.${a.activityType?.name}`, t?.seconds != null ? Number(t.seconds) + (t.nanos ?? 0) / 1e9 : null);
      }
    }
    for (const name of ['nodeOpWorkflow.applyOnHostingNode', 'databaseOpWorkflow.applyDatabaseOnHostingNode', 'backupOpWorkflow.applyBackupOnHostingNode', 'inspectionWorkflow.extractInspection']) {
      assert.ok(scheduled.has(name), `${name} ran: ${JSON.stringify([...scheduled])}`);
      const t = scheduled.get(name);
      assert.ok(t != null && t > 0 && t <= MAX_HEARTBEAT_S, `${name}: heartbeat timeout ${t} s, want 1..${MAX_HEARTBEAT_S} s`);
    }
  });
});
