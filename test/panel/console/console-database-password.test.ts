import assert from 'node:assert/strict';
import type { Browser, BrowserContext } from 'playwright-core';
import { launchChromium, newConsolePage, screenshot } from '../../helpers/console';
import { asDbUser, consoleSignIn, createOrgWithLogin, platformAdmin, startHostingPanel, unique, type HostingPanel } from '../../helpers/panel';
import { env } from '../../setup/env';
import { until } from '../../helpers/until';

// The console's *Reset password* on the databases tab (test/panel/console/console.test.ts pattern: Debian's
// chromium driven by playwright-core against a real panel whose hosting node runs MariaDB): a
// dismissed confirmation changes nothing; an accepted one shows the new password once, and it is
// the one MariaDB then takes. Screenshot in test-artifacts/console/database-password.png.

describe('panel: console database password reset in chromium', function () {
  this.timeout(90_000);
  let panel: HostingPanel;
  let browser: Browser;

  before(async function () {
    this.timeout(120_000);
    [panel, browser] = await Promise.all([startHostingPanel({ mariadb: true }), launchChromium()]);
  });
  after(async () => {
    await browser?.close();
    await panel?.close();
  });

  it('Reset password asks first, then shows the new password once; MariaDB takes it and refuses the old one', async () => {
    const admin = await platformAdmin(panel.url);
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const name = unique('cdb_').replace(/-/g, '_');
    const created = await customer.client.post(`/v1/orgs/${customer.id}/databases`, { name });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    await until('active', async () => (await customer.client.get(`/v1/databases/${created.json.id}`)).json.status === 'active');

    const contexts: BrowserContext[] = [];
    const errors: string[] = [];
    try {
      const page = await newConsolePage(browser, panel.url, contexts, errors);
      await consoleSignIn(page, customer.username, customer.id);
      await page.getByRole('link', { name: 'Databases' }).click();
      const row = page.getByRole('row').filter({ hasText: name });
      await row.filter({ hasText: 'active' }).waitFor();

      const dialogs: string[] = [];
      page.once('dialog', (d) => void (dialogs.push(d.message()), d.dismiss()));
      await row.getByRole('button', { name: 'Reset password' }).click();
      await until('the dialog', async () => dialogs.length === 1);
      assert.match(dialogs[0], new RegExp(`new password\\? The current one stops working`), 'the confirm dialog warns that the current password stops working');
      assert.equal(await env.db('panel_node_ops').where({ kind: 'database.password' }).whereRaw(`payload->>'user' = ?`, [name]).first(), undefined, 'dismissed: nothing queued');

      page.once('dialog', (d) => void d.accept());
      await row.getByRole('button', { name: 'Reset password' }).click();
      const password = (await page.getByTestId('db-password').textContent())!.trim();
      assert.ok(password.length >= 32 && password !== created.json.password, password);
      await page.getByText('new password, set on the node in a moment').waitFor();
      const opId = (await customer.client.get(`/v1/databases/${created.json.id}`)).json.operation_id;
      await until('the reset applied', async () => (await env.db('panel_node_ops').where({ id: opId }).first()).status === 'done');
      const as = (pw: string) => asDbUser(panel, name, pw, 'SELECT 1');
      assert.equal((await as(password)).code, 0, 'the new password logs in as the database user');
      assert.notEqual((await as(created.json.password)).code, 0, 'the old password no longer logs in');
      await screenshot(page, 'database-password');
      await page.reload();
      await row.filter({ hasText: 'active' }).waitFor();
      assert.equal(await page.getByTestId('db-password').count(), 0, 'shown once: gone after a reload');
      assert.deepEqual(errors, [], 'no browser console errors');
    } finally {
      for (const c of contexts) await c.close();
    }
  });
});
