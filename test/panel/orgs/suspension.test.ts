import assert from 'node:assert/strict';
import { startPanelChild, type PanelChild } from '../../helpers/panel-child';
import { createOrgWithLogin, PanelClient, PASSWORD, platformAdmin, usePanel } from '../../helpers/panel';
import { env } from '../../setup/env';

// Spec 2 sections 1.4 and 3: if an org is suspended, its logins and everything below stop working
// on their next request, on every API process (nothing is cached); nothing is deleted; reactivation
// brings them back with the same sessions.

describe('panel: suspension cascades across API processes', function () {
  const urlA = usePanel();
  let b: PanelChild | null = null;

  before(async function () {
    this.timeout(60_000);
    b = await startPanelChild();
  });
  after(async function () {
    this.timeout(20_000);
    await b?.close();
  });

  it('suspending a reseller on process A refuses its customers and sub-reseller customers on process B at once; reactivation restores them; nothing is deleted', async () => {
    const admin = await platformAdmin(urlA());
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const reseller = await createOrgWithLogin(provider.client, { type: 'reseller', powers: ['create_subresellers'] });
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const sub = await createOrgWithLogin(reseller.client, { type: 'reseller' });
    const subCustomer = await createOrgWithLogin(sub.client, { type: 'customer' });
    const token = (await customer.client.post('/v1/account/tokens', { name: 'on B' })).json.token as string;
    assert.match(token, /^pnl_/, 'an API token starts with pnl_');

    // Signed in on process B (the passwords were changed on A).
    const onB = async (username: string) => {
      const c = new PanelClient(b!.url);
      const r = await c.signIn(username, PASSWORD);
      assert.equal(r.status, 200, JSON.stringify(r.json));
      return c;
    };
    const clientsB = {
      customer: await onB(customer.username),
      subCustomer: await onB(subCustomer.username),
      sub: await onB(sub.username),
      reseller: await onB(reseller.username),
      provider: await onB(provider.username),
      customerToken: new PanelClient(b!.url, token),
    };
    const own = { customer: customer.id, subCustomer: subCustomer.id, sub: sub.id, reseller: reseller.id, provider: provider.id, customerToken: customer.id };
    for (const [name, c] of Object.entries(clientsB)) {
      assert.equal((await c.get(`/v1/orgs/${own[name as keyof typeof own]}`)).status, 200, `${name} before the suspension`);
    }
    const sessionsBefore = await env.db('panel_sessions').whereIn('login_id', env.db('panel_logins').whereIn('org_id', [reseller.id, customer.id, sub.id, subCustomer.id]).select('id')).count<{ count: string }[]>('* as count');

    // Suspended on A ...
    const s = await provider.client.post(`/v1/orgs/${reseller.id}/suspend`);
    assert.equal(s.status, 200, 'the provider suspends the reseller on A');
    assert.equal(s.json.status, 'suspended', 'the reseller is suspended');

    // ... refused on B on the very next request: the reseller, its customer, its sub-reseller and
    // the sub-reseller's customer, by session or API token, and a new sign-in.
    for (const name of ['customer', 'subCustomer', 'sub', 'reseller', 'customerToken'] as const) {
      const r = await clientsB[name].get(`/v1/orgs/${own[name]}`);
      assert.equal(r.status, 403, `${name} after the suspension`);
      assert.equal(r.json.error.code, 'suspended', `${name} is refused as suspended`);
      assert.equal((await clientsB[name].get('/v1/account')).json.error.code, 'suspended', `${name} cannot read its account once suspended`);
    }
    const again = await new PanelClient(b!.url).signIn(subCustomer.username, PASSWORD);
    assert.equal(again.status, 403, 'a new sign-in of a suspended customer is refused');
    assert.equal(again.json.error.code, 'suspended', 'the sign-in is refused as suspended');
    assert.equal(again.headers.get('set-cookie'), null, 'a refused sign-in sets no cookie');
    // The level above is not affected, and sees the suspended reseller and everything below it.
    const list = await clientsB.provider.get(`/v1/orgs?root=${reseller.id}`);
    assert.equal(list.status, 200, 'the provider lists the orgs below the suspended reseller');
    assert.deepEqual(new Set(list.json.orgs.map((o: { id: string }) => o.id)), new Set([customer.id, sub.id, subCustomer.id]), 'the provider sees everything below the suspended reseller');
    assert.equal((await clientsB.provider.get(`/v1/orgs/${reseller.id}`)).json.status, 'suspended', 'the provider sees the reseller as suspended');

    // Reactivated on A: the same sessions and token work again on B.
    assert.equal((await provider.client.post(`/v1/orgs/${reseller.id}/reactivate`)).status, 200, 'the provider reactivates the reseller on A');
    for (const [name, c] of Object.entries(clientsB)) {
      assert.equal((await c.get(`/v1/orgs/${own[name as keyof typeof own]}`)).status, 200, `${name} after the reactivation`);
    }
    // Nothing was deleted: orgs, logins and sessions are all still there.
    for (const id of [reseller.id, customer.id, sub.id, subCustomer.id]) {
      const got = await clientsB.provider.get(`/v1/orgs/${id}`);
      assert.equal(got.status, 200, `org ${id} is still there after the reactivation`);
      assert.equal(got.json.status, 'active', `org ${id} is active again`);
      assert.equal(got.json.counts.logins, 1, `org ${id} keeps its login`);
    }
    const sessionsAfter = await env.db('panel_sessions').whereIn('login_id', env.db('panel_logins').whereIn('org_id', [reseller.id, customer.id, sub.id, subCustomer.id]).select('id')).count<{ count: string }[]>('* as count');
    assert.equal(sessionsAfter[0].count, sessionsBefore[0].count, 'no session was deleted by the suspension');
  });

  it('suspending a single login on B refuses its session on A at once', async () => {
    const admin = await platformAdmin(urlA());
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const providerOnB = new PanelClient(b!.url);
    assert.equal((await providerOnB.signIn(provider.username, PASSWORD)).status, 200, 'the provider signs in on B');
    const me = (await customer.client.get('/v1/account')).json.login.id;
    assert.equal((await providerOnB.post(`/v1/logins/${me}/suspend`)).status, 200, "the provider suspends the customer's login on B");
    const r = await customer.client.get(`/v1/orgs/${customer.id}`);
    assert.equal(r.status, 403, "the suspended login's session is refused on A");
    assert.equal(r.json.error.code, 'suspended', 'the session is refused as suspended');
    assert.equal((await providerOnB.post(`/v1/logins/${me}/reactivate`)).status, 200, 'the provider reactivates the login on B');
    assert.equal((await customer.client.get(`/v1/orgs/${customer.id}`)).status, 200, "the reactivated login's session works again on A");
  });
});
