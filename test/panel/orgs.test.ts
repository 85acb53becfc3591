import assert from 'node:assert/strict';
import { createOrgWithLogin, platformAdmin, usePanel } from '../helpers/panel';

describe('panel: org tree', () => {
  const url = usePanel();

  it('lets the platform admin create a provider, which creates a reseller and a customer', async () => {
    const admin = await platformAdmin(url());
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const reseller = await createOrgWithLogin(provider.client, { type: 'reseller' });
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const list = await provider.client.get('/v1/orgs');
    assert.equal(list.status, 200);
    assert.deepEqual(list.json.orgs.map((o: { id: string }) => o.id), [reseller.id, customer.id]);
    const got = await admin.get(`/v1/orgs/${customer.id}`);
    assert.equal(got.status, 200);
    assert.equal(got.json.type, 'customer');
    // outside the caller's subtree: 404
    assert.equal((await customer.client.get(`/v1/orgs/${provider.id}`)).status, 404);
  });
});
