import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { BUILT_IN_RULES } from '../../../domain/panel/alerts';
import type { Heartbeat } from '../../../domain/panel/node-ops';
import { evaluateAlerts } from '../../../services/panel/alerts/evaluate';
import { addNode, recordHeartbeat } from '../../../services/panel/nodes/nodes';
import { createOrgWithLogin, PASSWORD, platformAdmin, startHostingPanel, startPanel, unique, type HostingPanel, type PanelClient } from '../../helpers/panel';
import { runPass, siteActive } from '../../helpers/reconcile';
import { measurePageWeight, newConsolePage } from '../../helpers/console';
import { env } from '../../setup/env';

// The console's cluster side (issue 21) in Debian's chromium against a real panel with its hosting
// node (nginx), -metrics-interval on, -reconcile on and webhooks allowed to 127.0.0.1: alerts
// produced by real heartbeats and the evaluation, acknowledged and resolved in the page; the alert
// rules editor; a reconciliation policy change with its review; webhook endpoints. Screenshots
// under test-artifacts/console (gitignored).

const ARTIFACTS = path.join(__dirname, '..', '..', '..', 'test-artifacts', 'console');

const heartbeat = (cpu: number, usage: Heartbeat['usage'] = []): Heartbeat => ({
  facts: { webServer: 'builtin', phpVersions: [], mariadb: false, roles: ['web'], webAddress: '127.0.0.1:1' },
  metrics: { bootId: 'boot-1', uptimeSeconds: 3600, cpuPercent: cpu, load: [0.5, 0.4, 0.3], memory: { totalMb: 4096, availableMb: 3000 }, rootFs: { totalMb: 100_000, freeMb: 60_000 }, network: { rxBytes: 1000, txBytes: 2000 }, sampledAt: new Date().toISOString() },
  usage,
  agentStartedAt: '2026-01-01T00:00:00.000Z',
  reconnects: 0,
});

