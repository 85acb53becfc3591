import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { asDbUser, createOrgWithLogin, getFromNode, platformAdmin, startHostingPanel, unique, type HostingPanel, type PanelClient } from '../../helpers/panel';
import { until } from '../../helpers/until';

// Issue 32 item 2 (spec 2 section 1.4, PANEL.md section 2): suspending an org stops everything
// below it on its nodes: its sites serve the suspended page (real nginx and PHP-FPM) and its
// database users are locked (real MariaDB). Reactivation restores exactly what was active before:
// a site suspended on its own stays suspended.

describe('panel: suspending an org suspends its sites and locks its database users on the nodes', function () {
  this.timeout(180_000);
  let panel: HostingPanel;
  let provider: Awaited<ReturnType<typeof createOrgWithLogin>>;

  before(async function () {
    this.timeout(120_000);
    panel = await startHostingPanel({ mariadb: true });
    provider = await createOrgWithLogin(await platformAdmin(panel.url), { type: 'provider' });
  });
  after(async () => {
    await panel?.close();
  });

  const settledSite = (c: PanelClient, id: string, status: string) =>
    until(`site ${id} ${status}`, async () => {
      const s = await c.get(`/v1/sites/${id}`);
      assert.notEqual(s.json.status, 'failed', JSON.stringify(s.json));
      return s.json.status === status ? s.json : null;
    });

  it('info.php answers the suspended page and the database user is refused while a reseller above is suspended; reactivation restores both, and a site suspended on its own stays suspended', async () => {
    const reseller = await createOrgWithLogin(provider.client, { type: 'reseller' });
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const mk = async () => {
      const domain = `${unique('susp')}.example.com`;
      const r = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain, php_version: '8.2' });
      assert.equal(r.status, 201, JSON.stringify(r.json));
      await settledSite(customer.client, r.json.id, 'active');
      fs.writeFileSync(path.join(panel.root, 'sites', domain, 'public_html', 'info.php'), '<?php echo "php " . PHP_VERSION;');
      return { id: r.json.id as string, domain };
    };
    const live = await mk();
    const own = await mk();
    const name = unique('susp_').replace(/-/g, '_');
    const created = await customer.client.post(`/v1/orgs/${customer.id}/databases`, { name });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    const { user, password } = created.json as { user: string; password: string };
    await until('the database', async () => (await customer.client.get(`/v1/databases/${created.json.id}`)).json.status === 'active');
    assert.match((await getFromNode(panel.webPort, live.domain, '/info.php')).body, /^php 8\.2/, 'the site runs PHP before');
    assert.equal((await asDbUser(panel, user, password, 'SELECT 1')).code, 0, 'the database user connects before');

    // one site suspended on its own, by the reseller
    assert.equal((await reseller.client.post(`/v1/sites/${own.id}/suspend`)).status, 200, 'site suspension');
    await settledSite(reseller.client, own.id, 'suspended');

    const s = await provider.client.post(`/v1/orgs/${reseller.id}/suspend`);
    assert.equal(s.status, 200, JSON.stringify(s.json));
    assert.deepEqual(s.json.applying, { sites: 2, databases: 1 }, 'both sites and the database get a node operation');
    const seen = await settledSite(provider.client, live.id, 'suspended');
    assert.equal(seen.org_suspended, true, 'marked as suspended by an org above');
    assert.equal(seen.suspended, false, 'not suspended on its own');
    const page = await getFromNode(panel.webPort, live.domain, '/info.php');
    assert.equal(page.status, 503, 'info.php is not run');
    assert.match(page.body, /This site is suspended/, 'the suspended page');
    await until('the database user locked', async () => (await asDbUser(panel, user, password, 'SELECT 1')).code !== 0);
    const refused = await asDbUser(panel, user, password, 'SELECT 1');
    assert.match(refused.stderr, /locked/i, `MariaDB says the account is locked: ${refused.stderr}`);

    const r = await provider.client.post(`/v1/orgs/${reseller.id}/reactivate`);
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.deepEqual(r.json.applying, { sites: 2, databases: 1 }, 'the same sites and database come back');
    await settledSite(provider.client, live.id, 'active');
    assert.match((await getFromNode(panel.webPort, live.domain, '/info.php')).body, /^php 8\.2/, 'PHP runs again');
    const stays = await settledSite(provider.client, own.id, 'suspended');
    assert.equal(stays.org_suspended, false, 'no longer marked by the org');
    assert.equal((await getFromNode(panel.webPort, own.domain, '/info.php')).status, 503, 'the site suspended on its own stays suspended');
    await until('the database user unlocked', async () => (await asDbUser(panel, user, password, 'SELECT 1')).code === 0);
  });

  it('a level still suspended further up keeps everything below stopped when a lower level is reactivated', async () => {
    const reseller = await createOrgWithLogin(provider.client, { type: 'reseller' });
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const domain = `${unique('susp')}.example.com`;
    const c = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain });
    await settledSite(customer.client, c.json.id, 'active');
    assert.equal((await reseller.client.post(`/v1/orgs/${customer.id}/suspend`)).status, 200, 'the customer suspended');
    await until('the suspended page', async () => (await getFromNode(panel.webPort, domain)).status === 503);
    assert.equal((await provider.client.post(`/v1/orgs/${reseller.id}/suspend`)).json.applying.sites, 0, 'already stopped: nothing to apply');
    const back = await provider.client.post(`/v1/orgs/${customer.id}/reactivate`);
    assert.equal(back.status, 200, JSON.stringify(back.json));
    assert.equal(back.json.applying.sites, 0, 'the reseller above is still suspended');
    assert.equal((await getFromNode(panel.webPort, domain)).status, 503, 'still the suspended page');
  });
});
