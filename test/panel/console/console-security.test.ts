import assert from 'node:assert/strict';
import type { Browser, BrowserContext } from 'playwright-core';
import { launchChromium, newConsolePage, screenshot } from '../../helpers/console';
import { consoleSignIn, createOrgWithLogin, platformAdmin, startPanel } from '../../helpers/panel';
import type { PanelRuntime } from '../../../main/panel-api';
import { env } from '../../setup/env';

// The platform's two-factor policy in the console (issue 32), in Debian's chromium: a platform_admin
// checks the roles that must use two-factor sign-in and saves; the stored policy and the audit
// log follow; a provider's login never sees the page's data. Screenshot in test-artifacts/console/.

describe('panel: console security page (two-factor policy) in chromium', function () {
  this.timeout(90_000);
  let panel: PanelRuntime;
  let browser: Browser;

  before(async function () {
    this.timeout(120_000);
    [panel, browser] = await Promise.all([startPanel(), launchChromium()]);
  });
  after(async () => {
    await browser?.close();
    await panel?.close();
  });

  it('a platform_admin sets the roles that must use two-factor sign-in; below the platform the policy is not shown', async () => {
    const admin = await platformAdmin(panel.url);
    const me = (await admin.get('/v1/account')).json;
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const contexts: BrowserContext[] = [];
    const errors: string[] = [];
    try {
      const page = await newConsolePage(browser, panel.url, contexts, errors);
      await consoleSignIn(page, me.login.username, me.org_id);
      await page.getByRole('link', { name: 'Cluster' }).click();
      await page.getByRole('link', { name: 'Security' }).click();
      const form = page.getByRole('form', { name: 'Two-factor policy' });
      await form.waitFor();
      assert.deepEqual(await form.locator('.field.check label').allTextContents(), ['platform_admin', 'provider_admin', 'reseller', 'account_owner', 'read_only'], 'every role is offered');
      await form.getByLabel('reseller').check();
      await form.getByLabel('provider_admin').check();
      await form.getByRole('button', { name: 'Save policy' }).click();
      await page.getByText(`Last set by ${me.login.username}`).waitFor();
      assert.deepEqual((await admin.get('/v1/platform/two-factor-policy')).json.require_roles, ['provider_admin', 'reseller'], 'stored, sorted');
      const audited = await env.db('panel_audit').where({ action: 'settings.two_factor' }).orderBy('id', 'desc').first();
      assert.deepEqual(audited?.after, { require_roles: ['provider_admin', 'reseller'] }, 'audited with the new value');
      await screenshot(page, 'security');
      await form.getByLabel('provider_admin').uncheck();
      await form.getByLabel('reseller').uncheck();
      await form.getByRole('button', { name: 'Save policy' }).click();
      const deadline = Date.now() + 15_000;
      while ((await admin.get('/v1/platform/two-factor-policy')).json.require_roles.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      assert.deepEqual((await admin.get('/v1/platform/two-factor-policy')).json.require_roles, [], 'lifted again');
      assert.deepEqual(errors, [], 'no script error');

      // a provider's login: no Cluster link, and the page's data is refused
      const other = await newConsolePage(browser, panel.url, contexts, errors);
      await consoleSignIn(other, provider.username, provider.id);
      assert.equal(await other.getByRole('link', { name: 'Cluster' }).count(), 0, 'no cluster link below the platform');
      await other.goto('/cluster/security');
      await other.getByRole('alert').waitFor();
      assert.equal(await other.getByRole('form', { name: 'Two-factor policy' }).count(), 0, 'no policy form');
    } finally {
      for (const c of contexts) await c.close();
    }
  });
});
