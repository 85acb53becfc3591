import assert from 'node:assert/strict';
import { env } from '../../setup/env';
import { createOrgWithLogin, platformAdmin, signInFresh, unique, usePanel, type PanelClient } from '../../helpers/panel';

describe('panel: org tree', () => {
  const url = usePanel();
  let admin: PanelClient;
  before(async () => {
    admin = await platformAdmin(url());
  });

  it('platform > provider > reseller > customer, each listed in the subtree of the levels above only', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const reseller = await createOrgWithLogin(provider.client, { type: 'reseller' });
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const list = await provider.client.get('/v1/orgs');
    assert.equal(list.status, 200, `the provider lists its subtree: ${JSON.stringify(list.json)}`);
    assert.deepEqual(list.json.orgs.map((o: { id: string }) => o.id), [reseller.id, customer.id], 'the provider sees the reseller and the customer below it, in tree order');
    assert.deepEqual(list.json.orgs[0].counts, { children: 1, logins: 1 }, 'the reseller counts one org and one login below it');
    const got = await admin.get(`/v1/orgs/${customer.id}`);
    assert.equal(got.status, 200, `the platform admin reads the customer: ${JSON.stringify(got.json)}`);
    assert.equal(got.json.type, 'customer', 'the org is a customer');
    assert.equal(got.json.parent_id, reseller.id, 'the customer\'s parent is the reseller');
    // outside the caller's subtree, or not an id at all: 404, never 403
    assert.equal((await customer.client.get(`/v1/orgs/${provider.id}`)).status, 404, 'the provider above is 404 to the customer');
    assert.equal((await reseller.client.get(`/v1/orgs/${provider.id}`)).status, 404, 'the provider above is 404 to the reseller');
    assert.equal((await reseller.client.get('/v1/orgs/not-a-uuid')).json.error.code, 'not_found', 'an id that is not a UUID is not_found');
    const own = await customer.client.get('/v1/orgs');
    assert.deepEqual(own.json.orgs, [], 'a customer has no orgs below it');
  });

  it('only the org types of the tree may be created below each level', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const cases: Array<[PanelClient, string, string]> = [
      [admin, 'customer', 'type'],
      [admin, 'reseller', 'type'],
      [provider.client, 'provider', 'type'],
      [customer.client, 'customer', 'type'],
    ];
    for (const [by, type, field] of cases) {
      const r = await by.post('/v1/orgs', { type, name: 'x', login: { username: unique('bad'), password: 'a long enough password' } });
      assert.equal(r.status, 400, `${type}: ${JSON.stringify(r.json)}`);
      assert.equal(r.json.error.code, 'validation_failed', `${type}: the refusal is validation_failed`);
      assert.equal(r.json.error.details.field, field, `${type}: the refusal names the field ${field}`);
    }
  });

  it('bad input is refused with the field named and creates nothing', async () => {
    const before = await env.db('panel_orgs').count('* as n').first();
    const good = { type: 'provider', name: 'Good name', login: { username: unique('ok'), password: 'a long enough password' } };
    const bad: Array<[unknown, string]> = [
      [{ ...good, name: '' }, 'name'],
      [{ ...good, name: 'x'.repeat(81) }, 'name'],
      [{ ...good, name: 42 }, 'name'],
      [{ ...good, login: { username: 'Upper', password: 'a long enough password' } }, 'login.username'],
      [{ ...good, login: { username: 'ab', password: 'a long enough password' } }, 'login.username'],
      [{ ...good, login: { username: unique('ok'), password: 'short' } }, 'login.password'],
      [{ ...good, colour: 'red' }, 'colour'],
      [{ ...good, type: 'platform' }, 'type'],
      [{ ...good, limits: { websites: -1 } }, 'limits.websites'],
      [{ ...good, limits: { websites: 1.5 } }, 'limits.websites'],
      [{ ...good, limits: { planets: 3 } }, 'limits.planets'],
      [{ ...good, parent_id: '00000000-0000-0000-0000-000000000000' }, 'organisation'],
    ];
    for (const [body, field] of bad) {
      const r = await admin.post('/v1/orgs', body);
      assert.ok(r.status === 400 || r.status === 404, `${field}: ${r.status}`);
      assert.equal(r.json.error.details.field ?? r.json.error.details.what, field, JSON.stringify(r.json));
      assert.equal(typeof r.json.error.message, 'string', `${field}: the refusal carries a message`);
    }
    const notJson = await admin.req('POST', '/v1/orgs', 'name=x', { 'content-type': 'application/x-www-form-urlencoded' });
    assert.equal(notJson.status, 415, 'a form-encoded body is refused with 415');
    const broken = await admin.req('POST', '/v1/orgs', '{"type":', { 'content-type': 'application/json' });
    assert.equal(broken.json.error.code, 'validation_failed', 'broken JSON is refused as validation_failed');
    const after = await env.db('panel_orgs').count('* as n').first();
    assert.equal(after!.n, before!.n, 'no refused request created an org');
  });

  it('a taken username is a conflict and leaves no org behind', async () => {
    const p = await createOrgWithLogin(admin, { type: 'provider' });
    const r = await admin.post('/v1/orgs', { type: 'provider', name: 'dup', login: { username: p.username, password: 'a long enough password' } });
    assert.equal(r.status, 409, `a taken username is a conflict: ${JSON.stringify(r.json)}`);
    assert.equal(r.json.error.code, 'conflict', 'the refusal\'s code is conflict');
    assert.equal(await env.db('panel_orgs').where({ name: 'dup' }).first(), undefined, 'the refused create left no org behind');
  });

  it('renames: 1 to 80 characters, by the org itself or above, never by a customer of its own account', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    assert.equal((await provider.client.patch(`/v1/orgs/${customer.id}`, { name: '  Renamed customer ' })).json.name, 'Renamed customer', 'the provider renames its customer, trimmed');
    assert.equal((await provider.client.patch(`/v1/orgs/${provider.id}`, { name: 'Provider renamed' })).status, 200, 'the provider renames its own org');
    const self = await customer.client.patch(`/v1/orgs/${customer.id}`, { name: 'Mine' });
    assert.equal(self.status, 403, 'a customer cannot rename its own account (403)');
    assert.equal((await provider.client.patch(`/v1/orgs/${customer.id}`, { name: 'y'.repeat(81) })).json.error.details.field, 'name', 'a name of 81 characters is refused naming the field');
    assert.equal((await provider.client.patch(`/v1/orgs/${customer.id}`, { name: 'ok', type: 'reseller' })).json.error.details.field, 'type', 'a rename cannot change the type');
    assert.equal((await env.db('panel_orgs').where({ id: customer.id }).first()).name, 'Renamed customer', 'the refused renames left the name as it was');
  });

  it('suspension from above stops every login at and below on its next request; reactivation restores them; nothing is deleted', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const reseller = await createOrgWithLogin(provider.client, { type: 'reseller' });
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    assert.equal((await reseller.client.post(`/v1/orgs/${reseller.id}/suspend`)).status, 403, 'not the own org');
    assert.equal((await customer.client.post(`/v1/orgs/${reseller.id}/suspend`)).status, 404, 'not from below');
    const s = await provider.client.post(`/v1/orgs/${reseller.id}/suspend`);
    assert.equal(s.json.status, 'suspended', 'the provider suspends the reseller');
    for (const c of [reseller.client, customer.client]) {
      const r = await c.get('/v1/account');
      assert.equal(r.status, 403, `a login at or below the suspended org is refused: ${JSON.stringify(r.json)}`);
      assert.equal(r.json.error.code, 'suspended', 'the refusal\'s code is suspended');
    }
    assert.equal((await provider.client.get(`/v1/orgs/${customer.id}`)).status, 200, 'the level above still sees it');
    assert.equal((await provider.client.post(`/v1/orgs/${reseller.id}/reactivate`)).json.status, 'active', 'the provider reactivates the reseller');
    assert.equal((await customer.client.get('/v1/account')).status, 200, 'the customer\'s login works again after the reactivation');
  });

  it('deletes only an org with nothing below it, confirmed by repeating its id', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const reseller = await createOrgWithLogin(provider.client, { type: 'reseller' });
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const wrong = await provider.client.del(`/v1/orgs/${customer.id}`, { confirm: reseller.id });
    assert.equal(wrong.json.error.details.field, 'confirm', 'a delete confirmed with another id is refused naming confirm');
    const busy = await provider.client.del(`/v1/orgs/${reseller.id}`, { confirm: reseller.id });
    assert.equal(busy.status, 409, `an org with an org below it cannot be deleted: ${JSON.stringify(busy.json)}`);
    assert.equal((await provider.client.del(`/v1/orgs/${customer.id}`, { confirm: customer.id })).status, 204, 'the empty customer org is deleted when confirmed with its id');
    assert.equal((await provider.client.get(`/v1/orgs/${customer.id}`)).status, 404, 'the deleted org is 404');
    assert.equal(await env.db('panel_logins').where({ username: customer.username }).first(), undefined, 'the deleted org\'s logins are gone');
    assert.equal((await customer.client.get('/v1/account')).status, 401, 'its sessions are gone with its logins');
    assert.equal((await provider.client.del(`/v1/orgs/${reseller.id}`, { confirm: reseller.id })).status, 204, 'once empty, the reseller is deleted too');
  });

  it('lists the subtree a page at a time in tree order, with filters', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const names = ['alpha', 'beta', 'gamma', 'delta', 'epsilon'];
    for (const name of names) {
      const r = await provider.client.post('/v1/orgs', { type: 'customer', name: `cust ${name}`, login: { username: unique('c'), password: 'a long enough password' } });
      assert.equal(r.status, 201, `the provider creates customer ${name}: ${JSON.stringify(r.json)}`);
    }
    const seen: string[] = [];
    let next: string | null = null;
    do {
      const page = await provider.client.get(`/v1/orgs?limit=2${next ? `&after=${next}` : ''}`);
      assert.equal(page.status, 200, `a page of the list answers: ${JSON.stringify(page.json)}`);
      assert.ok(page.json.orgs.length <= 2, `a page holds at most 2 orgs: ${page.json.orgs.length}`);
      seen.push(...page.json.orgs.map((o: { name: string }) => o.name));
      next = page.json.next;
    } while (next);
    assert.deepEqual(seen.sort(), names.map((n) => `cust ${n}`).sort(), 'the pages together list each customer once');
    const found = await provider.client.get('/v1/orgs?q=GAMM');
    assert.deepEqual(found.json.orgs.map((o: { name: string }) => o.name), ['cust gamma'], 'q matches the name case-insensitively');
    const wildcard = await provider.client.get('/v1/orgs?q=%25');
    assert.deepEqual(wildcard.json.orgs, [], 'LIKE wildcards are matched literally');
    assert.equal((await provider.client.get('/v1/orgs?limit=0')).json.error.details.field, 'limit', 'limit=0 is refused naming limit');
    assert.equal((await provider.client.get('/v1/orgs?sort=name')).json.error.details.field, 'sort', 'an unknown sort is refused naming sort');
    assert.equal((await provider.client.get('/v1/orgs?after=bm9wZQ')).json.error.details.field, 'after', 'a cursor that is not one of the list\'s is refused naming after');
  });

  it('keeps an audit log of every change, readable per subtree', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    await provider.client.patch(`/v1/orgs/${customer.id}`, { name: 'Audited' });
    const log = await provider.client.get(`/v1/orgs/${provider.id}/audit`);
    assert.equal(log.status, 200, `the provider reads its audit: ${JSON.stringify(log.json)}`);
    const rename = log.json.entries.find((e: { action: string }) => e.action === 'org.rename');
    assert.equal(rename.actor_username, provider.username, 'the rename names the provider\'s login as actor');
    assert.equal(rename.target_id, customer.id, 'the rename\'s target is the customer');
    assert.equal(rename.after.name, 'Audited', 'the rename records the new name');
    assert.match(rename.request_id, /^[0-9a-f-]{36}$/, 'the rename carries its request id (a UUID)');
    const mine = await customer.client.get(`/v1/orgs/${customer.id}/audit`);
    assert.ok(mine.json.entries.every((e: { org_id: string }) => e.org_id === customer.id), `the customer sees only its own entries: ${JSON.stringify(mine.json.entries.map((e: { org_id: string }) => e.org_id))}`);
    assert.equal((await customer.client.get(`/v1/orgs/${provider.id}/audit`)).status, 404, 'the audit of the provider above is 404 to the customer');
  });

  it('role powers: site.place and php.admin only at the root of the tree; migration.run for providers and resellers; none for read_only', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const reseller = await createOrgWithLogin(provider.client, { type: 'reseller' });
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    assert.deepEqual((await admin.get('/v1/account')).json.powers, ['site.place', 'php.admin', 'migration.run'], 'the platform admin holds every power');
    assert.deepEqual((await provider.client.get('/v1/account')).json.powers, ['migration.run'], 'a provider holds migration.run only');
    assert.deepEqual((await reseller.client.get('/v1/account')).json.powers, ['migration.run'], 'a reseller holds migration.run only');
    assert.deepEqual((await customer.client.get('/v1/account')).json.powers, [], 'a customer holds no power');
    const username = unique('ro');
    const created = await admin.post(`/v1/orgs/${provider.id}/logins`, { username, password: 'temporary password 1', role: 'read_only' });
    assert.equal(created.status, 201, `a read_only login is created in the provider's org: ${JSON.stringify(created.json)}`);
    const readOnly = await signInFresh(url(), username, 'temporary password 1');
    assert.deepEqual((await readOnly.get('/v1/account')).json.powers, [], 'a read_only login holds no power');
  });
});
