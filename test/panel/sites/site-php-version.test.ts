import assert from 'node:assert/strict';
import { createOrgWithLogin, platformAdmin, startHostingPanel, unique, type HostingPanel } from '../../helpers/panel';
import { env } from '../../setup/env';

// Issue 32 item 8: a PHP version the site's node lacks is refused at once with 400 naming the
// versions the node offers (its reported facts), instead of a 201 that ends `failed` on the node.

describe('panel: a PHP version the node lacks', function () {
  this.timeout(120_000);
  let panel: HostingPanel;

  before(async function () {
    this.timeout(90_000);
    panel = await startHostingPanel();
  });
  after(async () => {
    await panel?.close();
  });

  it('is refused with 400 naming the versions the node offers, and nothing is created', async () => {
    const admin = await platformAdmin(panel.url);
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const domain = `${unique('php')}.example.com`;
    const r = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain, php_version: '8.3' });
    assert.equal(r.status, 400, JSON.stringify(r.json));
    assert.equal(r.json.error.code, 'validation_failed', 'the product envelope');
    assert.equal(r.json.error.details.field, 'php_version', 'names the field');
    assert.match(r.json.error.details.detail, /PHP 8\.3 is not available on node "hosting"; it offers 8\.2/, 'names the versions offered');
    assert.equal(await env.db('panel_sites').where({ domain }).first(), undefined, 'no site row');
    assert.equal(await env.db('panel_domains').where({ domain }).first(), undefined, 'the domain is not taken');
    const ok = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain, php_version: '8.2' });
    assert.equal(ok.status, 201, JSON.stringify(ok.json));
  });
});
