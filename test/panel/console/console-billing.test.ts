import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import Decimal from 'decimal.js';
import type { BrowserContext, Page } from 'playwright-core';
import { measurePageWeight } from '../../helpers/console';
import { useBrowser as useChromium } from '../../helpers/dashboard';
import { addLabelledNode, addSite, startBillingPanel, type BillingPanel } from '../../helpers/billing';
import { createOrgWithLogin, getFromNode, platformAdmin, startHostingPanel, unique, type HostingPanel, type PanelClient } from '../../helpers/panel';
import { env } from '../../setup/env';
import { until } from '../../helpers/until';

// The console's billing page (/orgs/{id}/billing) and backups (a site's Backups tab, the platform's
// Backups page) in Debian's chromium, driven by playwright-core, against real panels: one with
// -billing-meter whose clock the test moves (hours metered by the real schedule and workflows), one
// running its hosting node (nginx) with a backup folder. One browser for the file, a fresh context
// per test (the API client's session cookie), a screenshot per test under test-artifacts/console.

const ARTIFACTS = path.join(__dirname, '..', '..', '..', 'test-artifacts', 'console');

/** Where this file's billing clock starts: a month of its own, later than any other suite's. */
const START = '2035-01-31T20:30:00Z';
/** The hour before START's: marked metered, so the first tick does not catch up from another suite's last hour. */
const BEFORE_START = '2035-01-31T19:00:00Z';
const METER_TABLES = ['panel_meter_orgs', 'panel_meter_sites', 'panel_meter_databases', 'panel_meter_hours'];

function refused403(r: { status: number; json: { error: { code: string } } }) {
  assert.equal(r.status, 403, JSON.stringify(r.json));
  assert.equal(r.json.error.code, 'forbidden', `the refusal is coded forbidden: ${JSON.stringify(r.json)}`);
}

/** One chromium for the file; `open(base, client)` gives a page signed in with that client's session. */
function useBrowser() {
  const chromium = useChromium();
  const contexts: BrowserContext[] = [];
  /** uncaught errors in any page: none is expected */
  const errors: string[] = [];
  before(() => fs.mkdirSync(ARTIFACTS, { recursive: true }));
  afterEach(async () => {
    await Promise.all(contexts.splice(0).map((c) => c.close()));
    assert.deepEqual(errors.splice(0), [], 'uncaught errors in the console');
  });
  return {
    async open(base: string, client: PanelClient): Promise<Page> {
      const context = await chromium.browser().newContext({ baseURL: base });
      contexts.push(context);
      const [name, value] = client.cookie!.split('=');
      await context.addCookies([{ name, value, url: base, httpOnly: true, sameSite: 'Strict' }]);
      const page = await context.newPage();
      page.setDefaultTimeout(20_000);
      page.on('pageerror', (e) => errors.push(e.message));
      return page;
    },
    shot: (page: Page, name: string) => page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true }),
  };
}

