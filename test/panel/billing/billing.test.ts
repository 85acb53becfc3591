import assert from 'node:assert/strict';
import Decimal from 'decimal.js';
import { recordHour } from '../../../services/panel/billing/metering';
import { monthCloseWorkflowId } from '../../../domain/panel/workflows';
import { addDatabase, addLabelledNode, addSite, startBillingPanel, type BillingPanel } from '../../helpers/billing';
import { createOrgWithLogin, platformAdmin, startPanel, unique, type PanelClient, type Reply } from '../../helpers/panel';
import { env } from '../../setup/env';
import { SA } from '../../../domain/shared/search-attributes';

// Billing over the API with a fake clock driving the hourly metering (spec 2 sections 2.8, 3, 4.1,
// 4.2): a provider P bills reseller R with plan P1, then P2 from the next hour after a change; R
// bills its customers C1 (on package A) and C2 with plan Q1. Its sites run on three labelled nodes.
// Every expected amount below was worked out by hand: Σ quantity-hours × monthly price / 744 hours
// (January), rounded half up once per line to the cent.

function refused(r: Reply, status: number, code: string, field?: string) {
  assert.equal(r.status, status, JSON.stringify(r.json));
  assert.equal(r.json.error.code, code, `the refusal's error code: ${JSON.stringify(r.json)}`);
  if (field) assert.equal(r.json.error.details.field, field, `the refusal names the field: ${JSON.stringify(r.json)}`);
}

const amounts = (st: { lines: Array<{ plan: string; kind: string; detail: string; amount: string }> }) =>
  Object.fromEntries(st.lines.map((l) => [`${l.plan} ${l.kind} ${l.detail}`, l.amount]));