/** A webhook receiver on 127.0.0.1 that answers 200 and keeps what it got. */
async function receiver() {
  const got: Array<{ path: string; body: string }> = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c));
    req.on('end', () => {
      got.push({ path: req.url!, body });
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return { got, url: (p: string) => `http://127.0.0.1:${port}${p}`, close: () => new Promise<void>((r) => server.close(() => r())) };
}

describe('panel: web console, cluster side, in chromium', function () {
  this.timeout(120_000);
  let panel: HostingPanel;
  let browser: Browser;
  let admin: PanelClient;
  let rx: Awaited<ReturnType<typeof receiver>>;
  const contexts: BrowserContext[] = [];
  const pageErrors: string[] = [];
  /** rows this file put on the hosting node: other suites' passes would call them missing */
  const siteIds: string[] = [];

  const rule = async (key: string, change: Record<string, unknown>) => {
    const r = await admin.patch(`/v1/alert-rules/${key}`, change);
    assert.equal(r.status, 200, JSON.stringify(r.json));
    return r.json;
  };

  before(async function () {
    this.timeout(120_000);
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    [panel, browser, rx] = await Promise.all([
      startHostingPanel({ flags: ['-metrics-interval', '60s', '-controller-state', '-reconcile', 'on'], reportEveryMs: 3_600_000, webhooks: { allowTargets: ['127.0.0.1'], dispatchEveryMs: 300 } }),
      chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] }),
      receiver(),
    ]);
    admin = await platformAdmin(panel.url);
    // only the rules a case turns on fire (every node of the shared database is evaluated)
    for (const r of BUILT_IN_RULES) await rule(r.key, { enabled: false });
  });
  after(async function () {
    this.timeout(60_000);
    if (admin) for (const r of BUILT_IN_RULES) await admin.post(`/v1/alert-rules/${r.key}/restore`);
    await browser?.close();
    await panel?.close();
    await rx?.close();
    if (siteIds.length) await env.db('panel_sites').whereIn('id', siteIds).delete();
  });
  afterEach(async () => {
    for (const c of contexts.splice(0)) await c.close();
    assert.deepEqual(pageErrors.splice(0), [], 'uncaught errors in the console');
  });

  const newPage = (base = panel.url) => newConsolePage(browser, base, contexts, pageErrors, 20_000);
  const shot = (page: Page, name: string) => page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });

  async function signedIn(username: string, base = panel.url): Promise<Page> {
    const page = await newPage(base);
    await page.goto('/sign-in');
    await page.getByLabel('Username').fill(username);
    await page.getByLabel('Password', { exact: true }).fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL('**/orgs/*');
    return page;
  }

  it('an alert from real heartbeats is acknowledged and resolved in the page with notes; a stale page shows the API refusal; the node page charts it', async () => {
    const node = unique('n');
    await addNode(env.db, null, node);
    // three hours of earlier samples so the charts have a line, then real reports and evaluations
    const now = Date.now();
    await env.db('panel_node_samples').insert(Array.from({ length: 36 }, (_, i) => ({ node_name: node, at: new Date(now - (180 - i * 5) * 60_000), cpu_percent: 20 + (i % 6) * 5, load1: 0.5 + (i % 4) / 4, memory_used_percent: 30 + (i % 3), rootfs_used_percent: 40 })));
    await rule('node_cpu', { enabled: true, threshold: 80, for_seconds: 0, reopen_seconds: 3600 });
    await recordHeartbeat(env.db, node, heartbeat(95));
    await evaluateAlerts(env.db);
    const [fired] = (await admin.get(`/v1/alerts?node=${node}`)).json.alerts;
    assert.equal(fired?.state, 'open', JSON.stringify(fired));

    const page = await signedIn('admin');
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Cluster' }).click();
    await page.getByRole('navigation', { name: 'Cluster' }).getByRole('link', { name: 'Alerts', exact: true }).click();
    await page.getByLabel('Node').fill(node);
    const list = page.getByRole('table', { name: 'Alerts, newest first' });
    await list.getByRole('link', { name: `node ${node}: CPU busy above 80 %` }).waitFor();
    await shot(page, 'alerts-list');
    await list.getByRole('link', { name: `node ${node}: CPU busy above 80 %` }).click();
    await page.waitForURL(`**/alerts/${fired.id}`);
    await page.getByTestId('alert-state').filter({ hasText: 'open' }).waitFor();
    // the rule's metric around the alert, its threshold drawn
    const chart = page.getByRole('img', { name: /^CPU: latest 95 %/ });
    await chart.waitFor();
    assert.ok(Number(await chart.getAttribute('data-points')) >= 2, 'the chart around the alert has at least two points');
    assert.equal(await chart.locator('line.threshold').count(), 1, "the chart draws the rule's threshold as one line");

    await page.getByLabel('Note (optional)').fill('looking at it');
    await page.getByRole('button', { name: 'Acknowledge' }).click();
    await page.getByTestId('alert-state').filter({ hasText: 'acknowledged' }).waitFor();
    let api = (await admin.get(`/v1/alerts/${fired.id}`)).json;
    assert.equal(api.state, 'acknowledged', 'Acknowledge in the page acknowledges the alert in the API');
    assert.equal(api.note, 'looking at it', 'the acknowledgement keeps the note typed in the page');
    assert.equal(api.events[1].actor, 'admin', 'the acknowledgement is recorded as made by admin');
    await shot(page, 'alert-acknowledged');

    // a second page still showing "acknowledged" while the first resolves it
    const stale = await newPage();
    await stale.context().addCookies(await page.context().cookies());
    await stale.goto(`/alerts/${fired.id}`);
    await stale.getByTestId('alert-state').filter({ hasText: 'acknowledged' }).waitFor();

    await page.getByLabel('Note (optional)').fill('runaway cron job stopped');
    await page.getByRole('button', { name: 'Resolve' }).click();
    await page.getByTestId('alert-state').filter({ hasText: 'resolved' }).waitFor();
    await page.getByRole('table', { name: 'What happened to this alert' }).getByRole('cell', { name: 'runaway cron job stopped' }).waitFor();
    api = (await admin.get(`/v1/alerts/${fired.id}`)).json;
    assert.equal(api.state, 'resolved', 'Resolve in the page resolves the alert in the API');
    assert.deepEqual(api.events.map((e: { kind: string }) => e.kind), ['fired', 'acknowledged', 'resolved'], "the alert's history is fired, acknowledged, resolved");
    assert.equal(api.events[2].note, 'runaway cron job stopped', 'the resolution keeps its note');
    await shot(page, 'alert-resolved');

    await stale.getByRole('button', { name: 'Resolve' }).click();
    await stale.getByRole('alert').filter({ hasText: 'the alert is resolved: it cannot be resolved' }).waitFor();
    await shot(stale, 'alert-refused');

    // the node's page: its charts and its unresolved alerts (a new one fires: the condition holds)
    await rule('node_cpu', { reopen_seconds: 0 });
    await recordHeartbeat(env.db, node, heartbeat(10));
    await evaluateAlerts(env.db);
    await recordHeartbeat(env.db, node, heartbeat(97));
    await evaluateAlerts(env.db);
    await page.goto(`/cluster/nodes/${node}`);
    for (const name of [/^CPU: latest/, /^Load \(1 min\): latest/, /^Memory in use: latest/, /^Root filesystem in use: latest/]) await page.getByRole('img', { name }).waitFor();
    await page.getByRole('table', { name: `Unresolved alerts of ${node}` }).getByRole('link', { name: `node ${node}: CPU busy above 80 %` }).waitFor();
    await shot(page, 'node-charts');
    await rule('node_cpu', { enabled: false });
    await evaluateAlerts(env.db);
  });

  it('alert rules editor: a change is saved (a refused value shows the API message, nothing changes) and Restore defaults brings back the built-in values', async () => {
    const page = await signedIn('admin');
    await page.goto('/cluster/alert-rules');
    const form = page.getByRole('form', { name: 'Rule node_load' });
    await form.getByLabel('Threshold').fill('6');
    await form.getByLabel('For (seconds)').fill('700000');
    await form.getByRole('button', { name: 'Save rule' }).click();
    await form.getByRole('alert').filter({ hasText: 'for_seconds: whole seconds from 0 to 604800' }).waitFor();
    assert.equal((await admin.get('/v1/alert-rules')).json.rules.find((r: { key: string }) => r.key === 'node_load').threshold, 8, 'a refused change changes nothing');

    await form.getByLabel('For (seconds)').fill('120');
    await form.getByLabel('Severity').selectOption('critical');
    await form.getByLabel('Enabled').check();
    await form.getByRole('button', { name: 'Save rule' }).click();
    await page.getByText('Rule node_load saved.').waitFor();
    let r = (await admin.get('/v1/alert-rules')).json.rules.find((x: { key: string }) => x.key === 'node_load');
    assert.deepEqual([r.threshold, r.for_seconds, r.severity, r.enabled, r.changed], [6, 120, 'critical', true, true], 'the saved rule has the new threshold, duration, severity and is enabled and changed');
    await page.getByRole('heading', { name: /1-minute load above 6/ }).waitFor();
    await shot(page, 'alert-rules');

    const card = page.locator('[data-rule="node_load"]');
    page.once('dialog', (d) => void d.accept()); // "Restore the built-in values of node_load?"
    await card.getByRole('button', { name: 'Restore defaults' }).click();
    await card.getByRole('heading', { name: /1-minute load above 8/ }).waitFor();
    assert.equal(await form.getByLabel('Threshold').inputValue(), '8', 'Restore defaults puts the built-in threshold back in the form');
    r = (await admin.get('/v1/alert-rules')).json.rules.find((x: { key: string }) => x.key === 'node_load');
    assert.deepEqual([r.threshold, r.for_seconds, r.severity, r.enabled, r.changed], [8, 300, 'warning', true, false], 'Restore defaults brings back the built-in values and clears changed');
    await rule('node_load', { enabled: false });
  });

  it('reconciliation: a manual vhost edit shows as drift after Run now; the change to remediate shows the review with the diff, then Confirm applies it', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const domain = `${unique('rc')}.console.test`;
    const created = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain, php_version: null });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    const siteId: string = created.json.id;
    siteIds.push(siteId);
    await siteActive(customer.client, siteId);
    const vhost = path.join(panel.root, 'etc/nginx/sites', `${domain}.conf`);
    const rendered = fs.readFileSync(vhost, 'utf8');
    fs.appendFileSync(vhost, '# hand-made change\n');

    const page = await signedIn('admin');
    await page.goto('/cluster/reconcile');
    await page.getByTestId('reconcile-mode').filter({ hasText: 'on' }).waitFor();
    const before = (await admin.get('/v1/reconcile')).json.last_pass?.id ?? null;
    await page.getByRole('button', { name: 'Run a pass now' }).click();
    await page.getByLabel('Status').selectOption('drift');
    // the list loads again when the pass is done
    await page.getByRole('table', { name: 'Sites of the hosting node' }).getByRole('link', { name: domain }).click({ timeout: 60_000 });
    // the site's finding is written before the pass's report: wait for the report too
    let last: { id: string } | null = null;
    for (let i = 0; i < 100 && (last?.id ?? before) === before; i++) {
      if (i) await new Promise((r) => setTimeout(r, 200));
      last = (await admin.get('/v1/reconcile')).json.last_pass;
    }
    assert.notEqual(last?.id ?? before, before, 'a new pass ran and stored its report');
    await page.waitForURL(`**/cluster/reconcile/sites/${siteId}`);
    await page.getByTestId('reconcile-status').filter({ hasText: 'drift' }).waitFor();
    assert.match((await page.locator('pre.diff').first().textContent())!, /^\+# hand-made change$/m, "the site's diff shows the hand-made line as added");
    assert.equal(fs.readFileSync(vhost, 'utf8'), rendered + '# hand-made change\n', 'observed: left alone');

    await page.getByRole('button', { name: 'Review a change to remediate' }).click();
    const review = page.getByRole('region', { name: 'Review of the policy change' });
    await review.getByTestId('policy-effect').filter({ hasText: 'manual node edits are overwritten' }).waitFor();
    // focus follows the render (an effect), so wait for it rather than read it once
    await page.waitForFunction('document.activeElement?.getAttribute("aria-label") === "Review of the policy change"', undefined, { timeout: 5000 });
    assert.match((await review.locator('pre.diff').textContent())!, /\+# hand-made change/, 'the review shows the diff that remediation would overwrite');
    assert.equal((await admin.get(`/v1/reconcile/sites/${siteId}`)).json.policy, 'observe', 'nothing changes before Confirm');
    await shot(page, 'reconcile-review');
    await review.getByRole('button', { name: 'Confirm: remediate' }).click();
    await page.getByTestId('reconcile-policy').filter({ hasText: 'remediate' }).waitFor();
    const view = (await admin.get(`/v1/reconcile/sites/${siteId}`)).json;
    assert.equal(view.policy, 'remediate', "Confirm sets the site's policy to remediate");
    assert.deepEqual(view.events[0].detail, { from: 'observe', to: 'remediate', by: 'admin' }, 'the policy change is recorded from observe to remediate by admin');
    await page.getByRole('table', { name: 'Latest first' }).getByRole('cell', { name: 'policy', exact: true }).waitFor();
    await shot(page, 'reconcile-site');

    // opted in: the next pass rewrites the vhost to the panel's
    await runPass(admin);
    assert.equal(fs.readFileSync(vhost, 'utf8'), rendered, "the remediating pass rewrites the vhost to the panel's");
    await page.reload();
    await page.getByTestId('reconcile-status').filter({ hasText: 'in sync' }).waitFor();
    // the report of the pass that found the drift lists the site with its findings
    await page.goto(`/cluster/reconcile/passes/${last!.id}`);
    const row = page.getByRole('table', { name: 'Per-site findings of this pass' }).getByRole('row').filter({ has: page.getByRole('link', { name: domain }) });
    await row.getByText('vhost file differs from the panel').waitFor();
    assert.match((await row.textContent())!, /drift/, 'the pass report lists the site as drift');
    await shot(page, 'reconcile-pass');

    // issue 32 item 14: the page says what passes really do — under -reconcile on they rewrite the opted-in site
    await page.goto(`/cluster/reconcile/sites/${siteId}`);
    await page.getByTestId('policy-now').filter({ hasText: 'passes rewrite its drifted managed files' }).waitFor();
    // a panel on the same database run with -reconcile dry-run says nothing is rewritten
    const dry = await startPanel({ flags: ['-controller-state', '-reconcile', 'dry-run'] });
    try {
      const dryPage = await signedIn('admin', dry.url);
      await dryPage.goto(`/cluster/reconcile/sites/${siteId}`);
      await dryPage.getByTestId('policy-now').filter({ hasText: 'the panel runs -reconcile dry-run: passes only report them, nothing is rewritten' }).waitFor();
      assert.equal(await dryPage.getByText('passes rewrite its drifted managed files').count(), 0, 'no promise of a rewrite under dry-run');
      await shot(dryPage, 'reconcile-site-dry-run');
    } finally {
      await dry.close();
    }
    // issue 32 item 14: this panel runs without -placement scheduled, so Add website does not offer the scheduler
    await page.goto(`/orgs/${customer.id}/sites`);
    const form = page.getByRole('form', { name: 'Add website' });
    await form.getByLabel('Node').waitFor();
    const offered = await form.getByLabel('Node').locator('option').allTextContents();
    assert.ok(!offered.includes('Chosen by the scheduler'), `the scheduler is not offered: ${offered.join(', ')}`);
    assert.equal(await form.getByLabel('Node').locator('option:checked').textContent(), "The panel's hosting node", 'the hosting node is preselected');
    await form.getByText("Placement is not scheduled: without a named node, new websites go to the panel's hosting node.").waitFor();
    await shot(page, 'add-website-not-scheduled');
  });

  it("webhooks: an endpoint added on the org tab shows its secret once and is edited; deliveries of a quota alert with attempts, Redeliver, Disable, Delete; the account's chain acknowledges that alert from the org's Alerts tab", async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const customer = await createOrgWithLogin(provider.client, { type: 'customer', limits: { disk_mb: 100 } });
    const page = await signedIn(provider.username);
    await page.goto(`/orgs/${provider.id}/webhooks`);
    const form = page.getByRole('form', { name: 'Add webhook endpoint' });
    await form.getByLabel('Endpoint URL').fill('http://10.1.2.3/hook');
    await form.getByRole('button', { name: 'Add endpoint' }).click();
    await form.getByRole('alert').filter({ hasText: 'url:' }).waitFor(); // a private address the operator did not allow
    await form.getByLabel('Endpoint URL').fill(rx.url('/provider'));
    await form.getByLabel('Description').fill('on-call bridge');
    await form.getByLabel('alert.resolved').uncheck();
    await form.getByRole('button', { name: 'Add endpoint' }).click();
    const secret = (await page.getByTestId('webhook-secret').textContent())!;
    assert.match(secret, /^whsec_/, 'the secret is shown once with its whsec_ prefix');
    const listed = (await provider.client.get(`/v1/orgs/${provider.id}/webhooks`)).json.endpoints;
    assert.equal(listed.length, 1, 'the provider has exactly the one endpoint added');
    assert.deepEqual(listed[0].events, ['alert.fired'], 'only alert.fired is subscribed once alert.resolved is unchecked');
    assert.equal(listed[0].secret, undefined, 'the API never lists the secret');
    await shot(page, 'webhook-created');
    await page.reload();
    await page.getByRole('table', { name: /Webhook endpoints of/ }).getByText(rx.url('/provider')).waitFor();
    assert.equal(await page.getByTestId('webhook-secret').count(), 0, 'the secret is shown once');
    assert.ok(!(await page.content()).includes(secret), 'the webhook secret is not on the page after a reload');
    const row0 = page.getByRole('row').filter({ hasText: rx.url('/provider') });
    await row0.getByText('Edit', { exact: true }).click();
    const edit = row0.getByRole('form', { name: `Edit endpoint ${rx.url('/provider')}` });
    await edit.getByLabel('Description').fill('pager bridge');
    await edit.getByRole('button', { name: 'Save endpoint' }).click();
    await row0.getByText('pager bridge', { exact: true }).waitFor();
    assert.equal((await provider.client.get(`/v1/orgs/${provider.id}/webhooks`)).json.endpoints[0].description, 'pager bridge', 'the edited description is saved');

    // a soft-quota alert of the account below: 90 MB of its 100
    const siteId = randomUUID();
    siteIds.push(siteId);
    await env.db('panel_sites').insert({ id: siteId, org_id: customer.id, domain: `${unique('q')}.console.test`, node_name: 'hosting', quota_mb: 1000, status: 'active', placement: JSON.stringify({}) });
    await recordHeartbeat(env.db, 'hosting', heartbeat(10, [{ siteId, diskMb: 90, inodes: 1 }]));
    await rule('disk_quota_80', { enabled: true });
    await evaluateAlerts(env.db);
    // the rule stays on until the alert is acknowledged: a scheduled evaluation would resolve it
    const deadline = Date.now() + 30_000;
    const delivery = async () => (await provider.client.get(`/v1/webhooks/${listed[0].id}/deliveries`)).json.deliveries[0];
    while ((await delivery())?.status !== 'delivered' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    assert.equal(JSON.parse(rx.got.find((g) => g.path === '/provider')!.body).type, 'alert.fired', 'the receiver got an alert.fired delivery');

    const endpointRow = page.getByRole('row').filter({ hasText: rx.url('/provider') });
    await endpointRow.getByRole('button', { name: 'Deliveries' }).click();
    const deliveries = page.getByRole('region', { name: `Deliveries to ${rx.url('/provider')}` });
    await deliveries.getByRole('button', { name: 'Refresh' }).click();
    const delivered = deliveries.getByRole('row').filter({ hasText: 'alert.fired' }).filter({ hasText: 'delivered' }).first();
    await delivered.waitFor();
    await delivered.getByRole('button', { name: 'Attempts' }).click();
    await deliveries.getByRole('table', { name: /Attempts of delivery/ }).getByRole('cell', { name: '200', exact: true }).waitFor();
    const count = await deliveries.getByRole('row').filter({ hasText: 'alert.fired' }).count();
    await delivered.getByRole('button', { name: 'Redeliver' }).click();
    await deliveries.getByRole('row').filter({ hasText: 'redelivery' }).first().waitFor();
    assert.equal(await deliveries.getByRole('row').filter({ hasText: 'alert.fired' }).count(), count + 1, 'Redeliver adds one more alert.fired delivery');
    await shot(page, 'webhook-deliveries');

    await endpointRow.getByRole('button', { name: 'Disable' }).click();
    await endpointRow.getByRole('button', { name: 'Enable' }).waitFor();
    assert.equal((await provider.client.get(`/v1/orgs/${provider.id}/webhooks`)).json.endpoints[0].enabled, false, 'Disable turns the endpoint off');

    // the account's chain sees the quota alert on the account's Alerts tab
    await page.goto(`/orgs/${customer.id}/alerts`);
    const quotaLink = page.getByRole('table', { name: /Alerts of / }).getByRole('link', { name: /disk use at or above 80 %/ }).first();
    await quotaLink.waitFor();
    await shot(page, 'org-alerts');
    await quotaLink.click();
    await page.getByLabel('Note (optional)').fill('old backups removed tonight');
    await page.getByRole('button', { name: 'Acknowledge' }).click();
    await page.getByTestId('alert-state').filter({ hasText: 'acknowledged' }).waitFor();
    const quota = (await provider.client.get(`/v1/alerts/${page.url().split('/').pop()}`)).json;
    assert.deepEqual([quota.state, quota.note, quota.org_id, quota.scope], ['acknowledged', 'old backups removed tonight', customer.id, 'account'], "the quota alert is acknowledged with its note, for the account, from the org's Alerts tab");
    await rule('disk_quota_80', { enabled: false });

    await page.goto(`/orgs/${provider.id}/webhooks`);
    page.once('dialog', (d) => void d.accept()); // "Delete the endpoint …?"
    await page.getByRole('row').filter({ hasText: rx.url('/provider') }).getByRole('button', { name: 'Delete' }).click();
    await page.getByText('No endpoints.').waitFor();
    assert.equal((await provider.client.get(`/v1/orgs/${provider.id}/webhooks`)).json.endpoints.length, 0, 'Delete removes the endpoint');
    await evaluateAlerts(env.db); // the disabled rule resolves the account's alerts
  });

  it('keyboard alone: the alert rules form is reached with Tab, labelled, and sent with Enter', async () => {
    const page = await signedIn('admin');
    await page.goto('/cluster/alert-rules');
    const threshold = page.getByRole('form', { name: 'Rule node_rootfs' }).getByLabel('Threshold (%)');
    await threshold.waitFor();
    await threshold.focus();
    await page.keyboard.press('Control+A');
    await page.keyboard.type('95');
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate('document.activeElement.labels[0].textContent'), 'For (seconds)', 'Tab moves from the threshold to the labelled For (seconds) field');
    await page.keyboard.press('Enter');
    await page.getByText('Rule node_rootfs saved.').waitFor();
    assert.equal((await admin.get('/v1/alert-rules')).json.rules.find((x: { key: string }) => x.key === 'node_rootfs').threshold, 95, 'Enter in the form saves the new threshold');
  });

  it('measures page weight and time to interactive of the heaviest cluster page (a node page with four charts and its alerts)', async () => {
    const page = await newPage();
    const [name, value] = admin.cookie!.split('=');
    await page.context().addCookies([{ name, value, url: panel.url, httpOnly: true, sameSite: 'Strict' }]);
    await measurePageWeight(page, 'node', '/cluster/nodes/{name}', async () => {
      await page.goto('/cluster/nodes/hosting');
      await page.getByRole('img', { name: /^Root filesystem in use:/ }).waitFor();
      await page.getByRole('table', { name: 'Websites on hosting' }).or(page.getByText('No websites on this node.')).waitFor();
    });
    await shot(page, 'node-page-hosting');
  });

  it('without -metrics-interval the node page and the alert pages say metrics sampling is off', async () => {
    const off = await startPanel({ flags: ['-controller-state'] });
    try {
      const page = await signedIn('admin', off.url);
      await page.goto('/cluster/nodes/hosting');
      await page.getByRole('status').filter({ hasText: 'metrics sampling is off' }).first().waitFor();
      assert.equal(await page.getByRole('img', { name: /^CPU:/ }).count(), 0, 'no charts are drawn when sampling is off');
      await shot(page, 'node-sampling-off');
      await page.goto('/cluster/alert-rules');
      await page.getByRole('status').filter({ hasText: 'metrics sampling is off' }).waitFor();
      await page.goto('/cluster/alerts');
      await page.getByRole('status').filter({ hasText: 'metrics sampling is off' }).waitFor();
    } finally {
      await off.close();
    }
  });
});