describe('panel: web console billing page in chromium', function () {
  this.timeout(180_000);
  const browser = useBrowser();
  let bp: BillingPanel;
  let admin: PanelClient;
  let P: Awaited<ReturnType<typeof createOrgWithLogin>>;
  let C: Awaited<ReturnType<typeof createOrgWithLogin>>;

  before(async function () {
    this.timeout(120_000);
    // metered hours are global: the last one recorded is where the next tick resumes
    await env.db('panel_meter_hours').insert({ hour: new Date(BEFORE_START), orgs: 0, sites: 0, databases: 0 }).onConflict('hour').ignore();
    bp = await startBillingPanel(START);
    admin = await platformAdmin(bp.url);
    P = await createOrgWithLogin(admin, { type: 'provider' });
    C = await createOrgWithLogin(P.client, { type: 'customer' });
    const node = unique('cb-');
    await addLabelledNode(node, { logical_region: 'eu' });
    await addSite(C.id, node, 2048);
  });
  after(async () => {
    await bp?.close();
    for (const t of METER_TABLES) await env.db(t).where('hour', '>=', BEFORE_START).delete();
  });

  it('a plan with a malformed rate line shows the API’s line-numbered error at the field; fixed, it is created', async () => {
    const page = await browser.open(bp.url, P.client);
    await page.goto(`/orgs/${P.id}/billing`);
    const form = page.getByRole('form', { name: 'New plan' });
    await form.getByLabel('Plan name').fill('Monthly');
    await form.getByLabel('Base price per month').fill('744');
    await form.getByLabel('Price per customer account per month').fill('74.40');
    const rates = form.getByLabel('Rate lines');
    await rates.fill('# selector website database GiB\ndefault 7.44 0 0.744\nregion=eu 1 1');
    await form.getByRole('button', { name: 'Create plan' }).click();
    const error = form.getByRole('alert');
    await error.waitFor();
    assert.match((await error.textContent())!, /^The request is not valid: rates: line 3: 3 fields instead of 4 or 6 \(expected "<selector> <price_per_website>/, "the API's line-numbered error, shown at the field");
    // tied to the field: a screen reader reads it with the text area
    assert.match((await rates.getAttribute('aria-describedby'))!, new RegExp(`^${await error.getAttribute('id')} `), 'the error is tied to the rate lines by aria-describedby');
    assert.equal(await rates.getAttribute('aria-invalid'), 'true', 'the rate lines are marked invalid');
    await browser.shot(page, 'billing-rate-line-error');
    assert.deepEqual((await P.client.get(`/v1/orgs/${P.id}/billing-plans`)).json.plans, [], 'nothing was created');

    await rates.fill('# selector website database GiB\nregion=eu 14.88 0 1.488\ndefault 7.44 0 0.744');
    await form.getByRole('button', { name: 'Create plan' }).click();
    await page.getByRole('table', { name: 'Billing plans' }).getByRole('cell', { name: 'Monthly', exact: true }).waitFor();
    // an edit the API refuses shows its message at the field it names; nothing changes
    await page.getByRole('button', { name: 'Edit Monthly' }).click();
    const edit = page.getByRole('form', { name: 'Edit plan Monthly' });
    await edit.getByLabel('Currency').fill('EURO');
    await edit.getByRole('button', { name: 'Save plan' }).click();
    await edit.getByRole('alert').filter({ hasText: 'currency' }).waitFor();
    const currency = edit.getByLabel('Currency');
    assert.equal(await currency.getAttribute('aria-invalid'), 'true', 'the currency field is marked invalid');
    assert.match((await edit.locator(`#${await currency.getAttribute('aria-errormessage')}`).textContent())!, /currency/, 'tied to the field');
    await page.getByRole('button', { name: 'Edit Monthly' }).click();
    assert.equal(await edit.count(), 0, 'a second Edit click closes the edit form');
    const plans = (await P.client.get(`/v1/orgs/${P.id}/billing-plans`)).json.plans;
    assert.deepEqual(plans.map((p: { name: string; currency: string; account_price: string; rate_lines: unknown[] }) => [p.name, p.currency, p.account_price, p.rate_lines.length]), [['Monthly', 'EUR', '74.4', 2]], 'the refused edit changed nothing: one plan, in EUR, with its two rate lines');
  });

  it('assigns the plan, meters hours with the fake clock, closes the month with the confirmation tick and downloads the CSV the API gives, to the cent', async () => {
    const page = await browser.open(bp.url, P.client);
    await page.goto(`/orgs/${C.id}/billing`);
    const assign = page.getByRole('form', { name: 'Billing plan' });
    await assign.getByLabel('Plan billing this organisation').selectOption({ label: 'Monthly (EUR)' });
    await assign.getByRole('button', { name: 'Assign plan' }).click();
    await page.getByText('Monthly from 2035-01-31 21:00 UTC').waitFor();
    // the running month: Close month is not offered before it ends
    await page.getByText('Close month is offered once 2035-01 has ended: from 2035-02-01 00:00 UTC').waitFor();
    assert.equal(await page.getByRole('form', { name: 'Close month' }).count(), 0, 'Close month is not offered in the running month');

    await bp.meterUntil('2035-02-01T00:30:00Z'); // hours 21, 22 and 23 of January under the plan
    await page.reload();
    await page.getByLabel('Month', { exact: true }).selectOption('2035-01');
    await page.waitForURL(`**/orgs/${C.id}/billing?period=2035-01`);
    await page.getByTestId('statement-state').filter({ hasText: 'estimate' }).waitFor();
    // lines per charge kind: 3 of 744 hours of 744/month base = 3.00; one account 0.30; a site on region=eu 0.06; 2 GiB × 3 h × 1.488/744 = 0.01
    const cells = async (kind: string) => (await page.getByRole('table', { name: kind }).locator('tbody tr').allTextContents()).map((t) => t.replace(/\s+/g, ' '));
    assert.deepEqual(await cells('Base'), ['Monthlyper organisation3744 EUR3.00 EUR'], 'the base line: 3 of 744 hours of 744 EUR = 3.00 EUR');
    assert.deepEqual(await cells('Websites'), ['Monthlyregion=eu314.88 EUR0.06 EUR'], 'the website line on region=eu: 0.06 EUR');
    assert.equal(await page.getByTestId('statement-total').textContent(), '3.37 EUR', 'the statement total is 3.37 EUR');

    // without the tick: the API's refusal, as it is, and nothing closed
    const close = page.getByRole('form', { name: 'Close month' });
    await close.getByRole('button', { name: 'Close 2035-01' }).click();
    await close.getByRole('alert').filter({ hasText: 'closing a month is final: tick the final confirmation' }).waitFor();
    assert.equal((await P.client.get(`/v1/orgs/${C.id}/billing/statement?period=2035-01`)).json.state, 'estimate', 'without the tick the month stays an estimate');
    // by keyboard: Space ticks the box, Tab reaches the button, Enter closes
    await close.getByLabel('I confirm: close 2035-01 for good').focus();
    await page.keyboard.press('Space');
    assert.equal(await close.getByLabel('I confirm: close 2035-01 for good').isChecked(), true, 'Space ticks the confirmation box');
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate('document.activeElement.textContent'), 'Close 2035-01', 'Tab reaches the Close button');
    await page.keyboard.press('Enter');
    await page.getByTestId('statement-state').filter({ hasText: 'closed' }).waitFor({ timeout: 60_000 });
    assert.equal(await page.getByRole('form', { name: 'Close month' }).count(), 0, 'a closed month is not offered again');
    const closed = (await P.client.get(`/v1/orgs/${C.id}/billing/statement?period=2035-01`)).json;
    assert.deepEqual([closed.state, closed.metered_hours, closed.totals], ['closed', 3, { EUR: '3.37' }], 'the month is closed with 3 metered hours and 3.37 EUR');

    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download CSV' }).click()]);
    assert.equal(download.suggestedFilename(), `statement-${C.id}-2035-01.csv`, 'the CSV is named after the org and the month');
    const csv = fs.readFileSync((await download.path())!, 'utf8');
    const fromApi = await (await fetch(`${bp.url}/v1/orgs/${C.id}/billing/statement?period=2035-01`, { headers: { accept: 'text/csv', cookie: P.client.cookie! } })).text();
    assert.equal(csv, fromApi, "the downloaded CSV is the API's CSV");
    const rows = csv.trim().split('\r\n').map((l) => l.split(','));
    const lines = rows.slice(1).filter((r) => r[3] !== 'total');
    assert.deepEqual(lines.map((r) => r[8]), closed.lines.map((l: { amount: string }) => l.amount), "the CSV line amounts are the statement's");
    assert.equal(lines.reduce((s, r) => s.plus(r[8]), new Decimal(0)).toFixed(2), '3.37', 'the CSV lines add up to 3.37 to the cent');
    assert.deepEqual(rows.slice(1).filter((r) => r[3] === 'total').map((r) => [r[7], r[8]]), [['EUR', '3.37']], 'the CSV total row is 3.37 EUR');
    const [json] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download JSON' }).click()]);
    assert.deepEqual(JSON.parse(fs.readFileSync((await json.path())!, 'utf8')), closed, 'the downloaded JSON is the closed statement');
    await browser.shot(page, 'billing-closed-month');

    // the provider's own page: the statement it issued, and its margin; the plan in use is not deleted
    await page.goto(`/orgs/${P.id}/billing?period=2035-01`);
    const billed = page.getByRole('table', { name: 'Statements for 2035-01' }).getByRole('row').filter({ hasText: C.body.name });
    assert.match((await billed.textContent())!, /closed3\s*3\.37 EUR/, "the provider sees the customer's closed statement of 3.37 EUR");
    assert.equal(await page.getByTestId('margin').textContent(), '3.37 EUR', "the provider's margin is 3.37 EUR");
    // its closed statements of every month, each opening the statement; the customer's list holds it too, others' do not
    const listed = page.getByRole('table', { name: 'Closed statements' }).getByRole('row').filter({ hasText: '2035-01' });
    assert.match((await listed.textContent())!, new RegExp(`2035-01${C.body.name}3\\s*3\\.37 EUR`), "the closed statements list the customer's statement of 3.37 EUR");
    assert.deepEqual((await C.client.get(`/v1/orgs/${C.id}/billing/statements`)).json.statements.map((x: { org_id: string; period: string; totals: unknown }) => [x.org_id, x.period, x.totals]), [[C.id, '2035-01', { EUR: '3.37' }]], "the customer's own list holds the closed statement");
    assert.equal((await C.client.get(`/v1/orgs/${P.id}/billing/statements`)).status, 404, "the customer cannot list the provider's statements");
    await listed.getByRole('link', { name: `View the statement of ${C.body.name} for 2035-01` }).click();
    await page.waitForURL(`**/orgs/${C.id}/billing?period=2035-01`);
    await page.getByTestId('statement-state').filter({ hasText: 'closed' }).waitFor();
    await page.goto(`/orgs/${P.id}/billing?period=2035-01`);
    page.once('dialog', (d) => void d.accept()); // "Delete the plan Monthly?"
    await page.getByRole('table', { name: 'Billing plans' }).getByRole('button', { name: 'Delete' }).click();
    await page.getByRole('table', { name: 'Billing plans' }).getByRole('alert').filter({ hasText: 'conflict' }).waitFor();
    await browser.shot(page, 'billing-provider');
  });

  it('measures page weight and time to interactive of the heaviest page (the billing page with a statement)', async () => {
    const page = await browser.open(bp.url, P.client);
    await measurePageWeight(page, 'billing', '/orgs/{id}/billing?period=…', async () => {
      await page.goto(`/orgs/${C.id}/billing?period=2035-01`);
      await page.getByRole('button', { name: 'Download CSV' }).waitFor();
    });
  });
});

describe('panel: web console backups in chromium', function () {
  this.timeout(180_000);
  const browser = useBrowser();
  let panel: HostingPanel;
  let admin: PanelClient;
  let provider: Awaited<ReturnType<typeof createOrgWithLogin>>;
  const schedules: string[] = [];

  before(async function () {
    this.timeout(120_000);
    panel = await startHostingPanel({ backups: true, backupInspectionMs: 10 * 60_000 });
    admin = await platformAdmin(panel.url);
    provider = await createOrgWithLogin(admin, { type: 'provider' });
  });
  after(async () => {
    for (const id of schedules) await admin.del(`/v1/sites/${id}/backup-schedule`);
    await panel?.close();
  });

  /** A customer's active site on the hosting node with an index.html of ours. */
  async function site() {
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const domain = `${unique('bk-')}.example.com`;
    const s = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain, php_version: null });
    assert.equal(s.status, 201, JSON.stringify(s.json));
    await until('site active', async () => (await customer.client.get(`/v1/sites/${s.json.id}`)).json.status === 'active', 30_000);
    const docroot = path.join(panel.root, 'sites', domain, 'public_html');
    fs.writeFileSync(path.join(docroot, 'index.html'), `<h1>${domain} as backed up</h1>`);
    return { customer, id: s.json.id as string, domain, docroot };
  }

  async function takeRestorePoint(page: Page, siteId: string) {
    await page.goto(`/sites/${siteId}/backups`);
    await page.getByText('No restore points yet.').waitFor();
    await page.getByRole('button', { name: 'Take a restore point now' }).click();
    const row = page.getByRole('table', { name: /^Restore points of/ }).locator('tbody tr').first();
    await row.filter({ hasText: 'ready' }).waitFor({ timeout: 60_000 });
    return row;
  }

  it('takes a restore point from the site page and restores it (with the confirmation) as a new website serving the backed-up file; sets and stops the keep-N schedule', async () => {
    const s = await site();
    const page = await browser.open(panel.url, admin);
    const row = await takeRestorePoint(page, s.id);
    assert.match((await row.textContent())!, /manual/, 'a restore point taken by hand is marked manual');
    fs.writeFileSync(path.join(s.docroot, 'index.html'), 'changed after the restore point');

    await row.getByRole('button', { name: 'Restore…' }).click();
    const form = page.getByRole('form', { name: 'Restore into an account' });
    assert.equal(await form.getByLabel('Into account (ID)').inputValue(), s.customer.id, "the restore form is prefilled with the site's own account");
    const copy = `${unique('copy-')}.example.com`;
    await form.getByLabel('Domain of the restored website').fill(copy);
    await form.getByRole('button', { name: 'Restore' }).click();
    await form.getByRole('alert').filter({ hasText: 'Tick the confirmation first' }).waitFor();
    await form.getByLabel('I confirm: create a website from this restore point').check();
    await form.getByRole('button', { name: 'Restore' }).click();
    const link = page.getByRole('status').getByRole('link', { name: copy });
    await link.waitFor();
    await link.click();
    await page.getByRole('heading', { name: copy }).waitFor();
    await page.getByTestId('site-status').filter({ hasText: 'active' }).waitFor({ timeout: 60_000 });
    // the restored website's file is the backed-up one, on disk and served by the node's nginx
    assert.equal(fs.readFileSync(path.join(panel.root, 'sites', copy, 'public_html', 'index.html'), 'utf8'), `<h1>${s.domain} as backed up</h1>`, 'the restored website holds the backed-up file on disk');
    assert.deepEqual(await getFromNode(panel.webPort, copy), { status: 200, body: `<h1>${s.domain} as backed up</h1>` }, "the node's nginx serves the backed-up file for the restored website");
    await browser.shot(page, 'backups-restored-site');

    // the schedule: every hour, keep the newest 2 (a Temporal schedule), then stopped
    await page.goto(`/sites/${s.id}/backups`);
    const sched = page.getByRole('form', { name: 'Backup schedule' });
    await sched.getByLabel('Every').selectOption('hourly');
    await sched.getByLabel('Keep the newest').fill('2');
    schedules.push(s.id);
    await sched.getByRole('button', { name: 'Save schedule' }).click();
    await page.getByTestId('backup-schedule').filter({ hasText: 'Hourly, keeping the newest 2' }).waitFor();
    assert.deepEqual((await admin.get(`/v1/sites/${s.id}/backup-schedule`)).json.keep, 2, 'the schedule keeps the newest 2');
    await browser.shot(page, 'backups-site-tab');
    page.once('dialog', (d) => void d.accept()); // "Stop the backup schedule?"
    await page.getByRole('button', { name: 'Stop schedule' }).click();
    await page.getByText('No schedule: restore points are taken by hand only.').waitFor();
    assert.equal((await admin.get(`/v1/sites/${s.id}/backup-schedule`)).status, 404, 'the stopped schedule is gone');
  });

  it('extracts a restore point for inspection, shows its expiry, Remove now deletes the folder before it; the platform page restores it into another account by its id', async () => {
    const s = await site();
    const page = await browser.open(panel.url, admin);
    const row = await takeRestorePoint(page, s.id);
    await row.getByRole('button', { name: 'Extract for inspection' }).click();
    await page.waitForURL('**/cluster/backups/inspections/*');
    await page.getByTestId('inspection-status').filter({ hasText: 'ready' }).waitFor({ timeout: 60_000 });
    const id = page.url().split('/').pop()!;
    const ins = (await admin.get(`/v1/inspections/${id}`)).json;
    assert.equal(fs.readFileSync(path.join(ins.path, 'site/public_html/index.html'), 'utf8'), `<h1>${s.domain} as backed up</h1>`, 'the inspection folder holds the backed-up file');
    assert.equal(await page.getByTestId('inspection-expiry').textContent(), new Date(ins.expires_at).toISOString().replace('T', ' ').slice(0, 16) + ' UTC', "the page shows the inspection's expiry in UTC");
    await browser.shot(page, 'backups-inspection');
    // listed on the platform page until removed, opening the same page
    await page.getByRole('link', { name: 'Backups', exact: true }).first().click();
    await page.getByRole('table', { name: 'Inspections' }).getByRole('link', { name: `Open the inspection of ${s.domain}` }).click();
    await page.waitForURL(`**/cluster/backups/inspections/${id}`);
    refused403(await provider.client.get('/v1/inspections'));
    page.once('dialog', (d) => void d.accept()); // "Remove the inspection folder now?"
    await page.getByRole('button', { name: 'Remove now' }).click();
    await page.getByTestId('inspection-status').filter({ hasText: 'removed' }).waitFor({ timeout: 30_000 });
    assert.ok(!fs.existsSync(ins.path), 'the folder is gone');
    const removed = (await admin.get(`/v1/inspections/${id}`)).json;
    assert.ok(new Date(removed.removed_at) < new Date(removed.expires_at), 'removed before its time');
    assert.ok(!(await admin.get('/v1/inspections')).json.inspections.some((x: { id: string }) => x.id === id), 'no longer listed');

    // the platform page restores the same restore point, named by its id, into another account
    const other = await createOrgWithLogin(provider.client, { type: 'customer' });
    const copy = `${unique('copy-')}.example.com`;
    await page.goto('/cluster/backups');
    await page.getByLabel('Restore point ID', { exact: true }).fill(ins.restore_point_id);
    const form = page.getByRole('form', { name: 'Restore into an account' });
    await form.getByLabel('Into account (ID)').fill(other.id);
    await form.getByLabel('Domain of the restored website').fill(copy);
    await form.getByLabel('I confirm: create a website from this restore point').check();
    await form.getByRole('button', { name: 'Restore' }).click();
    await page.getByRole('status').getByRole('link', { name: copy }).waitFor();
    await until('restored site active', async () => (await other.client.get(`/v1/orgs/${other.id}/sites`)).json.sites[0]?.status === 'active', 30_000);
    assert.deepEqual(await getFromNode(panel.webPort, copy), { status: 200, body: `<h1>${s.domain} as backed up</h1>` }, 'the site restored into the other account serves the backed-up file');
  });

  it('the platform page restores a deleted site by its id from its archive, cleans up, and shows the recovery metrics', async () => {
    const s = await site();
    assert.equal((await s.customer.client.del(`/v1/sites/${s.id}`)).status, 202, 'the site deletion is accepted');
    await until('site deleted', async () => (await s.customer.client.get(`/v1/sites/${s.id}`)).status === 404, 30_000);
    assert.equal((await getFromNode(panel.webPort, s.domain)).status, 404, 'the deleted site is no longer served');
    const page = await browser.open(panel.url, admin);
    await page.goto('/cluster');
    await page.getByRole('navigation', { name: 'Cluster' }).getByRole('link', { name: 'Backups' }).click();
    const archive = page.getByRole('table', { name: 'Archives of deleted websites' }).getByRole('row').filter({ hasText: s.id });
    page.once('dialog', (d) => void d.accept()); // "Restore site …?"
    await archive.getByRole('button', { name: `Restore site ${s.domain}` }).click();
    await page.getByRole('status').filter({ hasText: `Site ${s.id} (${s.domain}) is restored` }).waitFor();
    assert.deepEqual(await getFromNode(panel.webPort, s.domain), { status: 200, body: `<h1>${s.domain} as backed up</h1>` }, 'the restored site serves the backed-up file again');

    const partial = path.join(panel.root, 'backups', 'restore-points', s.id, `${unique('x')}.tar.gz.part`);
    fs.mkdirSync(path.dirname(partial), { recursive: true });
    fs.writeFileSync(partial, Buffer.alloc(500));
    await page.getByRole('button', { name: 'Clean up now' }).click();
    await page.getByRole('status').filter({ hasText: 'partial archive' }).waitFor();
    assert.ok(!fs.existsSync(partial), `the clean-up removed the partial archive: ${partial}`);
    await page.getByRole('table', { name: 'Websites with restore points' }).waitFor();
    await browser.shot(page, 'backups-platform');
  });
});
