import assert from 'node:assert/strict';
import { createOrgWithLogin, platformAdmin, usePanel, type PanelClient, type Reply } from '../../helpers/panel';

// Packages (spec 2 section 2.4): listed to the orgs below their owner; created, edited and
// deleted with create_packages; assigned by any level above an org, even without that power.

function assertRefused(r: Reply, status: number, code: string, field?: string) {
  assert.equal(r.status, status, JSON.stringify(r.json));
  assert.equal(r.json.error.code, code, `the refusal's error code: ${JSON.stringify(r.json)}`);
  if (field) assert.equal(r.json.error.details.field, field, `the refusal names the field: ${JSON.stringify(r.json)}`);
}

const names = (r: Reply) => r.json.packages.map((p: { name: string }) => p.name);

describe('panel: packages', () => {
  const url = usePanel();
  let admin: PanelClient;
  before(async () => {
    admin = await platformAdmin(url());
  });

  it('creates packages owned by an org holding create_packages, within the owner’s own limits, names unique per owner', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider', limits: { websites: 100 } });
    const reseller = await createOrgWithLogin(provider.client, { type: 'reseller' });
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const created = await provider.client.post(`/v1/orgs/${provider.id}/packages`, { name: ' Basic ', limits: { websites: 10, disk_mb: 2000 }, preferred_region: 'eu-west' });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    assert.equal(created.json.name, 'Basic', 'the name is trimmed');
    assert.equal(created.json.owner_org_id, provider.id, 'the creating org owns the package');
    assert.deepEqual(created.json.limits, { websites: 10, disk_mb: 2000 }, 'the limits are stored as given');
    assert.equal(created.json.preferred_region, 'eu-west', 'the preferred region is stored');
    assert.equal(created.json.required_region, null, 'no required region unless given');

    assertRefused(await provider.client.post(`/v1/orgs/${provider.id}/packages`, { name: 'BASIC', limits: {} }), 409, 'conflict', 'name');
    const over = await provider.client.post(`/v1/orgs/${provider.id}/packages`, { name: 'Big', limits: { websites: 101 } });
    assertRefused(over, 409, 'limit_reached');
    assert.deepEqual([over.json.error.details.limit, over.json.error.details.org_id], ['websites', provider.id], 'the refusal names the websites limit and the owner whose limit it is');

    // without the power: a reseller not granted it, a customer never; created from above for it, too
    const missing = await reseller.client.post(`/v1/orgs/${reseller.id}/packages`, { name: 'Mine', limits: {} });
    assertRefused(missing, 403, 'power_missing');
    assert.equal(missing.json.error.details.power, 'create_packages', 'the refusal names the create_packages power');
    assertRefused(await provider.client.post(`/v1/orgs/${reseller.id}/packages`, { name: 'For it', limits: {} }), 403, 'power_missing');
    assertRefused(await customer.client.post(`/v1/orgs/${customer.id}/packages`, { name: 'Mine', limits: {} }), 403, 'power_missing');
    assertRefused(await customer.client.post(`/v1/orgs/${provider.id}/packages`, { name: 'Mine', limits: {} }), 404, 'not_found');

    // granted: the same name is fine for another owner, still within the reseller's own limits
    await provider.client.put(`/v1/orgs/${reseller.id}/powers`, { powers: ['create_packages'] });
    assert.equal((await reseller.client.post(`/v1/orgs/${reseller.id}/packages`, { name: 'basic', limits: { websites: 100 } })).status, 201, 'a granted reseller may reuse a name another owner has');
    assertRefused(await reseller.client.post(`/v1/orgs/${reseller.id}/packages`, { name: 'Huge', limits: { websites: 1000 } }), 409, 'limit_reached');
    assert.deepEqual(names(await provider.client.get(`/v1/orgs/${reseller.id}/packages`)), ['Basic', 'basic'], "both owners' packages are listed to the reseller");
  });

  it('refuses bad input with 400 naming the field and creates nothing', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const bad: Array<[unknown, string]> = [
      [{ name: '', limits: {} }, 'name'],
      [{ name: '   ', limits: {} }, 'name'],
      [{ name: 'x'.repeat(81), limits: {} }, 'name'],
      [{ name: 42, limits: {} }, 'name'],
      [{ limits: {} }, 'name'],
      [{ name: 'No limits' }, 'limits'],
      [{ name: 'Neg', limits: { websites: -1 } }, 'limits.websites'],
      [{ name: 'Str', limits: { disk_mb: '10' } }, 'limits.disk_mb'],
      [{ name: 'Unknown limit', limits: { planets: 1 } }, 'limits.planets'],
      [{ name: 'Region', limits: {}, required_region: 'Europe West' }, 'required_region'],
      [{ name: 'Extra', limits: {}, colour: 'red' }, 'colour'],
    ];
    for (const [body, field] of bad) assertRefused(await provider.client.post(`/v1/orgs/${provider.id}/packages`, body), 400, 'validation_failed', field);
    assert.deepEqual((await provider.client.get(`/v1/orgs/${provider.id}/packages`)).json.packages, [], 'refused input created no package');
  });

  it('lists to an org the packages owned by it or above it; reads only within the subtree or above it', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const [r1, r2] = [await createOrgWithLogin(provider.client, { type: 'reseller', powers: ['create_packages'] }), await createOrgWithLogin(provider.client, { type: 'reseller', powers: ['create_packages'] })];
    const customer = await createOrgWithLogin(r1.client, { type: 'customer' });
    const pP = (await provider.client.post(`/v1/orgs/${provider.id}/packages`, { name: 'Provider plan', limits: {} })).json;
    const p1 = (await r1.client.post(`/v1/orgs/${r1.id}/packages`, { name: 'R1 plan', limits: {} })).json;
    const p2 = (await r2.client.post(`/v1/orgs/${r2.id}/packages`, { name: 'R2 plan', limits: {} })).json;
    assert.deepEqual(names(await r1.client.get(`/v1/orgs/${r1.id}/packages`)), ['Provider plan', 'R1 plan'], "a reseller sees its own and its provider's packages, not its sibling's");
    assert.deepEqual(names(await r1.client.get(`/v1/orgs/${customer.id}/packages`)), ['Provider plan', 'R1 plan'], "a customer's list is the same as its reseller's");
    assert.deepEqual(names(await provider.client.get(`/v1/orgs/${provider.id}/packages`)), ['Provider plan'], 'the provider does not see packages owned below it');
    assertRefused(await r1.client.get(`/v1/orgs/${provider.id}/packages`), 404, 'not_found');
    assertRefused(await r1.client.get(`/v1/orgs/${r2.id}/packages`), 404, 'not_found');

    assert.equal((await r1.client.get(`/v1/packages/${pP.id}`)).json.name, 'Provider plan', 'owned above: readable');
    assert.equal((await provider.client.get(`/v1/packages/${p2.id}`)).json.name, 'R2 plan', 'owned below: readable');
    assert.equal((await customer.client.get(`/v1/packages/${p1.id}`)).status, 200, 'a customer reads a package owned above it');
    for (const id of [p2.id, 'not-a-uuid', '00000000-0000-0000-0000-000000000000']) assertRefused(await r1.client.get(`/v1/packages/${id}`), 404, 'not_found');
  });

  it('assigns a listed package to an org below, even without create_packages; custom limits are dropped; null returns to custom limits', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const reseller = await createOrgWithLogin(provider.client, { type: 'reseller' });
    const sibling = await createOrgWithLogin(provider.client, { type: 'reseller', powers: ['create_packages'] });
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer', limits: { websites: 3 } });
    const pkg = (await provider.client.post(`/v1/orgs/${provider.id}/packages`, { name: 'Listed', limits: { websites: 8, databases: 2 } })).json;
    const foreign = (await sibling.client.post(`/v1/orgs/${sibling.id}/packages`, { name: 'Not listed', limits: {} })).json;

    const on = await reseller.client.put(`/v1/orgs/${customer.id}/package`, { package_id: pkg.id });
    assert.equal(on.status, 200, JSON.stringify(on.json));
    assert.deepEqual([on.json.source, on.json.package_id], ['package', pkg.id], 'the customer now takes its limits from the package');
    assert.deepEqual(on.json.own, { websites: 8, databases: 2 }, "the customer's own limits are the package's; its custom limits are dropped");
    assert.deepEqual(on.json.effective.websites, { value: 8, set_by: { org_id: customer.id, name: customer.body.name } }, "the effective limit is the package's, set on the customer");
    const listed = await reseller.client.get(`/v1/orgs/${reseller.id}/packages`);
    assert.equal(listed.json.packages[0].orgs_using, 1, 'the package counts the one org using it');

    const off = await reseller.client.put(`/v1/orgs/${customer.id}/package`, { package_id: null });
    assert.deepEqual([off.json.source, off.json.package_id, off.json.own], ['custom', null, {}], 'null returns the customer to custom limits, empty');
    const log = await provider.client.get(`/v1/orgs/${provider.id}/audit`);
    const entries = log.json.entries.filter((e: { action: string }) => e.action === 'org.assign_package');
    assert.deepEqual(entries.map((e: { after: { package_id: string | null } }) => e.after.package_id), [null, pkg.id], 'the audit log has both assignments, newest first');
    assert.deepEqual(entries[1].before, { package_id: null, limits: { websites: 3 } }, "the first assignment's audit entry keeps the custom limits it dropped");

    // not listed above the org, the org itself, outside the subtree, bad input
    assertRefused(await reseller.client.put(`/v1/orgs/${customer.id}/package`, { package_id: foreign.id }), 404, 'not_found');
    assertRefused(await provider.client.put(`/v1/orgs/${customer.id}/package`, { package_id: 'nope' }), 404, 'not_found');
    assertRefused(await admin.put(`/v1/orgs/${provider.id}/package`, { package_id: pkg.id }), 404, 'not_found');
    assertRefused(await reseller.client.put(`/v1/orgs/${reseller.id}/package`, { package_id: pkg.id }), 403, 'forbidden');
    assertRefused(await sibling.client.put(`/v1/orgs/${customer.id}/package`, { package_id: foreign.id }), 404, 'not_found');
    assertRefused(await reseller.client.put(`/v1/orgs/${customer.id}/package`, { package_id: 5 }), 400, 'validation_failed', 'package_id');
    assertRefused(await reseller.client.put(`/v1/orgs/${customer.id}/package`, {}), 400, 'validation_failed', 'package_id');
    assertRefused(await reseller.client.put(`/v1/orgs/${customer.id}/package`, { package_id: null, limits: {} }), 400, 'validation_failed', 'limits');
    assert.equal((await reseller.client.get(`/v1/orgs/${customer.id}`)).json.package_id, null, 'the refusals left the customer without a package');
  });

  it('a package’s required region cannot contradict one set above', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const reseller = await createOrgWithLogin(provider.client, { type: 'reseller', powers: ['create_packages'], required_region: 'eu-west' });
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    assertRefused(await reseller.client.post(`/v1/orgs/${reseller.id}/packages`, { name: 'US', limits: {}, required_region: 'us-east' }), 400, 'validation_failed', 'required_region');
    assert.equal((await reseller.client.post(`/v1/orgs/${reseller.id}/packages`, { name: 'EU', limits: {}, required_region: 'eu-west' })).status, 201, 'a package with the region required above is created');
    const us = (await provider.client.post(`/v1/orgs/${provider.id}/packages`, { name: 'US', limits: {}, required_region: 'us-east' })).json;
    assertRefused(await reseller.client.put(`/v1/orgs/${customer.id}/package`, { package_id: us.id }), 400, 'validation_failed', 'package_id');
    assert.equal((await provider.client.get(`/v1/orgs/${customer.id}`)).json.package_id, null, 'the refused assignment left the customer without a package');
  });

  it('edits by the owner or above with create_packages apply to every org using it, all or nothing, never above the owner’s own limits', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider', limits: { websites: 100 } });
    const reseller = await createOrgWithLogin(provider.client, { type: 'reseller' });
    const other = await createOrgWithLogin(provider.client, { type: 'reseller', powers: ['create_packages'] });
    const [c1, c2] = [await createOrgWithLogin(reseller.client, { type: 'customer' }), await createOrgWithLogin(reseller.client, { type: 'customer' })];
    const pkg = (await provider.client.post(`/v1/orgs/${provider.id}/packages`, { name: 'Shared', limits: { websites: 10 } })).json;
    const otherPkg = (await other.client.post(`/v1/orgs/${other.id}/packages`, { name: 'Other', limits: {} })).json;
    await provider.client.post(`/v1/orgs/${provider.id}/packages`, { name: 'Taken', limits: {} });
    for (const c of [c1, c2]) assert.equal((await reseller.client.put(`/v1/orgs/${c.id}/package`, { package_id: pkg.id })).status, 200, "the reseller assigns the provider's package to its customer");

    const edited = await provider.client.patch(`/v1/packages/${pkg.id}`, { limits: { websites: 20 } });
    assert.equal(edited.status, 200, JSON.stringify(edited.json));
    assert.equal(edited.json.orgs_using, 2, 'the edit reaches both orgs using the package');
    const effectiveWebsites = async () => Promise.all([c1, c2].map(async (c) => (await c.client.get(`/v1/orgs/${c.id}/limits`)).json.effective.websites.value));
    assert.deepEqual(await effectiveWebsites(), [20, 20], "both customers' effective limit is the edited one");

    assertRefused(await provider.client.patch(`/v1/packages/${pkg.id}`, { limits: { websites: 101 } }), 409, 'limit_reached');
    assertRefused(await provider.client.patch(`/v1/packages/${pkg.id}`, { name: 'taken' }), 409, 'conflict', 'name');
    // one org using it sits under a required region: the whole edit is refused, limits included
    await provider.client.put(`/v1/orgs/${reseller.id}/regions`, { required_region: 'eu-west' });
    assertRefused(await provider.client.patch(`/v1/packages/${pkg.id}`, { limits: { websites: 30 }, required_region: 'us-east' }), 400, 'validation_failed', 'required_region');
    assert.deepEqual(await effectiveWebsites(), [20, 20], 'the refused edit changed no limit');
    const got = await provider.client.get(`/v1/packages/${pkg.id}`);
    assert.deepEqual([got.json.name, got.json.limits, got.json.required_region], ['Shared', { websites: 20 }, null], 'the refused edits left name, limits and region as they were');

    // by whom: not from below the owner (403 when it is listed to it, 404 when not), not without the power
    assertRefused(await reseller.client.patch(`/v1/packages/${pkg.id}`, { name: 'Mine now' }), 403, 'forbidden');
    assertRefused(await reseller.client.del(`/v1/packages/${pkg.id}`), 403, 'forbidden');
    assertRefused(await reseller.client.patch(`/v1/packages/${otherPkg.id}`, { name: 'Mine now' }), 404, 'not_found');
    await provider.client.put(`/v1/orgs/${other.id}/powers`, { powers: [] });
    assertRefused(await other.client.patch(`/v1/packages/${otherPkg.id}`, { name: 'Renamed' }), 403, 'power_missing');
    assert.equal((await provider.client.patch(`/v1/packages/${otherPkg.id}`, { name: 'Renamed from above' })).json.name, 'Renamed from above', 'the provider renames a package owned below it');

    // bad input changes nothing
    for (const [body, field] of [
      [{ limits: { websites: -5 } }, 'limits.websites'],
      [{ name: '' }, 'name'],
      [{ owner_org_id: reseller.id }, 'owner_org_id'],
    ] as Array<[unknown, string]>) {
      assertRefused(await provider.client.patch(`/v1/packages/${pkg.id}`, body), 400, 'validation_failed', field);
    }
    const log = (await provider.client.get(`/v1/orgs/${provider.id}/audit`)).json.entries;
    const edits = log.filter((e: { action: string; target_id: string }) => e.action === 'package.update' && e.target_id === pkg.id);
    assert.equal(edits.length, 1, 'refused edits leave no entry');
    assert.deepEqual([edits[0].before.limits, edits[0].after.limits], [{ websites: 10 }, { websites: 20 }], 'the audit entry has the limits before and after the edit');
  });

  it('deletes a package only when no org uses it', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const pkg = (await provider.client.post(`/v1/orgs/${provider.id}/packages`, { name: 'Doomed', limits: {} })).json;
    await provider.client.put(`/v1/orgs/${customer.id}/package`, { package_id: pkg.id });
    assertRefused(await provider.client.del(`/v1/packages/${pkg.id}`), 409, 'conflict');
    assertRefused(await customer.client.del(`/v1/packages/${pkg.id}`), 403, 'forbidden');
    // setting limits by hand detaches the customer, so the package is unused
    await provider.client.put(`/v1/orgs/${customer.id}/limits`, { limits: { websites: 1 } });
    assert.equal((await provider.client.del(`/v1/packages/${pkg.id}`)).status, 204, 'an unused package is deleted');
    assertRefused(await provider.client.get(`/v1/packages/${pkg.id}`), 404, 'not_found');
    const entry = (await provider.client.get(`/v1/orgs/${provider.id}/audit`)).json.entries.find((e: { action: string }) => e.action === 'package.delete');
    assert.equal(entry.before.name, 'Doomed', "the delete is audited with the package's name");
  });
});