describe('panel: billing', function () {
  this.timeout(180_000);
  let bp: BillingPanel;
  let admin: PanelClient;
  let P: Awaited<ReturnType<typeof createOrgWithLogin>>;
  let R: Awaited<ReturnType<typeof createOrgWithLogin>>;
  let C1: Awaited<ReturnType<typeof createOrgWithLogin>>;
  let C2: Awaited<ReturnType<typeof createOrgWithLogin>>;
  let pkgA: string;
  let p1: string;
  let p2: string;
  let q1: string;
  const [na, nb, nc] = [unique('na-'), unique('nb-'), unique('nc-')];

  before(async () => {
    bp = await startBillingPanel('2030-01-31T10:30:00Z');
    admin = await platformAdmin(bp.url);
    P = await createOrgWithLogin(admin, { type: 'provider' });
    R = await createOrgWithLogin(P.client, { type: 'reseller' });
    C1 = await createOrgWithLogin(R.client, { type: 'customer' });
    C2 = await createOrgWithLogin(R.client, { type: 'customer' });
    pkgA = (await P.client.post(`/v1/orgs/${P.id}/packages`, { name: 'A', limits: {} })).json.id;
    assert.equal((await R.client.put(`/v1/orgs/${C1.id}/package`, { package_id: pkgA })).status, 200, 'C1 is put on package A');
    await addLabelledNode(na, { logical_region: 'eu', zone: 'z1' });
    await addLabelledNode(nb, { logical_region: 'eu', zone: 'z1' });
    await addLabelledNode(nc, { logical_region: 'us' });
    await addSite(C1.id, na, 2048);
    await addSite(C1.id, nb, 1024);
    await addSite(C2.id, nc, 512, 'suspended');
    // not billed: a site still being created and one its node failed
    await addSite(C2.id, nc, 4096, 'pending');
    await addSite(C2.id, nc, 4096, 'failed');
    await addDatabase(C1.id, na);
  });
  after(async () => {
    await bp?.close();
  });

  it('creates plans with ISO 4217 currencies, non-negative prices and rate lines, and refuses bad ones naming the field or line', async () => {
    const rates = [`# selector website database GiB`, `zone=z1 40 20 10`, `region=eu 60 30 15`, `node=${na} 80 40 20`, `default 30 10 5`].join('\n');
    const created = await P.client.post(`/v1/orgs/${P.id}/billing-plans`, { name: 'P1', currency: 'eur', base_price: '1000', account_price: 100, package_prices: { [pkgA]: '250' }, rates });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    assert.equal(created.json.currency, 'EUR', 'the currency is stored upper-cased');
    assert.deepEqual([created.json.base_price, created.json.account_price, created.json.package_prices], ['1000', '100', { [pkgA]: '250' }], 'the prices are stored as exact decimal strings');
    assert.deepEqual(
      created.json.rate_lines.map((l: { line: number; selector: unknown }) => [l.line, l.selector]),
      [
        [2, { key: 'zone', value: 'z1' }],
        [3, { key: 'region', value: 'eu' }],
        [4, { key: 'node', value: na }],
        [5, 'default'],
      ],
      'each rate line keeps its line number and parsed selector',
    );
    p1 = created.json.id;
    p2 = (await P.client.post(`/v1/orgs/${P.id}/billing-plans`, { name: 'P2', currency: 'EUR', base_price: '2000', account_price: '150', rates: 'default 50 25 12.5' })).json.id;
    q1 = (await R.client.post(`/v1/orgs/${R.id}/billing-plans`, { name: 'Q1', currency: 'EUR', base_price: '500', account_price: '200', rates: 'default 100 50 10' })).json.id;
    assert.ok(p2 && q1, `both plans were created: P2 ${p2}, Q1 ${q1}`);

    const good = { name: 'X', currency: 'EUR', base_price: '1', account_price: '1', rates: 'default 1 1 1' };
    refused(await P.client.post(`/v1/orgs/${P.id}/billing-plans`, { ...good, currency: 'EURO' }), 400, 'validation_failed', 'currency');
    refused(await P.client.post(`/v1/orgs/${P.id}/billing-plans`, { ...good, currency: 'XYZ' }), 400, 'validation_failed', 'currency');
    const negative = await P.client.post(`/v1/orgs/${P.id}/billing-plans`, { ...good, base_price: '-5' });
    refused(negative, 400, 'validation_failed', 'base_price');
    assert.match(negative.json.error.message, /cannot be negative/, 'the error says a price cannot be negative');
    refused(await P.client.post(`/v1/orgs/${P.id}/billing-plans`, { ...good, account_price: '1.1234567' }), 400, 'validation_failed', 'account_price');
    const cases: Array<[string, RegExp]> = [
      ['default 1 1 1\nregion=eu 1 1', /line 2: 3 fields instead of 4/],
      ['default 1 1 1\n\nplanet=mars 1 1 1', /line 3: unknown selector "planet=mars"/],
      ['zone=a 1 -1 1', /line 1: price_per_database "-1"/],
      ['default 1 1 1\ndefault 2 2 2', /line 2: selector "default" is already on line 1/],
      ['node= 1 1 1', /line 1: unknown selector/],
    ];
    for (const [text, message] of cases) {
      const r = await P.client.post(`/v1/orgs/${P.id}/billing-plans`, { ...good, rates: text });
      refused(r, 400, 'validation_failed', 'rates');
      assert.match(r.json.error.message, message, `the error names the bad rate line: ${text}`);
    }
    refused(await P.client.post(`/v1/orgs/${P.id}/billing-plans`, { ...good, package_prices: { [C1.id]: '1' } }), 400, 'validation_failed', `package_prices.${C1.id}`);
    refused(await P.client.post(`/v1/orgs/${P.id}/billing-plans`, { ...good, name: 'p1' }), 409, 'conflict', 'name');
    refused(await C1.client.post(`/v1/orgs/${C1.id}/billing-plans`, good), 403, 'forbidden');
    assert.equal((await C1.client.get(`/v1/billing-plans/${q1}`)).status, 200, "a customer reads its own reseller's plan");
    refused(await C1.client.get(`/v1/billing-plans/${p1}`), 404, 'not_found');
    // nothing of the refused ones was written
    assert.deepEqual(((await P.client.get(`/v1/orgs/${P.id}/billing-plans`)).json.plans as Array<{ name: string }>).map((p) => p.name), ['P1', 'P2'], 'only P1 and P2 were written');
  });

  it('assigns plans (a plan bills the orgs directly below its owner) from the next metered hour', async () => {
    refused(await P.client.put(`/v1/orgs/${C1.id}/billing-plan`, { plan_id: p1 }), 404, 'not_found', 'plan_id');
    refused(await R.client.put(`/v1/orgs/${R.id}/billing-plan`, { plan_id: q1 }), 403, 'forbidden');
    const set = await P.client.put(`/v1/orgs/${R.id}/billing-plan`, { plan_id: p1 });
    assert.equal(set.status, 200, JSON.stringify(set.json));
    assert.equal(set.json.current, null, 'R had no plan before');
    assert.deepEqual([set.json.next.plan_id, set.json.next.effective_from], [p1, '2030-01-31T11:00:00.000Z'], 'the plan applies from the next metered hour');
    for (const c of [C1, C2]) assert.equal((await R.client.put(`/v1/orgs/${c.id}/billing-plan`, { plan_id: q1 })).status, 200, 'R puts its customers on Q1');
    refused(await P.client.del(`/v1/billing-plans/${p1}`), 409, 'conflict');
  });

  it('meters each hour once with a fake clock; a plan change mid-month shows both plans; selectors, package prices and margin rate as set', async () => {
    const schedule = await bp.temporal.schedule.getHandle(bp.scheduleId).describe();
    assert.deepEqual(schedule.spec.intervals, [{ every: 3_600_000, offset: 60_000 }], 'the meter schedule runs hourly at one minute past');
    assert.deepEqual([schedule.action.type, schedule.action.workflowType, schedule.action.taskQueue, schedule.policies.overlap], ['startWorkflow', 'meterTickWorkflow', bp.taskQueue, 'SKIP'], 'the schedule starts the meter tick workflow, skipping overlaps');
    await bp.meterUntil('2030-01-31T15:05:00Z'); // hours 11..14 under P1
    const change = await P.client.put(`/v1/orgs/${R.id}/billing-plan`, { plan_id: p2 });
    assert.deepEqual([change.json.current.plan_id, change.json.next.plan_id, change.json.next.effective_from], [p1, p2, '2030-01-31T16:00:00.000Z'], 'the plan change keeps P1 until the next hour, then P2');
    await bp.meterUntil('2030-01-31T18:05:00Z'); // hour 15 under P1, 16..17 under P2

    const hours = await env.db('panel_meter_hours').orderBy('hour').select('hour', 'orgs', 'sites', 'databases');
    assert.deepEqual(
      hours.map((h) => [new Date(h.hour).toISOString().slice(11, 13), h.orgs, h.sites, h.databases]),
      ['11', '12', '13', '14', '15', '16', '17'].map((h) => [h, 3, 6, 2]),
      'each hour 11..17 metered once: 3 orgs, 6 sites, 2 databases',
    );
    // a repeated hour writes nothing; site usage hours 35 days behind the hour go, newer ones stay
    const site = (await env.db('panel_sites').first('id'))!.id;
    const usageHours = ['2029-12-27T11:00:00Z', '2029-12-27T12:00:00Z'].map((h) => ({ site_id: site, hour: new Date(h), cpu_us: 1 }));
    await env.db('panel_site_usage_hours').insert(usageHours).onConflict(['site_id', 'hour']).ignore();
    const again = await recordHour(env.db, '2030-01-31T12');
    const kept = await env.db('panel_site_usage_hours').where({ site_id: site }).whereIn('hour', usageHours.map((u) => u.hour)).pluck('hour');
    assert.deepEqual(kept.map((h: Date) => h.toISOString()), ['2029-12-27T12:00:00.000Z'], 'the usage hour 35 days and one hour behind is pruned, the one 35 days behind is kept');
    assert.deepEqual([again.already, again.orgs, again.sites], [true, 3, 6], 'a repeated hour is already metered and counts the same');
    assert.equal(Number((await env.db('panel_meter_sites').count('* as n').first())!.n), 42, 'a repeated hour writes no site rows: 7 hours x 6 sites');

    const page = await R.client.get(`/v1/orgs/${R.id}/billing`);
    assert.equal(page.status, 200, JSON.stringify(page.json));
    assert.deepEqual(page.json.metering, { on: true, message: 'usage is metered hourly' }, 'metering is on');
    const own = page.json.statement;
    assert.deepEqual([own.state, own.period, own.metered_hours, own.billed_by], ['estimate', '2030-01', 7, P.id], "R's own statement: an estimate for January, 7 hours, billed by P");
    assert.deepEqual(own.plans.map((p: { plan: string; hours: number }) => [p.plan, p.hours]).sort(), [['P1', 5], ['P2', 2]], '5 hours under P1 and 2 under P2');
    assert.deepEqual(amounts(own), {
      'P1 base per organisation': '6.72',
      [`P1 accounts package ${pkgA}`]: '1.68',
      'P1 accounts per customer account': '0.67',
      [`P1 websites node=${na}`]: '0.54',
      [`P1 databases node=${na}`]: '0.27',
      [`P1 disk node=${na}`]: '0.27',
      'P1 websites zone=z1': '0.27',
      'P1 disk zone=z1': '0.07',
      'P1 websites default': '0.20',
      'P1 disk default': '0.02',
      'P2 base per organisation': '5.38',
      'P2 accounts per customer account': '0.81',
      'P2 websites default': '0.40',
      'P2 databases default': '0.07',
      'P2 disk default': '0.12',
    }, "each line's amount worked out by hand");
    assert.deepEqual(own.totals, { EUR: '17.49' }, "R's total is the sum of its lines");
    const below = Object.fromEntries(page.json.billed_orgs.map((b: { org_id: string; totals: unknown; metered_hours: number; org_status: string }) => [b.org_id, [b.metered_hours, b.totals, b.org_status]]));
    assert.deepEqual(below, { [C1.id]: [7, { EUR: '9.21' }, 'active'], [C2.id]: [7, { EUR: '7.57' }, 'active'] }, "each customer's hours, total and status");
    assert.deepEqual([page.json.billed_to_customers, page.json.billed_to_it, page.json.margin], [{ EUR: '16.78' }, { EUR: '17.49' }, { EUR: '-0.71' }], 'billed to customers, billed to R and the margin');

    // the provider's page lists R; a customer sees its own statement only
    assert.deepEqual((await P.client.get(`/v1/orgs/${P.id}/billing`)).json.billed_orgs.map((b: { org_id: string }) => b.org_id), [R.id], "the provider's page lists R only");
    refused(await C1.client.get(`/v1/orgs/${R.id}/billing`), 404, 'not_found');
    assert.deepEqual((await C1.client.get(`/v1/orgs/${C1.id}/billing/statement`)).json.totals, { EUR: '9.21' }, 'a customer sees its own statement');
  });

  it('refuses a bad or future period and a close before the month ended or without confirmation', async () => {
    for (const period of ['2030-1', '2030-13', 'january', '2030-01-01']) refused(await R.client.get(`/v1/orgs/${R.id}/billing?period=${period}`), 400, 'validation_failed', 'period');
    const future = await R.client.get(`/v1/orgs/${R.id}/billing?period=2030-02`);
    refused(future, 400, 'validation_failed', 'period');
    assert.match(future.json.error.message, /in the future/, 'the error says the period is in the future');
    const early = await P.client.post(`/v1/orgs/${R.id}/billing/close`, { period: '2030-01', confirm: true });
    refused(early, 409, 'conflict', 'period');
    assert.match(early.json.error.message, /has not ended yet/, 'the error says the month has not ended yet');
    refused(await P.client.post(`/v1/orgs/${R.id}/billing/close`, { period: '2030-13', confirm: true }), 400, 'validation_failed', 'period');
    await bp.meterUntil('2030-02-01T00:30:00Z'); // the rest of January: hours 18..23 under P2
    refused(await P.client.post(`/v1/orgs/${R.id}/billing/close`, { period: '2030-01' }), 400, 'validation_failed', 'confirm');
    refused(await R.client.post(`/v1/orgs/${R.id}/billing/close`, { period: '2030-01', confirm: true }), 403, 'forbidden');
    refused(await P.client.post(`/v1/orgs/${R.id}/billing/close`, { period: '2029-12', confirm: true }), 409, 'conflict', 'period');
    // none of this suite's (other suites close months of their own orgs)
    assert.equal(await env.db('panel_statements').where({ period: '2030-01' }).count('* as n').first().then((r) => Number(r!.n)), 0, 'no January statement was closed by the refusals');
  });

  it('closes a month once: a second close and later plan edits return the same statement; Temporal shows it by OrgId and Period', async () => {
    const closed = await P.client.post(`/v1/orgs/${R.id}/billing/close`, { period: '2030-01', confirm: true });
    assert.equal(closed.status, 200, JSON.stringify(closed.json));
    assert.deepEqual([closed.json.state, closed.json.metered_hours, closed.json.totals], ['closed', 13, { EUR: '37.80' }], 'the closed statement: 13 hours, total 37.80 EUR');
    assert.deepEqual(closed.json.plans.map((p: { plan: string; hours: number }) => [p.plan, p.hours]).sort(), [['P1', 5], ['P2', 8]], '5 hours under P1 and 8 under P2');
    assert.equal(amounts(closed.json)['P2 base per organisation'], '21.51', "P2's base for 8 hours");
    for (const c of [C1, C2]) assert.equal((await R.client.post(`/v1/orgs/${c.id}/billing/close`, { period: '2030-01', confirm: true })).status, 200, "R closes its customers' January");

    const twice = await P.client.post(`/v1/orgs/${R.id}/billing/close`, { period: '2030-01', confirm: true });
    assert.deepEqual(twice.json, closed.json, 'a second close returns the same statement');
    assert.equal((await P.client.patch(`/v1/billing-plans/${p2}`, { base_price: '9999' })).status, 200, 'P2 can still be edited after the close');
    assert.deepEqual((await R.client.get(`/v1/orgs/${R.id}/billing/statement?period=2030-01`)).json, closed.json, 'a plan edit does not change the closed statement');
    await assert.rejects(env.db('panel_statements').where({ org_id: R.id }).update({ totals: '{}' }), /a closed statement never changes/);

    const page = await R.client.get(`/v1/orgs/${R.id}/billing?period=2030-01`);
    assert.deepEqual([page.json.billed_to_customers, page.json.billed_to_it, page.json.margin], [{ EUR: '31.18' }, { EUR: '37.80' }, { EUR: '-6.62' }], "the closed month's billed to customers, billed to R and margin");

    const d = await bp.temporal.workflow.getHandle(monthCloseWorkflowId(R.id, '2030-01')).describe();
    assert.equal(d.status.name, 'COMPLETED', 'the month-close workflow completed');
    assert.equal(d.typedSearchAttributes.get(SA.OrgId), R.id, 'the month-close workflow carries the OrgId search attribute');
    assert.equal(d.typedSearchAttributes.get(SA.Period)?.toISOString(), '2030-01-01T00:00:00.000Z', 'the month-close workflow carries the Period search attribute');
    const meter = await bp.temporal.workflow.getHandle('meter-2030-01-31T12').describe();
    assert.equal(meter.status.name, 'COMPLETED', 'the meter workflow of an hour completed');
  });

  it('exports a statement as JSON and CSV that agree to the cent, and issued statements with an API token only', async () => {
    const json = (await R.client.get(`/v1/orgs/${R.id}/billing/statement?period=2030-01`)).json;
    const csv = await R.client.req('GET', `/v1/orgs/${R.id}/billing/statement?period=2030-01`, undefined, { accept: 'text/csv' });
    assert.equal(csv.status, 200, 'the statement is served as CSV');
    assert.match(csv.headers.get('content-type')!, /^text\/csv/, 'the CSV answer has a text/csv content type');
    const rows = (await (await fetch(`${bp.url}/v1/orgs/${R.id}/billing/statement?period=2030-01`, { headers: { accept: 'text/csv', cookie: R.client.cookie! } })).text()).trim().split('\r\n').map((l) => l.split(','));
    assert.deepEqual(rows[0], ['org_id', 'period', 'plan', 'kind', 'detail', 'quantity_hours', 'unit_price', 'currency', 'amount'], 'the CSV header row');
    const lines = rows.slice(1).filter((r) => r[3] !== 'total');
    assert.deepEqual(lines.map((r) => r[8]), json.lines.map((l: { amount: string }) => l.amount), "the CSV lines have the JSON lines' amounts, in order");
    const csvSum = lines.reduce((s, r) => s.plus(r[8]), new Decimal(0)).toFixed(2);
    assert.equal(csvSum, json.totals.EUR, 'the CSV lines sum to the JSON total to the cent');
    assert.deepEqual(rows.slice(1).filter((r) => r[3] === 'total').map((r) => [r[7], r[8]]), [['EUR', '37.80']], 'the CSV total row is the JSON total');

    refused(await P.client.get(`/v1/orgs/${P.id}/billing/issued?period=2030-01`), 403, 'forbidden');
    const token = (await P.client.post('/v1/account/tokens', { name: 'billing export' })).json.token;
    const api = new (P.client.constructor as typeof PanelClient)(bp.url, token);
    const issued = await api.get(`/v1/orgs/${P.id}/billing/issued?period=2030-01`);
    assert.equal(issued.status, 200, JSON.stringify(issued.json));
    assert.deepEqual(issued.json.statements.map((s: { org_id: string }) => s.org_id), [R.id], "P's issued statements are R's");
    assert.deepEqual(issued.json.statements[0], json, 'the issued statement is the one R sees');
    const issuedCsv = await (await fetch(`${bp.url}/v1/orgs/${P.id}/billing/issued?period=2030-01`, { headers: { accept: 'text/csv', authorization: `Bearer ${token}` } })).text();
    assert.deepEqual(issuedCsv.trim().split('\r\n'), ['org_id,org_name,org_status,period,state,metered_hours,currency,amount', `${R.id},${json.org_name},active,2030-01,closed,13,EUR,37.80`], "the issued CSV: a header and R's closed statement");
    // R's own export lists its two customers
    const rToken = (await R.client.post('/v1/account/tokens', { name: 'x' })).json.token;
    const rIssued = await new (R.client.constructor as typeof PanelClient)(bp.url, rToken).get(`/v1/orgs/${R.id}/billing/issued?period=2030-01`);
    assert.deepEqual(rIssued.json.statements.map((s: { org_id: string; totals: unknown }) => [s.org_id, s.totals]).sort(), [[C1.id, { EUR: '17.11' }], [C2.id, { EUR: '14.07' }]].sort(), "R's issued statements are its two customers' with their totals");
    refused(await api.get(`/v1/orgs/${P.id}/billing/issued?period=2031-01`), 400, 'validation_failed', 'period');
    refused(await api.get(`/v1/orgs/${P.id}/billing/issued?period=01-2030`), 400, 'validation_failed', 'period');
  });

  it('deletes a plan only once no org is billed by it (Not billed from the next hour)', async () => {
    refused(await P.client.del(`/v1/billing-plans/${p2}`), 409, 'conflict');
    const off = await P.client.put(`/v1/orgs/${R.id}/billing-plan`, { plan_id: null });
    assert.equal(off.json.next.plan_id, null, 'R is billed by no plan from the next hour');
    assert.equal((await P.client.del(`/v1/billing-plans/${p2}`)).status, 204, 'P2 billing nobody is deleted');
    assert.equal((await P.client.del(`/v1/billing-plans/${p1}`)).status, 204, 'P1 billing nobody is deleted');
    refused(await P.client.get(`/v1/billing-plans/${p2}`), 404, 'not_found');
    // the closed statement still names it
    assert.deepEqual((await R.client.get(`/v1/orgs/${R.id}/billing/statement?period=2030-01`)).json.totals, { EUR: '37.80' }, 'the closed statement keeps its total after its plan is deleted');
  });

  it('without -billing-meter the billing page says usage is not being metered and a close is refused', async () => {
    const plain = await startPanel();
    try {
      const p = await platformAdmin(plain.url);
      const prov = await createOrgWithLogin(p, { type: 'provider' });
      const page = await prov.client.get(`/v1/orgs/${prov.id}/billing`);
      assert.equal(page.status, 200, 'the billing page answers without the meter');
      assert.deepEqual(page.json.metering, { on: false, message: 'usage is not being metered (the panel runs without -billing-meter)' }, 'the page says usage is not being metered');
      refused(await p.post(`/v1/orgs/${prov.id}/billing/close`, { period: '2020-01', confirm: true }), 409, 'conflict');
    } finally {
      await plain.close();
    }
  });
});
