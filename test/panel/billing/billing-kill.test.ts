import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { addLabelledNode, addSite, lastMeteredHour, startBillingPanel } from '../../helpers/billing';
import { createOrgWithLogin, platformAdmin, PanelClient, unique } from '../../helpers/panel';
import { startPanelChild, type PanelChild } from '../../helpers/panel-child';
import { env } from '../../setup/env';
import { until } from '../../helpers/until';

// A kill -9 of the panel process running the billing worker, in the middle of a metering catch-up
// and in the middle of month closes: the next process on the same task queue and schedule resumes
// the same workflows, and every hour is recorded once per billed org and site, every statement
// written once. Ten customers of a provider, five 1 GiB sites each, billed from 2031-03-27T00:00;
// the clock stands at 2031-04-01T00:30, so 120 hours are due at once (more than one tick run meters:
// the tick continues as new after 100).

const CUSTOMERS = 10;
const HOURS = 120;
const count = async (table: string, where: Record<string, unknown> = {}) => Number((await env.db(table).where(where).count('* as n').first())!.n);

describe('panel: billing survives a kill -9 of the worker process', function () {
  this.timeout(600_000);
  const taskQueue = `billing-kill-${randomUUID()}`;
  const scheduleId = `meter-kill-${randomUUID()}`;
  let provider: Awaited<ReturnType<typeof createOrgWithLogin>>;
  const customers: string[] = [];
  let child: PanelChild | null = null;

  before(async () => {
    const bp = await startBillingPanel('2031-03-26T23:30:00Z');
    try {
      const admin = await platformAdmin(bp.url);
      provider = await createOrgWithLogin(admin, { type: 'provider' });
      const plan = await provider.client.post(`/v1/orgs/${provider.id}/billing-plans`, { name: 'Hourly', currency: 'EUR', base_price: '744', account_price: '74.4', rates: 'default 7.44 0 0.744' });
      assert.equal(plan.status, 201, JSON.stringify(plan.json));
      const node = unique('kill-');
      await addLabelledNode(node, { logical_region: 'eu' });
      for (let i = 0; i < CUSTOMERS; i++) {
        const r = await provider.client.post('/v1/orgs', { type: 'customer', name: unique('c'), login: { username: unique('kil'), password: `temp-${randomUUID()}` } });
        assert.equal(r.status, 201, JSON.stringify(r.json));
        customers.push(r.json.id);
        for (let s = 0; s < 5; s++) await addSite(r.json.id, node, 1024);
        assert.equal((await provider.client.put(`/v1/orgs/${r.json.id}/billing-plan`, { plan_id: plan.json.id })).status, 200, 'the customer is put on the hourly plan');
      }
    } finally {
      await bp.close();
    }
  });
  after(async () => {
    await child?.close();
    // Metered hours are global (the last one recorded is where the next tick resumes): leave none
    // of 2031 behind for the suites whose clocks stand earlier.
    for (const t of ['panel_meter_orgs', 'panel_meter_sites', 'panel_meter_databases', 'panel_meter_hours']) await env.db(t).where('hour', '>=', '2031-03-26T00:00:00Z').delete();
  });

  it('metering: killed mid catch-up, the next process meters the rest, each hour once', async () => {
    child = await startPanelChild({ flags: ['-billing-meter'], billing: { clock: '2031-04-01T00:30:00Z', taskQueue, scheduleId } });
    await until('some hours metered', async () => (await count('panel_meter_hours')) >= 10, 120_000);
    await child.kill('SIGKILL');
    const atKill = await count('panel_meter_hours');
    assert.ok(atKill < HOURS, `all ${HOURS} hours were metered before the kill`);
    child = await startPanelChild({ flags: ['-billing-meter'], billing: { clock: '2031-04-01T00:30:00Z', taskQueue, scheduleId } });
    await until('every hour metered', async () => (await lastMeteredHour())?.toISOString() === '2031-03-31T23:00:00.000Z', 300_000);

    const hours = await env.db('panel_meter_hours').orderBy('hour').select('hour', 'orgs', 'sites');
    assert.equal(hours.length, HOURS, 'each hour of the catch-up is metered');
    hours.forEach((h, i) => {
      assert.equal(new Date(h.hour).getTime(), Date.parse('2031-03-27T00:00:00Z') + i * 3_600_000, `metered hour ${i} follows the previous one with no gap or repeat`);
      assert.deepEqual([h.orgs, h.sites], [CUSTOMERS, CUSTOMERS * 5], `hour ${h.hour} counts every customer org and its 5 sites once`);
    });
    assert.equal(await count('panel_meter_orgs'), HOURS * CUSTOMERS, 'each hour meters each customer org once');
    assert.equal(await count('panel_meter_sites'), HOURS * CUSTOMERS * 5, 'each hour meters each customer site once');
  });

  it('month close: killed with closes in flight, closing again writes each statement once', async () => {
    const viaChild = (c: PanelChild) => Object.assign(new PanelClient(c.url), { cookie: provider.client.cookie, csrf: provider.client.csrf });
    const first = viaChild(child!);
    const inFlight = customers.map((id) => first.post(`/v1/orgs/${id}/billing/close`, { period: '2031-03', confirm: true }).catch(() => null));
    await until('a first statement', async () => (await count('panel_statements')) >= 1, 120_000);
    await child!.kill('SIGKILL');
    await Promise.all(inFlight);
    const atKill = await env.db('panel_statements').select('org_id', 'id', 'closed_at');

    child = await startPanelChild({ flags: ['-billing-meter'], billing: { clock: '2031-04-01T00:30:00Z', taskQueue, scheduleId } });
    const again = viaChild(child);
    for (const id of customers) {
      const r = await again.post(`/v1/orgs/${id}/billing/close`, { period: '2031-03', confirm: true });
      assert.equal(r.status, 200, JSON.stringify(r.json));
      // 120 of 744 hours: base 120.00, one account 12.00, 600 site-hours 6.00, 600 GiB-hours 0.60
      assert.deepEqual([r.json.state, r.json.metered_hours, r.json.totals], ['closed', HOURS, { EUR: '138.60' }], `the statement of org ${id} is closed over every hour, totalled once`);
    }
    assert.equal(await count('panel_statements'), CUSTOMERS, 'one statement per customer, none written twice');
    for (const s of atKill) {
      const now = await env.db('panel_statements').where({ org_id: s.org_id }).first('id', 'closed_at');
      assert.deepEqual(now, { id: s.id, closed_at: s.closed_at }, 'a statement written before the kill was rewritten');
    }
  });
});
