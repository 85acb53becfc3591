import assert from 'node:assert/strict';
import { createOrgWithLogin, platformAdmin, unique, usePanel, type PanelClient, type Reply } from '../../helpers/panel';

// Limits, delegated powers and regions of an org (spec 2 sections 2.1-2.3), and counted limits
// under concurrent creates.

/** The audit entry of `action` on `targetId`, newest first, as the level above reads it. */
async function auditEntry(by: PanelClient, orgId: string, action: string, targetId: string) {
  const log = await by.get(`/v1/orgs/${orgId}/audit`);
  return log.json.entries.find((e: { action: string; target_id: string }) => e.action === action && e.target_id === targetId);
}

const customerBody = () => ({ type: 'customer', name: unique('cust '), login: { username: unique('c'), password: 'a long enough password' } });

function assertRefused(r: Reply, status: number, code: string, field?: string) {
  assert.equal(r.status, status, JSON.stringify(r.json));
  assert.equal(r.json.error.code, code, `refused with ${code}: ${JSON.stringify(r.json)}`);
  if (field) assert.equal(r.json.error.details.field, field, `the refusal names the field ${field}`);
}

describe('panel: limits, powers and regions', () => {
  const url = usePanel();
  let admin: PanelClient;
  before(async () => {
    admin = await platformAdmin(url());
  });

  it('reads own limits and their source, the effective value with the level that sets it, and counted usage in percent', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider', limits: { customer_accounts: 10, disk_mb: 5000 } });
    const reseller = await createOrgWithLogin(provider.client, { type: 'reseller', limits: { customer_accounts: 4, memory_mb: 1024 } });
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const r = await provider.client.get(`/v1/orgs/${reseller.id}/limits`);
    assert.equal(r.status, 200, `the provider reads the reseller's limits: ${JSON.stringify(r.json)}`);
    assert.equal(r.json.source, 'custom', 'limits set by hand are custom');
    assert.equal(r.json.package_id, null, 'custom limits: on no package');
    assert.deepEqual(r.json.own, { customer_accounts: 4, memory_mb: 1024 }, 'the reseller\'s own limits');
    assert.deepEqual(r.json.effective.customer_accounts, { value: 4, set_by: { org_id: reseller.id, name: reseller.body.name } }, 'customer_accounts set by the reseller itself');
    assert.deepEqual(r.json.effective.disk_mb, { value: 5000, set_by: { org_id: provider.id, name: provider.body.name } }, 'disk_mb set by the provider above');
    assert.deepEqual(r.json.effective.cpu_percent, { value: null, set_by: null }, 'a limit no level sets is unlimited');
    assert.deepEqual(r.json.usage.customer_accounts, { used: 1, limit: 4, percent: 25 }, 'one customer of four: 25 percent');
    assert.deepEqual(r.json.usage.resellers, { used: 0, limit: null, percent: null }, 'no resellers, no limit');
    // the org reads its own; below reads nothing above it
    assert.equal((await reseller.client.get(`/v1/orgs/${reseller.id}/limits`)).status, 200, 'an org reads its own limits');
    assert.equal((await customer.client.get(`/v1/orgs/${customer.id}/limits`)).json.effective.disk_mb.value, 5000, 'a customer sees the provider\'s disk limit as its effective one');
    assertRefused(await customer.client.get(`/v1/orgs/${reseller.id}/limits`), 404, 'not_found');
  });

  it('sets custom limits only from above, never above the editor’s own, detaching the org from its package, audited', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider', limits: { customer_accounts: 10 } });
    const reseller = await createOrgWithLogin(provider.client, { type: 'reseller' });
    assertRefused(await reseller.client.put(`/v1/orgs/${reseller.id}/limits`, { limits: { websites: 1 } }), 403, 'forbidden');
    const over = await provider.client.put(`/v1/orgs/${reseller.id}/limits`, { limits: { customer_accounts: 11 } });
    assertRefused(over, 409, 'limit_reached');
    assert.equal(over.json.error.details.limit, 'customer_accounts', 'the refusal names the limit');
    assert.equal(over.json.error.details.org_id, provider.id, 'the refusal names the org whose limit binds');
    assert.deepEqual((await provider.client.get(`/v1/orgs/${reseller.id}/limits`)).json.own, {}, 'the refused change set nothing');

    // on a package: limits set by hand detach it
    const pkg = await provider.client.post(`/v1/orgs/${provider.id}/packages`, { name: 'Small', limits: { websites: 7 } });
    assert.equal(pkg.status, 201, 'the package is created');
    assert.equal((await provider.client.put(`/v1/orgs/${reseller.id}/package`, { package_id: pkg.json.id })).json.source, 'package', 'on the package');
    const set = await provider.client.put(`/v1/orgs/${reseller.id}/limits`, { limits: { customer_accounts: 2, websites: 3, mailboxes: 9 } });
    assert.equal(set.status, 200, JSON.stringify(set.json));
    assert.equal(set.json.source, 'custom', 'set by hand: custom');
    assert.equal(set.json.package_id, null, 'detached from its package');
    assert.deepEqual(set.json.own, { customer_accounts: 2, websites: 3, mailboxes: 9 }, 'the limits set by hand');
    assert.equal((await provider.client.get(`/v1/orgs/${reseller.id}`)).json.package_id, null, 'the org no longer names a package');
    const entry = await auditEntry(provider.client, provider.id, 'org.set_limits', reseller.id);
    assert.deepEqual(entry.before, { package_id: pkg.json.id, limits: { websites: 7 } }, 'audit: before, the package and its limits');
    assert.deepEqual(entry.after, { package_id: null, limits: { customer_accounts: 2, websites: 3, mailboxes: 9 } }, 'audit: after, no package and the new limits');
    assert.equal(entry.actor_username, provider.username, 'audit: the actor');

    // the platform has no limits of its own, but the provider's still binds below it
    const wide = await admin.put(`/v1/orgs/${reseller.id}/limits`, { limits: { customer_accounts: 50 } });
    assert.deepEqual(wide.json.effective.customer_accounts, { value: 10, set_by: { org_id: provider.id, name: provider.body.name } }, 'the provider\'s limit still binds below the platform\'s change');
  });

  it('refuses bad limits with 400 naming the field and changes nothing; ids outside the subtree are 404', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const other = await createOrgWithLogin(admin, { type: 'provider' });
    const reseller = await createOrgWithLogin(provider.client, { type: 'reseller', limits: { websites: 5 } });
    const bad: Array<[unknown, string]> = [
      [{ limits: { websites: -1 } }, 'limits.websites'],
      [{ limits: { websites: 1.5 } }, 'limits.websites'],
      [{ limits: { websites: '3' } }, 'limits.websites'],
      [{ limits: { planets: 3 } }, 'limits.planets'],
      [{ limits: [] }, 'limits'],
      [{ limits: {}, package_id: null }, 'package_id'],
      [{}, 'limits'],
    ];
    for (const [body, field] of bad) assertRefused(await provider.client.put(`/v1/orgs/${reseller.id}/limits`, body), 400, 'validation_failed', field);
    assert.deepEqual((await provider.client.get(`/v1/orgs/${reseller.id}/limits`)).json.own, { websites: 5 }, 'no refused change set anything');
    for (const id of [reseller.id, provider.id, 'not-a-uuid', '00000000-0000-0000-0000-000000000000']) {
      assertRefused(await other.client.put(`/v1/orgs/${id}/limits`, { limits: {} }), 404, 'not_found');
      assertRefused(await other.client.get(`/v1/orgs/${id}/limits`), 404, 'not_found');
    }
  });

  it('grants a reseller only the delegable powers its parent holds; revoking from a parent removes them below', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const top = await createOrgWithLogin(provider.client, { type: 'reseller', powers: ['create_subresellers', 'create_packages'] });
    const sub = await createOrgWithLogin(top.client, { type: 'reseller' });
    const customer = await createOrgWithLogin(top.client, { type: 'customer' });

    const lacking = await top.client.put(`/v1/orgs/${sub.id}/powers`, { powers: ['set_branding'] });
    assertRefused(lacking, 403, 'power_missing');
    assert.equal(lacking.json.error.details.power, 'set_branding', 'the refusal names the missing power');
    const granted = await top.client.put(`/v1/orgs/${sub.id}/powers`, { powers: ['create_packages'] });
    assert.equal(granted.status, 200, JSON.stringify(granted.json));
    assert.deepEqual(granted.json, { granted: ['create_packages'], effective: ['create_packages'] }, 'granted and effective');
    assert.equal((await sub.client.post(`/v1/orgs/${sub.id}/packages`, { name: 'Sub plan', limits: {} })).status, 201, 'the granted power works');

    const revoked = await provider.client.put(`/v1/orgs/${top.id}/powers`, { powers: ['create_subresellers'] });
    assert.deepEqual(revoked.json.effective, ['create_subresellers'], 'the revoked power is gone');
    const below = await provider.client.get(`/v1/orgs/${sub.id}`);
    assert.deepEqual(below.json.powers, { granted: ['create_packages'], effective: [] }, 'granted below but no longer effective');
    assertRefused(await sub.client.post(`/v1/orgs/${sub.id}/packages`, { name: 'Another', limits: {} }), 403, 'power_missing');
    const entry = await auditEntry(provider.client, provider.id, 'org.set_powers', top.id);
    assert.deepEqual([entry.before.powers, entry.after.powers], [['create_subresellers', 'create_packages'], ['create_subresellers']], 'audit: powers before and after');

    // only resellers, only from above, only known powers; outside the subtree 404
    assertRefused(await top.client.put(`/v1/orgs/${customer.id}/powers`, { powers: [] }), 400, 'validation_failed', 'powers');
    assertRefused(await top.client.put(`/v1/orgs/${top.id}/powers`, { powers: [] }), 403, 'forbidden');
    assertRefused(await provider.client.put(`/v1/orgs/${top.id}/powers`, { powers: ['fly'] }), 400, 'validation_failed', 'powers.0');
    assertRefused(await provider.client.put(`/v1/orgs/${top.id}/powers`, { powers: 'create_packages' }), 400, 'validation_failed', 'powers');
    assertRefused(await provider.client.put(`/v1/orgs/${top.id}/powers`, { powers: [], extra: 1 }), 400, 'validation_failed', 'extra');
    assertRefused(await sub.client.put(`/v1/orgs/${top.id}/powers`, { powers: [] }), 404, 'not_found');
    assert.deepEqual((await provider.client.get(`/v1/orgs/${top.id}`)).json.powers.granted, ['create_subresellers'], 'the refused changes changed nothing');
  });

  it('sets regions from above; a required region set above cannot be changed below (400); null clears', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const reseller = await createOrgWithLogin(provider.client, { type: 'reseller' });
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const set = await provider.client.put(`/v1/orgs/${reseller.id}/regions`, { required_region: 'eu-west', preferred_region: 'eu-west' });
    assert.equal(set.status, 200, JSON.stringify(set.json));
    assert.equal(set.json.required_by, reseller.id, 'the reseller requires the region');

    assertRefused(await reseller.client.put(`/v1/orgs/${customer.id}/regions`, { required_region: 'us-east' }), 400, 'validation_failed', 'required_region');
    assertRefused(await reseller.client.put(`/v1/orgs/${reseller.id}/regions`, { required_region: 'us-east' }), 403, 'forbidden');
    const hint = await reseller.client.put(`/v1/orgs/${customer.id}/regions`, { preferred_region: 'eu-north', required_region: 'eu-west' });
    assert.equal(hint.status, 200, `the reseller sets its customer's regions: ${JSON.stringify(hint.json)}`);
    assert.deepEqual(hint.json.own, { preferred_region: 'eu-north', required_region: 'eu-west' }, 'the customer\'s own regions');
    const shown = await customer.client.get(`/v1/orgs/${customer.id}`);
    assert.equal(shown.json.regions.required_region, 'eu-west', 'the region required above binds');
    assert.equal(shown.json.regions.required_by, reseller.id, 'the highest level that requires it binds');
    assert.equal(shown.json.regions.preferred_region, 'eu-west', 'a required region is also the preferred one');

    // absent fields are kept; null clears
    assert.deepEqual((await provider.client.put(`/v1/orgs/${reseller.id}/regions`, { required_region: null })).json.own, { preferred_region: 'eu-west', required_region: null }, 'null clears the required region, the preferred one is kept');
    const moved = await reseller.client.put(`/v1/orgs/${customer.id}/regions`, { required_region: 'us-east' });
    assert.equal(moved.json.required_region, 'us-east', 'a region set above cleared, the reseller may require another');
    const entry = await auditEntry(reseller.client, reseller.id, 'org.set_regions', customer.id);
    assert.deepEqual([entry.before.required_region, entry.after.required_region], ['eu-west', 'us-east'], 'audit: the required region before and after');

    for (const [body, field] of [
      [{ required_region: 'EU West' }, 'required_region'],
      [{ preferred_region: 7 }, 'preferred_region'],
      [{ region: 'eu' }, 'region'],
    ] as Array<[unknown, string]>) {
      assertRefused(await reseller.client.put(`/v1/orgs/${customer.id}/regions`, body), 400, 'validation_failed', field);
    }
    assert.deepEqual((await reseller.client.get(`/v1/orgs/${customer.id}`)).json.regions.own, { preferred_region: 'eu-north', required_region: 'us-east' }, 'the refused changes changed nothing');
    assertRefused(await customer.client.put(`/v1/orgs/${reseller.id}/regions`, { required_region: null }), 404, 'not_found');
  });

  it('20 parallel creations under a reseller limited to 5 customer accounts create exactly 5', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const reseller = await createOrgWithLogin(provider.client, { type: 'reseller' });
    assert.equal((await provider.client.put(`/v1/orgs/${reseller.id}/limits`, { limits: { customer_accounts: 5 } })).status, 200, 'the reseller limited to 5 customer accounts');
    const replies = await Promise.all(Array.from({ length: 20 }, () => reseller.client.post('/v1/orgs', customerBody())));
    assert.equal(replies.filter((r) => r.status === 201).length, 5, 'exactly 5 created');
    for (const r of replies.filter((x) => x.status !== 201)) {
      assertRefused(r, 409, 'limit_reached');
      assert.equal(r.json.error.details.limit, 'customer_accounts', 'the refusal names the limit');
      assert.equal(r.json.error.details.org_id, reseller.id, 'the refusal names the reseller whose limit binds');
      assert.match(r.json.error.message, /reseller/, 'the message names the reseller level');
    }
    assert.deepEqual((await provider.client.get(`/v1/orgs/${reseller.id}/limits`)).json.usage.customer_accounts, { used: 5, limit: 5, percent: 100 }, '5 of 5 used');
  });

  it('the same when the binding limit is the provider’s, two levels up, with creations spread over two resellers', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider', limits: { customer_accounts: 5 } });
    const resellers = [await createOrgWithLogin(provider.client, { type: 'reseller' }), await createOrgWithLogin(provider.client, { type: 'reseller' })];
    const replies = await Promise.all(Array.from({ length: 20 }, (_, i) => resellers[i % 2].client.post('/v1/orgs', customerBody())));
    assert.equal(replies.filter((r) => r.status === 201).length, 5, 'exactly 5 created');
    for (const r of replies.filter((x) => x.status !== 201)) {
      assertRefused(r, 409, 'limit_reached');
      assert.equal(r.json.error.details.limit, 'customer_accounts', 'the refusal names the limit');
      assert.equal(r.json.error.details.org_id, provider.id, 'the refusal names the provider whose limit binds');
      assert.match(r.json.error.message, /provider/, 'the message names the provider level');
    }
    const usage = await admin.get(`/v1/orgs/${provider.id}/limits`);
    assert.equal(usage.json.usage.customer_accounts.used, 5, '5 used under the provider');
  });
});
