import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { measurePageWeight, newConsolePage } from '../../helpers/console';
import { env } from '../../setup/env';
import { createOrgWithLogin, PASSWORD, platformAdmin, startHostingPanel, totp, unique, type HostingPanel, type PanelClient } from '../../helpers/panel';
import { until } from '../../helpers/until';

// The web console (PANEL.md section 5) in Debian's chromium, driven by playwright-core, against a
// real panel with its hosting node (nginx), scheduled placement and two-factor required for
// resellers. One browser for the file; a fresh context (cookies) per test; a screenshot per test
// under test-artifacts/console (gitignored). Hosts *.console.test resolve to 127.0.0.1 inside the
// browser, so a login hostname's branding can be shown.

const ARTIFACTS = path.join(__dirname, '..', '..', '..', 'test-artifacts', 'console');
const HOST = 'panel.console.test';

describe('panel: web console in chromium', function () {
  this.timeout(60_000);
  let panel: HostingPanel;
  let browser: Browser;
  let admin: PanelClient;
  let base: string;
  let factsDir: string;
  const contexts: BrowserContext[] = [];
  /** uncaught errors in any page: none is expected */
  const pageErrors: string[] = [];

  before(async function () {
    this.timeout(120_000);
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    factsDir = fs.mkdtempSync(path.join(os.tmpdir(), 'console-facts-'));
    const facts = path.join(factsDir, 'facts.json');
    fs.writeFileSync(facts, JSON.stringify({ nodes: [{ node: 'hosting', preflight_passed: true, checked_at: new Date().toISOString(), php_versions: ['8.2'] }] }));
    [panel, browser] = await Promise.all([
      startHostingPanel({ mariadb: true, flags: ['-placement', 'scheduled', '-placement-node-facts', facts, '-require-2fa-roles', 'reseller', '-controller-state'] }),
      chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--host-resolver-rules=MAP *.console.test 127.0.0.1'] }),
    ]);
    admin = await platformAdmin(panel.url);
    base = panel.url.replace('127.0.0.1', HOST);
  });
  after(async () => {
    await browser?.close();
    await panel?.close();
    if (factsDir) fs.rmSync(factsDir, { recursive: true, force: true });
  });
  afterEach(async () => {
    for (const c of contexts.splice(0)) await c.close();
    assert.deepEqual(pageErrors.splice(0), [], 'uncaught errors in the console');
  });

  const newPage = (host = HOST): Promise<Page> => newConsolePage(browser, base.replace(HOST, host), contexts, pageErrors);
  const shot = (page: Page, name: string) => page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });

  async function signIn(page: Page, username: string, password: string) {
    await page.goto('/sign-in');
    await page.getByLabel('Username').fill(username);
    await page.getByLabel('Password', { exact: true }).fill(password);
    await page.getByRole('button', { name: 'Sign in' }).click();
  }

  /** A page signed in with PASSWORD, on the login's org page. */
  async function signedIn(username: string, orgId = '*'): Promise<Page> {
    const page = await newPage();
    await signIn(page, username, PASSWORD);
    await page.waitForURL(`**/orgs/${orgId}`);
    return page;
  }

  /** Fills the password change form (first sign-in) and sends it. */
  async function choosePassword(page: Page, current: string, next: string) {
    await page.getByLabel('Current password').fill(current);
    await page.getByLabel('New password', { exact: true }).fill(next);
    await page.getByLabel('New password again').fill(next);
    await page.getByRole('button', { name: 'Change password' }).click();
  }

  /** A login created through the API with a temporary password (changed at its first sign-in). */
  async function orgWithTemporaryLogin(by: PanelClient, input: Record<string, unknown>) {
    const username = unique('con');
    const temporary = `temp-${randomUUID()}`;
    const r = await by.post('/v1/orgs', { name: username, ...input, login: { username, password: temporary } });
    assert.equal(r.status, 201, JSON.stringify(r.json));
    return { id: r.json.id as string, username, temporary };
  }

  it('first sign-in with a temporary password asks for a new one, then opens the organisation', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const customer = await orgWithTemporaryLogin(provider.client, { type: 'customer' });
    const page = await newPage();
    await signIn(page, customer.username, customer.temporary);
    await page.waitForURL('**/account/password');
    await page.getByRole('heading', { name: 'Choose your password' }).waitFor();
    await choosePassword(page, customer.temporary, 'too short');
    // the API's own refusal, as it is
    await page.getByRole('alert').filter({ hasText: '12 characters' }).waitFor();
    await choosePassword(page, customer.temporary, PASSWORD);
    await page.waitForURL(`**/orgs/${customer.id}`);
    await page.getByRole('heading', { name: customer.username }).waitFor();
    await shot(page, 'first-sign-in');
    // the password really changed: the temporary one no longer signs in
    assert.equal((await provider.client.post('/v1/auth/sign-in', { username: customer.username, password: customer.temporary })).status, 401, 'the temporary password no longer signs in once changed');
  });

  it('enrols TOTP with a QR code and recovery codes shown once, then signs in with a code', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const page = await signedIn(provider.username, provider.id);
    await page.getByRole('link', { name: 'Account' }).click();
    await page.getByRole('button', { name: 'Set up two-factor sign-in' }).click();
    const qr = page.getByRole('img', { name: 'QR code of the two-factor secret' });
    await qr.waitFor();
    await shot(page, 'totp-qr');
    assert.match((await qr.getAttribute('src'))!, /^data:image\/svg\+xml;base64,/, 'the QR code is an inline SVG image');
    const secret = (await page.getByTestId('totp-secret').textContent())!.trim();
    // the previous time step's code (an authenticator a little behind), so the current one is still unused for sign-in
    await page.getByLabel('Code from the app').fill(totp(secret, Math.floor(Date.now() / 1000) - 30));
    await page.getByRole('button', { name: 'Turn on two-factor sign-in' }).click();
    const codes = page.getByRole('region', { name: 'Recovery codes' }).locator('li');
    await codes.first().waitFor();
    assert.ok((await codes.count()) >= 8, `${await codes.count()} recovery codes`);
    await shot(page, 'totp-enrolled');
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL('**/sign-in');

    // password alone is not enough now: the page asks for the code and signs in with it
    await signIn(page, provider.username, PASSWORD);
    await page.getByRole('alert').filter({ hasText: 'two-factor sign-in' }).waitFor();
    await page.getByLabel('Two-factor code').fill(totp(secret));
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`**/orgs/${provider.id}`);
    await page.getByRole('heading', { name: provider.username }).waitFor();
    await shot(page, 'totp-sign-in');
  });

  it('a reseller login (two-factor required for its role) is held on its account page until it enrols', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const reseller = await orgWithTemporaryLogin(provider.client, { type: 'reseller' });
    const page = await newPage();
    await signIn(page, reseller.username, reseller.temporary);
    await page.waitForURL('**/account/password');
    await choosePassword(page, reseller.temporary, PASSWORD);
    // the organisation page is refused by the API (two_factor_required): the console sends it to the account page
    await page.waitForURL('**/account?two-factor=required');
    await page.getByRole('status').filter({ hasText: 'must set up two-factor sign-in first' }).waitFor();
    await shot(page, '2fa-required');
    await page.goto(`/orgs/${reseller.id}/below`);
    await page.waitForURL('**/account?two-factor=required');

    await page.getByRole('button', { name: 'Set up two-factor sign-in' }).click();
    const secret = (await page.getByTestId('totp-secret').textContent())!.trim();
    await page.getByLabel('Code from the app').fill(totp(secret));
    await page.getByRole('button', { name: 'Turn on two-factor sign-in' }).click();
    await page.getByRole('region', { name: 'Recovery codes' }).waitFor();
    await page.getByRole('link', { name: 'Organisations' }).click();
    await page.getByRole('heading', { name: reseller.username }).waitFor();
    await page.getByRole('heading', { name: 'Organisations below' }).waitFor();
  });

  it('a provider creates a reseller with custom limits and a customer with a package; a limit refusal shows in the page', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const pkgName = unique('Basic ');
    const pkg = await provider.client.post(`/v1/orgs/${provider.id}/packages`, { name: pkgName, limits: { websites: 3, disk_mb: 2048 } });
    assert.equal(pkg.status, 201, JSON.stringify(pkg.json));
    const page = await signedIn(provider.username, provider.id);

    const resellerName = unique('Reseller ');
    const form = page.getByRole('form', { name: 'Create organisation' });
    await form.getByLabel('Type').selectOption('reseller');
    await form.getByLabel('Name', { exact: true }).fill(resellerName);
    await form.getByLabel('First login username').fill(unique('rsl'));
    await form.getByLabel('Initial password').fill(`temp-${randomUUID()}`);
    await form.getByRole('radio', { name: 'Custom limits' }).check();
    await form.getByLabel('Customer accounts').fill('1');
    await form.getByRole('button', { name: 'Create reseller' }).click();
    await page.getByRole('heading', { name: resellerName }).waitFor();
    const resellerId = /\/orgs\/([^/]+)$/.exec(page.url())![1];
    // breadcrumbs run from the caller's own org down to this one
    await page.getByRole('navigation', { name: 'Breadcrumbs' }).getByRole('link', { name: provider.username }).waitFor();

    const customerName = unique('Customer ');
    await form.getByLabel('Type').selectOption('customer');
    await form.getByLabel('Name', { exact: true }).fill(customerName);
    await form.getByLabel('First login username').fill(unique('cus'));
    await form.getByLabel('Initial password').fill(`temp-${randomUUID()}`);
    await form.getByRole('radio', { name: 'Package' }).check();
    await form.getByLabel('Package to assign').selectOption({ label: pkgName });
    await form.getByRole('button', { name: 'Create customer' }).click();
    await page.getByRole('heading', { name: customerName }).waitFor();
    const customerId = /\/orgs\/([^/]+)$/.exec(page.url())![1];
    const customer = await provider.client.get(`/v1/orgs/${customerId}`);
    assert.equal(customer.json.parent_id, resellerId, 'the customer was created below the reseller whose page it was made on');
    assert.equal(customer.json.package_id, pkg.json.id, 'the customer was given the chosen package');
    await page.getByRole('link', { name: 'Limits' }).click();
    await page.getByText('Source: package').waitFor();
    await shot(page, 'customer-with-package');

    // a second customer is one over the reseller's customer_accounts limit: the API's message in the page
    await page.getByRole('navigation', { name: 'Breadcrumbs' }).getByRole('link', { name: resellerName }).click();
    await page.getByRole('heading', { name: resellerName }).waitFor();
    await form.getByLabel('Type').selectOption('customer');
    await form.getByLabel('Name', { exact: true }).fill(unique('Too many '));
    await form.getByLabel('First login username').fill(unique('cus'));
    await form.getByLabel('Initial password').fill(`temp-${randomUUID()}`);
    await form.getByRole('radio', { name: 'Custom limits' }).check();
    await form.getByRole('button', { name: 'Create customer' }).click();
    const refusal = form.getByRole('alert');
    await refusal.waitFor();
    assert.match((await refusal.textContent())!, /The limit 'customer_accounts' of reseller .* is 1/, 'the refusal names the customer_accounts limit of the reseller and its value');
    assert.match((await refusal.textContent())!, /limit_reached/, "the refusal shows the API's error code");
    await shot(page, 'limit-refusal');
    assert.equal((await provider.client.get(`/v1/orgs?root=${resellerId}&children=true`)).json.orgs.length, 1, 'nothing was created');
  });

  it('adds a website chosen by the scheduler and shows its placement reason; it becomes active on the hosting node', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const page = await signedIn(customer.username, customer.id);
    await page.getByRole('heading', { name: 'Websites' }).waitFor();
    const form = page.getByRole('form', { name: 'Add website' });
    const domain = `${unique('site-')}.console.test`;
    await form.getByLabel('Domain').fill(domain);
    assert.equal(await form.getByLabel('Node').inputValue(), '', 'the scheduler is the default node choice');
    assert.equal(await form.getByLabel('Node').locator('option:checked').textContent(), 'Chosen by the scheduler', 'the default option reads Chosen by the scheduler');
    await form.getByRole('button', { name: 'Add website' }).click();
    await page.getByRole('heading', { name: domain }).waitFor();
    const reason = page.getByTestId('placement-reason');
    await reason.waitFor();
    assert.match((await reason.textContent())!, /^hosting: chosen by the scheduler: the least loaded qualifying node/, 'the placement reason says the scheduler chose the least loaded node');
    await page.getByTestId('site-status').filter({ hasText: 'active' }).waitFor({ timeout: 30_000 });
    // the limits of its account and what its node binds (issue 34): none set, and this node enforces CPU
    const limits = page.getByRole('table', { name: 'Limits of this website on node hosting' });
    const cpu = await limits.getByRole('row', { name: /CPU \(% of one core\)/ }).textContent();
    assert.match(cpu!, /unlimited\s*—$/, `an unset limit binds nothing, so the node column says "—": ${cpu}`);
    // its usage from its control group (issue 34): per hour once its node reported the group, until then it says so
    await page.getByRole('heading', { name: 'Usage' }).waitFor();
    await page.getByRole('table', { name: 'Usage of this website per hour' }).or(page.getByText('runs this website in no control group')).waitFor();
    await shot(page, 'website-placement');
    // the site is served by the hosting node's nginx under its domain
    // (fetch() cannot set Host, so a plain request)
    const status = await new Promise<number>((resolve, reject) => {
      http.get({ host: '127.0.0.1', port: panel.webPort, path: '/', headers: { host: domain } }, (res) => resolve(res.resume().statusCode!)).on('error', reject);
    });
    assert.equal(status, 200, "the hosting node's nginx serves the new site");
  });

  it('shows the branding of the login hostname on the sign-in page', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const host = `${unique('brand-')}.console.test`;
    const set = await provider.client.put(`/v1/orgs/${provider.id}/branding`, { display_name: 'Acme Hosting', accent_color: '#c0392b', support_email: 'help@acme.example', login_hostname: host });
    assert.equal(set.status, 200, JSON.stringify(set.json));
    const page = await newPage(host);
    await page.goto('/sign-in');
    await page.getByRole('heading', { name: 'Acme Hosting' }).waitFor();
    await page.getByRole('link', { name: 'help@acme.example' }).waitFor();
    assert.equal(await page.title(), 'Acme Hosting', "the page title is the branding's display name");
    assert.equal(await page.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--accent').trim()"), '#c0392b', 'the accent colour of the branding is applied');
    await shot(page, 'branded-sign-in');
  });

  it('refuses a cookie-authenticated change without the CSRF header; the console sends it', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const page = await signedIn(provider.username, provider.id);
    const [without, withToken] = await page.evaluate(async (id) => {
      const plain = await fetch(`/v1/orgs/${id}/packages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'forged', limits: {} }) });
      const token = (await fetch('/v1/account')).headers.get('x-csrf-token') ?? '';
      const sent = await fetch(`/v1/orgs/${id}/packages`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-csrf-token': token }, body: JSON.stringify({ name: 'real', limits: {} }) });
      return [{ status: plain.status, body: (await plain.json()) as { error: { code: string; message: string } } }, { status: sent.status }];
    }, provider.id);
    assert.equal(without.status, 403, `a change without the CSRF header is refused with 403: ${JSON.stringify(without.body)}`);
    assert.equal(without.body.error.code, 'forbidden', 'the CSRF refusal is forbidden');
    assert.match(without.body.error.message, /x-csrf-token/, 'the CSRF refusal names the header');
    assert.equal(withToken.status, 201, 'the same change with the CSRF header is created');
    const names = (await provider.client.get(`/v1/orgs/${provider.id}/packages`)).json.packages.map((p: { name: string }) => p.name);
    assert.deepEqual(names, ['real'], 'only the package sent with the CSRF header exists');
  });

  it('the platform admin reads the cluster: node list, the hosting node page with its latest metrics and websites, declared capacity', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const domain = `${unique('node-')}.console.test`;
    assert.equal((await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain, php_version: null })).status, 201, "the customer's site is created");
    const page = await newPage();
    await signIn(page, 'admin', PASSWORD);
    await page.getByRole('link', { name: 'Cluster' }).click();
    const row = page.getByRole('row').filter({ has: page.getByRole('link', { name: 'hosting', exact: true }) });
    await row.waitFor();
    assert.match((await row.textContent())!, /web/, 'the hosting node is listed with its web role');
    await row.getByRole('link', { name: 'hosting' }).click();
    await page.waitForURL('**/cluster/nodes/hosting');
    await page.getByRole('heading', { name: /Latest metrics/ }).waitFor();
    await page.getByRole('meter', { name: 'Memory' }).waitFor();
    assert.match((await page.locator('dl.facts').last().textContent())!, /Load \(1, 5, 15 min\)/, 'the node page shows the load averages');
    await page.getByRole('table', { name: 'Websites on hosting' }).getByRole('link', { name: domain }).waitFor();
    await page.getByText('nothing needs to move').waitFor();
    await shot(page, 'node-page');

    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Cluster' }).click();
    await page.getByRole('link', { name: 'Declared capacity' }).click();
    const form = page.getByRole('form', { name: 'Declare capacity' });
    await form.getByLabel('Disk (MB)').fill('5000000');
    await form.getByLabel('Overcommit (%)').fill('150');
    await form.getByRole('button', { name: 'Declare' }).click();
    await page.getByText('Declared, overcommit 150 %').waitFor();
    assert.match((await page.getByRole('row').filter({ hasText: 'Disk (MB)' }).textContent())!, /5000000\s*7500000/, 'the disk row shows the declared amount and the allowed one with 150 % overcommit');
    await shot(page, 'capacity');
    page.once('dialog', (d) => void d.accept()); // "Clear the declaration? …"
    await page.getByRole('button', { name: 'Clear declaration' }).click();
    await page.getByText('Nothing declared').waitFor();
  });

  it('the platform admin sets operator PHP settings on a website (php.admin); a bad setting shows the API message', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const site = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: `${unique('php-')}.console.test`, php_version: '8.2' });
    assert.equal(site.status, 201, JSON.stringify(site.json));
    const page = await signedIn('admin');
    await page.goto(`/sites/${site.json.id}/php`);
    await page.getByTestId('site-status').filter({ hasText: 'active' }).waitFor({ timeout: 30_000 });
    const form = page.getByRole('form', { name: 'Operator PHP settings' });
    await form.getByLabel('Extra disabled functions').fill('exec, not a function');
    await form.getByRole('button', { name: 'Save PHP settings' }).click();
    await form.getByRole('alert').filter({ hasText: 'disabled_functions' }).waitFor();
    await form.getByLabel('Extra disabled functions').fill('exec, passthru');
    await form.getByLabel('allow_url_fopen').uncheck();
    await form.getByRole('button', { name: 'Save PHP settings' }).click();
    await page.getByRole('definition').filter({ hasText: 'exec, passthru' }).waitFor();
    await shot(page, 'site-php');
    const after = await admin.get(`/v1/sites/${site.json.id}`);
    assert.deepEqual(after.json.php.disabled_functions, ['exec', 'passthru'], 'the extra disabled functions are saved as a list');
    assert.equal(after.json.php.allow_url_fopen, false, 'allow_url_fopen is turned off');
  });

  it('measures page weight and time to interactive of the heaviest page (an org page with its create form)', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    // a browser that never loaded the console, holding the provider's session cookie
    const page = await newPage();
    const [name, value] = provider.client.cookie!.split('=');
    await page.context().addCookies([{ name, value, url: base, httpOnly: true, sameSite: 'Strict' }]);
    await measurePageWeight(page, 'org', '/orgs/{id}', async () => {
      await page.goto(`/orgs/${provider.id}`);
      await page.getByRole('form', { name: 'Create organisation' }).getByRole('button', { name: 'Create reseller' }).waitFor();
    }, 200_000);
    await shot(page, 'org-page');
  });

  it('file manager uploads into the docroot and shows a soft-quota refusal; the usage page lists accounts at ≥ 80 % first', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const low = await createOrgWithLogin(provider.client, { type: 'customer', name: `a-low-${unique('')}` });
    const high = await createOrgWithLogin(provider.client, { type: 'customer', name: `z-high-${unique('')}`, limits: { disk_mb: 4 } });
    const site = await high.client.post(`/v1/orgs/${high.id}/sites`, { domain: `${unique('files-')}.console.test`, php_version: null, quota_mb: 4 });
    assert.equal(site.status, 201, JSON.stringify(site.json));
    const page = await signedIn(high.username, high.id);
    await page.goto(`/sites/${site.json.id}/files`);
    await page.getByRole('heading', { name: /^Files/ }).waitFor();
    await page.getByTestId('site-status').filter({ hasText: 'active' }).waitFor({ timeout: 30_000 });
    const MB = 1024 * 1024;
    await page.getByLabel('Upload a file here').setInputFiles({ name: 'big.bin', mimeType: 'application/octet-stream', buffer: Buffer.alloc(3.5 * MB, 1) });
    await page.getByRole('cell', { name: 'big.bin' }).waitFor();
    await page.getByLabel('Upload a file here').setInputFiles({ name: 'more.bin', mimeType: 'application/octet-stream', buffer: Buffer.alloc(2 * MB, 1) });
    const refusal = page.getByRole('alert');
    await refusal.waitFor();
    assert.match((await refusal.textContent())!, /limit_reached/, 'the upload over quota is refused with limit_reached');
    assert.equal(await page.getByRole('cell', { name: 'more.bin' }).count(), 0, 'the refused upload is not listed');
    await shot(page, 'file-manager-quota');

    const other = await signedIn(provider.username, provider.id);
    await other.getByRole('link', { name: 'Usage' }).click();
    const rows = other.getByRole('table', { name: 'Customer accounts' }).locator('tbody tr');
    await rows.first().waitFor();
    assert.match((await rows.nth(0).textContent())!, new RegExp(`${high.body.name}.*warning`), 'the account at or above 80 % is listed first, with a warning');
    assert.match((await rows.nth(1).textContent())!, new RegExp(`${low.body.name}.*ok`), 'the account below 80 % comes second, ok');
    await shot(other, 'usage');
  });

  it('the level above renames, suspends and reactivates an account, and deletes it only with its ID typed', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const page = await signedIn(provider.username, provider.id);
    await page.getByRole('link', { name: customer.body.name }).click();
    await page.getByRole('heading', { name: customer.body.name }).waitFor();

    await page.getByRole('button', { name: 'Rename' }).click();
    await page.getByLabel('New name').fill('Renamed account');
    await page.getByRole('button', { name: 'Save name' }).click();
    await page.getByRole('heading', { name: 'Renamed account' }).waitFor();

    page.once('dialog', (d) => void d.accept()); // "Suspend …? Its logins and everything below stop working."
    await page.getByRole('button', { name: 'Suspend' }).click();
    await page.getByRole('button', { name: 'Reactivate' }).waitFor();
    assert.equal((await customer.client.get('/v1/account')).status, 403, 'the suspended account’s login stops at once');
    await page.getByRole('button', { name: 'Reactivate' }).click();
    await page.getByRole('button', { name: 'Suspend' }).waitFor();

    await page.getByRole('button', { name: 'Delete…' }).click();
    const form = page.getByRole('form', { name: 'Delete' });
    await form.getByLabel(/Type the ID/).fill('not-the-id');
    await form.getByRole('button', { name: 'Delete for good' }).click();
    await form.getByRole('alert').waitFor();
    await shot(page, 'delete-confirmation');
    await form.getByLabel(/Type the ID/).fill(customer.id);
    await form.getByRole('button', { name: 'Delete for good' }).click();
    await page.waitForURL(`**/orgs/${provider.id}`);
    assert.equal((await provider.client.get(`/v1/orgs/${customer.id}`)).status, 404, 'the deleted account is gone');
  });

  it('settings tabs: a package, a reseller’s delegated powers, branding, and the logins of an org below', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const reseller = await createOrgWithLogin(provider.client, { type: 'reseller' });
    const page = await signedIn(provider.username, provider.id);

    await page.getByRole('link', { name: 'Packages' }).click();
    const pkg = page.getByRole('form', { name: 'New package' });
    await pkg.getByLabel('Package name').fill('Gold');
    await pkg.getByLabel('Websites').fill('10');
    await pkg.getByRole('button', { name: 'Create package' }).click();
    await page.getByRole('row').filter({ hasText: 'Gold' }).filter({ hasText: 'Websites: 10' }).waitFor();

    await page.getByRole('link', { name: 'Branding' }).click();
    const brand = page.getByRole('form', { name: 'Branding' });
    await brand.getByLabel('Accent colour').fill('red');
    await brand.getByRole('button', { name: 'Save branding' }).click();
    await brand.getByRole('alert').filter({ hasText: 'accent_color' }).waitFor();
    await brand.getByLabel('Accent colour').fill('#117a65');
    await brand.getByLabel('Display name').fill('Green Hosting');
    await brand.getByRole('button', { name: 'Save branding' }).click();
    await page.getByRole('status').filter({ hasText: 'Branding saved.' }).waitFor();
    assert.equal((await provider.client.get(`/v1/orgs/${provider.id}/branding`)).json.own.accent_color, '#117a65', 'the accent colour is saved once valid');

    await page.goto(`/orgs/${reseller.id}/powers`);
    const powers = page.getByRole('form', { name: 'Delegated powers' });
    await powers.getByLabel('Create packages').check();
    await powers.getByRole('button', { name: 'Save powers' }).click();
    await page.getByText('In force: create_packages').waitFor();

    await page.getByRole('link', { name: 'Logins' }).click();
    const add = page.getByRole('form', { name: 'Add login' });
    const username = unique('ro');
    await add.getByLabel('Username').fill(username);
    await add.getByLabel('Initial password').fill(`temp-${randomUUID()}`);
    await add.getByLabel('Role').selectOption('read_only');
    await add.getByRole('button', { name: 'Add login' }).click();
    const row = page.getByRole('row').filter({ hasText: username });
    await row.filter({ hasText: 'read_only' }).waitFor();
    await row.getByRole('button', { name: 'Suspend' }).click();
    await row.filter({ hasText: 'suspended' }).waitFor();
    await shot(page, 'logins');
    const logins = (await provider.client.get(`/v1/orgs/${reseller.id}/logins`)).json.logins;
    assert.equal(logins.find((l: { username: string }) => l.username === username).status, 'suspended', 'the added login is suspended');
  });

  it('DNS zones: create a zone and replace its records; a bad record shows the API message', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const page = await signedIn(customer.username, customer.id);
    await page.getByRole('link', { name: 'DNS zones' }).click();
    const zone = `${unique('zone-')}.example`;
    await page.getByLabel('Zone name').fill(zone);
    await page.getByRole('button', { name: 'Create zone' }).click();
    const records = page.getByRole('form', { name: `Records of ${zone}` });
    await records.waitFor();
    await records.getByRole('textbox').fill('www A not-an-address');
    await records.getByRole('button', { name: 'Save records' }).click();
    await records.getByRole('alert').waitFor();
    await records.getByRole('textbox').fill('www A 300 192.0.2.10\n@ TXT hello');
    await records.getByRole('button', { name: 'Save records' }).click();
    const zones = (await customer.client.get(`/v1/orgs/${customer.id}/dns-zones`)).json.zones;
    await until('both records listed', async () => (await customer.client.get(`/v1/dns-zones/${zones[0].id}`)).json.records.length === 2, 10_000);
    await shot(page, 'dns');
    const z = (await customer.client.get(`/v1/dns-zones/${zones[0].id}`)).json;
    assert.deepEqual(z.records.map((r: { name: string; type: string }) => `${r.name} ${r.type}`), ['www A', '@ TXT'], 'both records are saved in the order given');
  });

  it('databases: created on the hosting node’s MariaDB, the password shown once', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const page = await signedIn(customer.username, customer.id);
    await page.getByRole('link', { name: 'Databases' }).click();
    const name = unique('shop_').replace(/-/g, '_');
    await page.getByLabel('Database name').fill(name);
    await page.getByRole('button', { name: 'Create database' }).click();
    const password = (await page.getByTestId('db-password').textContent())!.trim();
    assert.ok(password.length >= 16, password);
    await until('the database active', async () => (await customer.client.get(`/v1/orgs/${customer.id}/databases`)).json.databases[0]?.status === 'active', 30_000);
    await page.reload();
    await page.getByRole('row').filter({ hasText: name }).filter({ hasText: 'active' }).waitFor();
    assert.equal(await page.getByTestId('db-password').count(), 0, 'shown once: gone after a reload');
    await shot(page, 'databases');
  });

  it('signs in with the keyboard alone (labels, focus order, Enter submits)', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const page = await newPage();
    await page.goto('/sign-in');
    await page.getByLabel('Username').waitFor();
    assert.equal(await page.evaluate('document.activeElement.id === document.querySelector("label[for]").htmlFor'), true, 'the username field has the focus');
    await page.keyboard.type(provider.username);
    await page.keyboard.press('Tab');
    await page.keyboard.type(PASSWORD);
    await page.keyboard.press('Enter');
    await page.waitForURL(`**/orgs/${provider.id}`);
    await page.getByRole('heading', { name: provider.username }).waitFor();
  });

  it('the platform admin creates a provider with custom limits; a bad username shows the API message', async () => {
    const page = await signedIn('admin');
    const form = page.getByRole('form', { name: 'Create organisation' });
    const name = unique('Provider ');
    await form.getByLabel('Name', { exact: true }).fill(name);
    await form.getByLabel('First login username').fill('X');
    await form.getByLabel('Initial password').fill(`temp-${randomUUID()}`);
    await form.getByLabel('Resellers').fill('5');
    await form.getByRole('button', { name: 'Create provider' }).click();
    await form.getByRole('alert').filter({ hasText: 'username' }).waitFor();
    await form.getByLabel('First login username').fill(unique('prv'));
    await form.getByRole('button', { name: 'Create provider' }).click();
    await page.getByRole('heading', { name }).waitFor();
    const id = /\/orgs\/([^/]+)$/.exec(page.url())![1];
    const org = (await admin.get(`/v1/orgs/${id}`)).json;
    assert.equal(org.type, 'provider', "the admin's new org is a provider");
    assert.deepEqual(org.limits.own, { resellers: 5 }, 'the provider has the custom resellers limit and nothing else');
  });

  it('the platform admin names a listed node for a website; its agent never reports, so the site shows failed, listed first', async () => {
    const node = unique('edge-');
    assert.equal((await admin.post('/v1/cluster/nodes', { name: node })).status, 201, 'the admin adds a listed node');
    // no agent runs for it: the node record says alive with the web role, as a fresh heartbeat would
    await env.db('panel_nodes').where({ name: node }).update({ state: 'alive', roles: ['web'], last_heartbeat_at: new Date() });
    try {
      const provider = await createOrgWithLogin(admin, { type: 'provider' });
      const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
      assert.equal((await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: `${unique('ok-')}.console.test`, php_version: null })).status, 201, "a site on the scheduler's choice is created");
      const page = await signedIn('admin');
      await page.goto(`/orgs/${customer.id}/sites`);
      const form = page.getByRole('form', { name: 'Add website' });
      await form.getByLabel('Node').locator(`option[value="${node}"]`).waitFor({ state: 'attached' });
      assert.deepEqual(await form.getByLabel('Node').locator('option').allTextContents(), ['Chosen by the scheduler', "The panel's hosting node", `Node ${node}`], 'the node choices are the scheduler, the hosting node and the listed node');
      const domain = `${unique('edge-')}.console.test`;
      await form.getByLabel('Domain').fill(domain);
      await form.getByLabel('PHP version').selectOption('');
      await form.getByLabel('Node').selectOption(node);
      await form.getByRole('button', { name: 'Add website' }).click();
      await page.getByRole('heading', { name: domain }).waitFor();
      assert.match((await page.getByTestId('placement-reason').textContent())!, new RegExp(`^${node}: node "${node}" was named by admin \\(site.place\\)`), 'the placement reason says the node was named by admin');
      await page.getByTestId('site-status').filter({ hasText: 'failed' }).waitFor({ timeout: 30_000 });
      await page.getByText('did not report the operation').waitFor();
      await page.getByRole('link', { name: "Account's websites" }).click();
      await page.getByRole('status').filter({ hasText: `1 website(s) failed on their node: ${domain}` }).waitFor();
      assert.match((await page.getByRole('table').locator('tbody tr').first().textContent())!, new RegExp(`${domain}failed`), 'the failed site is listed first');
      await shot(page, 'failed-site');
    } finally {
      await env.db('panel_nodes').where({ name: node }).update({ draining: true });
    }
  });

  it('account page: an API token shown once works as a Bearer token, and is revoked', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const page = await signedIn(provider.username, provider.id);
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Account' }).click();
    await page.getByLabel('Token name').fill('ci export');
    await page.getByRole('button', { name: 'Create token' }).click();
    const token = (await page.getByTestId('new-token').textContent())!.trim();
    const bearer = await fetch(`${panel.url}/v1/account`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(bearer.status, 200, 'the new token works as a Bearer token');
    const row = page.getByRole('row').filter({ hasText: 'ci export' });
    page.once('dialog', (d) => void d.accept()); // "Revoke the token …?"
    await row.getByRole('button', { name: 'Revoke' }).click();
    await page.getByText('No API tokens.').waitFor();
    assert.equal((await fetch(`${panel.url}/v1/account`, { headers: { authorization: `Bearer ${token}` } })).status, 401, 'the revoked token is refused');
  });
});

