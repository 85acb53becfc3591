import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { env } from '../../setup/env';
import { createOrgWithLogin, platformAdmin, usePanel, type PanelClient } from '../../helpers/panel';

describe('panel: declared capacity', () => {
  const url = usePanel();
  let admin: PanelClient;
  before(async () => {
    admin = await platformAdmin(url());
  });
  afterEach(async () => {
    await env.db('panel_capacity').delete();
  });

  const customer = (by: PanelClient, parent: string, limits: Record<string, number>) =>
    by.post('/v1/orgs', { type: 'customer', parent_id: parent, name: 'cap', limits, login: { username: `cap${randomUUID().slice(0, 8)}`, password: 'a long enough password' } });

  it('shows declared, allowed with overcommit and committed; refuses accounts, limits and packages above it; clearing turns it off', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    // Every existing customer of the shared test database is capped here, so new ones are the only change.
    await env.db('panel_orgs').where({ type: 'customer' }).update({ limits: JSON.stringify({ cpu_percent: 1, memory_mb: 1, disk_mb: 1 }), package_id: null });
    const base = (await admin.get('/v1/cluster/capacity')).json.resources.cpu_percent.committed as number;

    const put = await admin.put('/v1/cluster/capacity', { cpu_percent: base + 200, memory_mb: 1_000_000, disk_mb: 1_000_000, overcommit_percent: 150 });
    assert.equal(put.status, 200, JSON.stringify(put.json));
    assert.equal(put.json.resources.cpu_percent.allowed, Math.floor(((base + 200) * 150) / 100), 'allowed is the declared CPU times the overcommit percentage, rounded down');

    const allowedRoom = put.json.resources.cpu_percent.allowed - base;
    const ok = await customer(provider.client, provider.id, { cpu_percent: allowedRoom - 10, memory_mb: 10, disk_mb: 10 });
    assert.equal(ok.status, 201, JSON.stringify(ok.json));
    const over = await customer(provider.client, provider.id, { cpu_percent: 20, memory_mb: 10, disk_mb: 10 });
    assert.equal(over.status, 409, 'an account above the allowed CPU is refused with 409');
    assert.equal(over.json.error.code, 'capacity_exceeded', 'the refusal is capacity_exceeded');
    assert.equal(over.json.error.details.resource, 'cpu_percent', 'the refusal names the CPU resource');
    const uncapped = await customer(provider.client, provider.id, { memory_mb: 10, disk_mb: 10 });
    assert.equal(uncapped.json.error.code, 'capacity_exceeded', 'an account with no CPU cap is refused while CPU is declared');

    // raising an existing account's limits above the allowed amount is refused too, and changes nothing
    const raise = await provider.client.put(`/v1/orgs/${ok.json.id}/limits`, { limits: { cpu_percent: allowedRoom + 50, memory_mb: 10, disk_mb: 10 } });
    assert.equal(raise.json.error.code, 'capacity_exceeded', 'raising limits above the allowed amount is refused as capacity_exceeded');
    assert.equal((await env.db('panel_orgs').where({ id: ok.json.id }).first()).limits.cpu_percent, allowedRoom - 10, 'the refused raise leaves the stored CPU limit unchanged');

    // a package whose cap alone is above the allowed amount cannot be created
    const pkg = await provider.client.post(`/v1/orgs/${provider.id}/packages`, { name: 'huge', limits: { cpu_percent: put.json.resources.cpu_percent.allowed + 1 } });
    assert.equal(pkg.json.error.code, 'capacity_exceeded', 'a package whose cap alone is above the allowed amount is refused');

    const table = (await admin.get('/v1/cluster/capacity')).json;
    assert.equal(table.resources.cpu_percent.committed, base + allowedRoom - 10, 'committed counts the accepted account\'s CPU');

    const cleared = await admin.del('/v1/cluster/capacity');
    assert.equal(cleared.json.declared, false, 'after clearing, capacity is no longer declared');
    assert.equal((await customer(provider.client, provider.id, { cpu_percent: 100_000 })).status, 201, 'no declaration, no check');
  });

  it('concurrent account creations never take committed above the allowed amount', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    await env.db('panel_orgs').where({ type: 'customer' }).update({ limits: JSON.stringify({ cpu_percent: 1 }), package_id: null });
    const base = (await admin.get('/v1/cluster/capacity')).json.resources.cpu_percent.committed as number;
    await admin.put('/v1/cluster/capacity', { cpu_percent: base + 500 });
    const results = await Promise.all(Array.from({ length: 10 }, () => customer(provider.client, provider.id, { cpu_percent: 100 })));
    assert.equal(results.filter((r) => r.status === 201).length, 5, 'exactly five of ten concurrent accounts fit the room left');
    assert.ok(results.filter((r) => r.status !== 201).every((r) => r.json.error.code === 'capacity_exceeded'), `the refused ones are capacity_exceeded: ${JSON.stringify(results.filter((r) => r.status !== 201).map((r) => r.json))}`);
    assert.equal((await admin.get('/v1/cluster/capacity')).json.resources.cpu_percent.committed, base + 500, 'committed ends exactly at the allowed amount');
  });

  it('is a cluster page: other logins get 404, and bad declarations name the field', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    assert.equal((await provider.client.get('/v1/cluster/capacity')).status, 404, 'a provider login gets 404 on the cluster capacity page');
    assert.equal((await provider.client.put('/v1/cluster/capacity', { cpu_percent: 100 })).status, 404, 'a provider login cannot declare capacity (404)');
    assert.equal((await admin.put('/v1/cluster/capacity', { cpu_percent: -1 })).json.error.details.field, 'cpu_percent', 'a negative CPU declaration names cpu_percent');
    assert.equal((await admin.put('/v1/cluster/capacity', { cpu_percent: 100, overcommit_percent: 50 })).json.error.details.field, 'overcommit_percent', 'an overcommit below 100 names overcommit_percent');
    assert.equal((await admin.put('/v1/cluster/capacity', {})).json.error.details.field, 'cpu_percent', 'an empty declaration names the missing cpu_percent');
    assert.equal((await admin.get('/v1/cluster/capacity')).json.declared, false, 'refused declarations leave capacity undeclared');
  });
});
