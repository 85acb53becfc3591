import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import type { Browser, BrowserContext } from 'playwright-core';
import { launchChromium, newConsolePage, screenshot } from '../../helpers/console';
import { recordCronRuns } from '../../../services/panel/sites/cron-runs';
import { HOSTING_NODE } from '../../../domain/panel/node-ops';
import { consoleSignIn, createOrgWithLogin, platformAdmin, startHostingPanel, unique, type HostingPanel } from '../../helpers/panel';
import { env } from '../../setup/env';
import { until } from '../../helpers/until';

// A website's own pages in the console (issue 32: site editing, PHP values, cron runs, PHP versions
// a node offers), in Debian's chromium against a real panel whose hosting node runs nginx and
// PHP-FPM: each save is a node operation the node applies. Screenshots in test-artifacts/console/.

describe('panel: console site settings, PHP values and cron in chromium', function () {
  this.timeout(120_000);
  let panel: HostingPanel;
  let browser: Browser;

  before(async function () {
    this.timeout(120_000);
    [panel, browser] = await Promise.all([startHostingPanel(), launchChromium()]);
  });
  after(async () => {
    await browser?.close();
    await panel?.close();
  });

  it('offers only the PHP versions of the node, edits aliases, PHP values and cron lines through node operations, and lists the last cron runs', async () => {
    const admin = await platformAdmin(panel.url);
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const offered: string[] = (await env.db('panel_nodes').where({ name: HOSTING_NODE }).first()).facts.phpVersions;
    assert.ok(offered.length > 0, 'the hosting node reports its PHP versions');
    const domain = `${unique('edit')}.example.com`;

    const contexts: BrowserContext[] = [];
    const errors: string[] = [];
    try {
      const page = await newConsolePage(browser, panel.url, contexts, errors);
      await consoleSignIn(page, customer.username, customer.id);
      await page.getByRole('link', { name: 'Websites' }).click();

      // Add website: the versions the node offers, newest first chosen, and "none"
      const addPhp = page.getByRole('form', { name: 'Add website' }).getByLabel('PHP version');
      await addPhp.waitFor();
      assert.deepEqual(await addPhp.locator('option').allTextContents(), [...offered.map((v) => `PHP ${v}`), 'none (static site)'], 'only what the node offers');
      assert.equal(await addPhp.inputValue(), offered[offered.length - 1], 'the newest offered version is chosen');
      await page.getByLabel('Domain').fill(domain);
      await page.getByRole('button', { name: 'Add website' }).click();
      await page.getByTestId('site-status').filter({ hasText: 'active' }).waitFor({ timeout: 30_000 });
      const id = new URL(page.url()).pathname.split('/')[2];

      // Settings: aliases and PHP version; the select lists the node's versions
      await page.getByRole('link', { name: 'Settings' }).click();
      const php = page.getByRole('form', { name: 'Website settings' }).getByLabel('PHP version');
      await php.waitFor();
      assert.deepEqual(await php.locator('option').allTextContents(), [...offered.map((v) => `PHP ${v}`), 'none (static site)'], 'the edit offers the same versions');
      await page.getByLabel('Aliases').fill(`www.${domain}`);
      await page.getByRole('button', { name: 'Save settings' }).click();
      await page.getByText('Saved: the node applies the change in a moment.').waitFor();
      const edited = await until('the alias applied', async () => {
        const s = (await customer.client.get(`/v1/sites/${id}`)).json;
        return s.status === 'active' && s.applied_generation === 2 ? s : null;
      });
      assert.deepEqual(edited.aliases, [`www.${domain}`], 'the alias is stored');
      assert.match(fs.readFileSync(path.join(panel.root, 'etc/nginx/sites', `${domain}.conf`), 'utf8'), new RegExp(`server_name[^;]*www\\.${domain.replace(/\./g, '\\.')}`), 'and served by nginx');
      await screenshot(page, 'site-settings');

      // PHP values: within bounds, a value out of bounds is refused with the API's message
      await page.getByRole('link', { name: 'PHP', exact: true }).click();
      const memory = page.getByLabel('Memory limit (memory_limit)');
      await memory.fill('4096');
      await memory.evaluate((el: { removeAttribute(name: string): void }) => el.removeAttribute('max')); // past the browser's own check: the API's answer shows
      await page.getByRole('button', { name: 'Save PHP values' }).click();
      await page.getByRole('alert').filter({ hasText: 'php_values.memory_limit' }).waitFor();
      await memory.fill('128');
      await page.getByRole('button', { name: 'Save PHP values' }).click();
      await until('the PHP value applied', async () => {
        const s = (await customer.client.get(`/v1/sites/${id}`)).json;
        return s.status === 'active' && s.php_values.memory_limit === 128;
      });
      const pool = path.join(panel.root, 'etc/php', offered[offered.length - 1], 'pool.d', `${domain}.conf`);
      await until('the pool rewritten', async () => /php_admin_value\[memory_limit\] = 128M/.test(fs.readFileSync(pool, 'utf8')));

      // Cron: the lines saved on the node; the runs its heartbeat reported, newest first
      await page.getByRole('link', { name: 'Cron' }).click();
      const line = '*/5 * * * * php cron.php';
      await page.getByLabel('Cron lines, one a line').fill(line);
      await page.getByRole('button', { name: 'Save cron lines' }).click();
      await until('the cron line on the node', async () => fs.existsSync(path.join(panel.root, 'etc/cron.d', domain)) && fs.readFileSync(path.join(panel.root, 'etc/cron.d', domain), 'utf8').includes('php cron.php'));
      const at = (m: number) => new Date(Date.now() - m * 60_000).toISOString();
      // what the hosting node's heartbeat records (main/panel-api.ts), here without waiting five minutes
      await recordCronRuns(env.db, HOSTING_NODE, [
        { id: unique('run-'), siteId: id, line, startedAt: at(10), finishedAt: at(9), status: 'ok', exitCode: 0, output: 'done\n', user: 's_test' },
        { id: unique('run-'), siteId: id, line, startedAt: at(5), finishedAt: at(4), status: 'failed', exitCode: 3, output: 'PHP Fatal error: out of memory\n', user: 's_test' },
      ]);
      await page.reload();
      const rows = page.getByRole('table', { name: 'Last runs, newest first' }).locator('tbody tr');
      await rows.first().waitFor();
      assert.equal(await rows.count(), 2, 'both runs listed');
      assert.match((await rows.nth(0).textContent())!, /failed3/, 'the newest first, with its status and exit code');
      await rows.nth(0).getByText('characters').click();
      await page.getByText('PHP Fatal error: out of memory').waitFor();
      await screenshot(page, 'site-cron');
      assert.deepEqual(errors, [], 'no script error on the pages');

      // Suspensions, seen from the provider: the site's own suspension, then the account's on top
      assert.equal((await provider.client.post(`/v1/sites/${id}/suspend`)).status, 200, 'the provider suspends the site');
      assert.equal((await provider.client.post(`/v1/orgs/${customer.id}/suspend`)).status, 200, 'and then the account');
      const above = await newConsolePage(browser, panel.url, contexts, errors);
      await consoleSignIn(above, provider.username, provider.id);
      await above.goto(`/orgs/${provider.id}/suspensions`);
      const orgRow = above.getByRole('table', { name: `Suspended organisations below ${provider.body.name}` }).getByRole('row').filter({ hasText: customer.body.name });
      await orgRow.waitFor();
      const siteRow = above.getByRole('table', { name: `Suspended websites at and below ${provider.body.name}` }).getByRole('row').filter({ hasText: domain });
      assert.match((await siteRow.textContent())!, /its own suspension and its organisation's suspension/, 'the site says what stops it');
      await screenshot(above, 'suspensions');
    } finally {
      for (const c of contexts) await c.close();
    }
  });
});
