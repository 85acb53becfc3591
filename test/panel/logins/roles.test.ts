import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createOrgWithLogin, PanelClient, PASSWORD, platformAdmin, signInFresh, unique, usePanel, type Reply } from '../../helpers/panel';
import { env } from '../../setup/env';

// Roles × actions (spec 2 sections 1.3, 2.1, 2.2, 3): what each role may do to its own org, to the
// orgs below it and outside its subtree. Decisions about an org belong to the level above it; a
// customer cannot rename its own account; read_only changes nothing; outside the subtree is 404.

const ROLE_NAMES = ['platform_admin', 'provider_admin', 'reseller', 'account_owner', 'read_only'] as const;
type RoleName = (typeof ROLE_NAMES)[number];
type OrgType = 'provider' | 'reseller' | 'customer';

interface Actor {
  client: PanelClient;
  /** the actor's own org */
  own: string;
  /** where it creates customers and resellers (its own org; a provider for the platform) */
  createUnder: string;
  /** a reseller holding create_subresellers in its subtree (its own org for a customer) */
  resellerBelow: string;
  /** an org outside its subtree, or null for the platform (everything is below it) */
  outside: string | null;
  /** a new org directly below its own org (with an org below that one when `nested`), or null when none can exist */
  makeChild: ((nested?: boolean) => Promise<string>) | null;
}

/** 201 or [403, 'forbidden'], …; null: the action does not apply to that role. */
type Expect = [number, string?] | null;

const orgBody = (type: OrgType, parent_id?: string, extra: Record<string, unknown> = {}) => ({
  type,
  name: `${type} ${randomUUID().slice(0, 6)}`,
  login: { username: unique(type.slice(0, 3)), password: `temp-${randomUUID()}` },
  ...(parent_id ? { parent_id } : {}),
  ...extra,
});

/** Creates an org (its first login never signs in) and returns its id. */
async function newOrg(by: PanelClient, type: OrgType, parent_id?: string, extra: Record<string, unknown> = {}): Promise<string> {
  const r = await by.post('/v1/orgs', orgBody(type, parent_id, extra));
  assert.equal(r.status, 201, `create ${type}: ${JSON.stringify(r.json)}`);
  return r.json.id;
}

describe('panel: roles × actions', () => {
  const url = usePanel();
  const actors = {} as Record<RoleName, Actor>;
  let platformId: string;
  let provider: Awaited<ReturnType<typeof createOrgWithLogin>>;
  let reseller: Awaited<ReturnType<typeof createOrgWithLogin>>;
  let customer: Awaited<ReturnType<typeof createOrgWithLogin>>;
  let outsideProvider: string;

  before(async function () {
    this.timeout(30_000);
    const admin = await platformAdmin(url());
    platformId = (await admin.get('/v1/account')).json.org_id;
    provider = await createOrgWithLogin(admin, { type: 'provider' });
    reseller = await createOrgWithLogin(provider.client, { type: 'reseller', powers: ['create_subresellers'] });
    customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    outsideProvider = await newOrg(admin, 'provider');
    const roName = unique('ro');
    const roTemp = `temp-${randomUUID()}`;
    assert.equal((await provider.client.post(`/v1/orgs/${reseller.id}/logins`, { username: roName, password: roTemp, role: 'read_only' })).status, 201, 'the provider creates a read_only login in the reseller\'s org');
    const readOnly = await signInFresh(url(), roName, roTemp);

    // `by` creates below `parent`: a provider below the platform, else a reseller (nested) or a customer.
    const childMaker = (by: PanelClient, parent: string, top: OrgType | null) => async (nested = false) => {
      const type: OrgType = top ?? (nested ? 'reseller' : 'customer');
      const id = await newOrg(by, type, parent);
      if (nested) await newOrg(by, 'customer', id);
      return id;
    };
    actors.platform_admin = { client: admin, own: platformId, createUnder: provider.id, resellerBelow: reseller.id, outside: null, makeChild: childMaker(admin, platformId, 'provider') };
    actors.provider_admin = { client: provider.client, own: provider.id, createUnder: provider.id, resellerBelow: reseller.id, outside: outsideProvider, makeChild: childMaker(provider.client, provider.id, null) };
    actors.reseller = { client: reseller.client, own: reseller.id, createUnder: reseller.id, resellerBelow: reseller.id, outside: outsideProvider, makeChild: childMaker(reseller.client, reseller.id, null) };
    actors.account_owner = { client: customer.client, own: customer.id, createUnder: customer.id, resellerBelow: customer.id, outside: reseller.id, makeChild: null };
    // read_only sits in the reseller's org; the reseller makes the orgs it then fails to change.
    actors.read_only = { client: readOnly, own: reseller.id, createUnder: reseller.id, resellerBelow: reseller.id, outside: outsideProvider, makeChild: childMaker(reseller.client, reseller.id, null) };
  });

  after(async () => {
    // Should a refusal ever break, nothing is left suspended for other suites.
    await env.db('panel_orgs').whereIn('id', [platformId, provider.id, reseller.id, customer.id]).update({ status: 'active', suspended_at: null });
  });

  const nameOf = async (id: string) => (await actors.platform_admin.client.get(`/v1/orgs/${id}`)).json.name as string;

  const ACTIONS: Array<{ name: string; run: (a: Actor) => Promise<Reply>; expect: Record<RoleName, Expect> }> = [
    {
      name: 'create a provider',
      run: (a) => a.client.post('/v1/orgs', orgBody('provider')),
      expect: { platform_admin: [201], provider_admin: [400, 'validation_failed'], reseller: [400, 'validation_failed'], account_owner: [400, 'validation_failed'], read_only: [403, 'forbidden'] },
    },
    {
      name: 'create a customer',
      run: (a) => a.client.post('/v1/orgs', orgBody('customer', a.createUnder)),
      expect: { platform_admin: [201], provider_admin: [201], reseller: [201], account_owner: [400, 'validation_failed'], read_only: [403, 'forbidden'] },
    },
    {
      name: 'create a reseller',
      run: (a) => a.client.post('/v1/orgs', orgBody('reseller', a.createUnder)),
      expect: { platform_admin: [201], provider_admin: [201], reseller: [201], account_owner: [400, 'validation_failed'], read_only: [403, 'forbidden'] },
    },
    {
      name: 'create a sub-reseller below a reseller holding create_subresellers',
      run: (a) => a.client.post('/v1/orgs', orgBody('reseller', a.resellerBelow)),
      expect: { platform_admin: [201], provider_admin: [201], reseller: [201], account_owner: [400, 'validation_failed'], read_only: [403, 'forbidden'] },
    },
    {
      name: 'rename its own org',
      run: async (a) => a.client.patch(`/v1/orgs/${a.own}`, { name: await nameOf(a.own) }),
      expect: { platform_admin: [200], provider_admin: [200], reseller: [200], account_owner: [403, 'forbidden'], read_only: [403, 'forbidden'] },
    },
    {
      name: 'rename an org below',
      run: async (a) => {
        const id = await a.makeChild!();
        const was = await nameOf(id);
        const r = await a.client.patch(`/v1/orgs/${id}`, { name: 'renamed below' });
        assert.equal(await nameOf(id), r.status === 200 ? 'renamed below' : was, 'the org below is renamed only if the rename was accepted, else keeps its name');
        return r;
      },
      expect: { platform_admin: [200], provider_admin: [200], reseller: [200], account_owner: null, read_only: [403, 'forbidden'] },
    },
    {
      name: 'suspend its own org',
      run: (a) => a.client.post(`/v1/orgs/${a.own}/suspend`),
      expect: { platform_admin: [403, 'forbidden'], provider_admin: [403, 'forbidden'], reseller: [403, 'forbidden'], account_owner: [403, 'forbidden'], read_only: [403, 'forbidden'] },
    },
    {
      name: 'reactivate its own org',
      run: (a) => a.client.post(`/v1/orgs/${a.own}/reactivate`),
      expect: { platform_admin: [403, 'forbidden'], provider_admin: [403, 'forbidden'], reseller: [403, 'forbidden'], account_owner: [403, 'forbidden'], read_only: [403, 'forbidden'] },
    },
    {
      name: 'suspend and reactivate an org below',
      run: async (a) => {
        const id = await a.makeChild!();
        const r = await a.client.post(`/v1/orgs/${id}/suspend`);
        const status = (await actors.platform_admin.client.get(`/v1/orgs/${id}`)).json.status;
        assert.equal(status, r.status === 200 ? 'suspended' : 'active', 'the org below is suspended only if the suspension was accepted');
        if (r.status === 200) assert.equal((await a.client.post(`/v1/orgs/${id}/reactivate`)).json.status, 'active', 'the suspended org below is reactivated');
        return r;
      },
      expect: { platform_admin: [200], provider_admin: [200], reseller: [200], account_owner: null, read_only: [403, 'forbidden'] },
    },
    {
      name: 'delete its own org',
      run: (a) => a.client.del(`/v1/orgs/${a.own}`, { confirm: a.own }),
      expect: { platform_admin: [403, 'forbidden'], provider_admin: [403, 'forbidden'], reseller: [403, 'forbidden'], account_owner: [403, 'forbidden'], read_only: [403, 'forbidden'] },
    },
    {
      name: 'delete an org below with an org below it',
      run: async (a) => {
        const id = await a.makeChild!(true);
        const r = await a.client.del(`/v1/orgs/${id}`, { confirm: id });
        assert.equal((await actors.platform_admin.client.get(`/v1/orgs/${id}`)).status, 200, 'still there');
        return r;
      },
      expect: { platform_admin: [409, 'conflict'], provider_admin: [409, 'conflict'], reseller: [409, 'conflict'], account_owner: null, read_only: [403, 'forbidden'] },
    },
    {
      name: 'delete an empty org below without repeating its id',
      run: async (a) => {
        const id = await a.makeChild!();
        const r = await a.client.del(`/v1/orgs/${id}`, { confirm: a.own });
        if (r.status === 400) assert.equal(r.json.error.details.field, 'confirm', `the refusal names the confirm field: ${JSON.stringify(r.json)}`);
        assert.equal((await actors.platform_admin.client.get(`/v1/orgs/${id}`)).status, 200, 'still there');
        return r;
      },
      expect: { platform_admin: [400, 'validation_failed'], provider_admin: [400, 'validation_failed'], reseller: [400, 'validation_failed'], account_owner: null, read_only: [403, 'forbidden'] },
    },
    {
      name: 'delete an empty org below, repeating its id',
      run: async (a) => {
        const id = await a.makeChild!();
        const r = await a.client.del(`/v1/orgs/${id}`, { confirm: id });
        assert.equal((await actors.platform_admin.client.get(`/v1/orgs/${id}`)).status, r.status === 204 ? 404 : 200, 'the org below is gone only if the delete was accepted');
        return r;
      },
      expect: { platform_admin: [204], provider_admin: [204], reseller: [204], account_owner: null, read_only: [403, 'forbidden'] },
    },
    {
      name: 'list the logins of its own org',
      run: (a) => a.client.get(`/v1/orgs/${a.own}/logins`),
      expect: { platform_admin: [200], provider_admin: [200], reseller: [200], account_owner: [200], read_only: [200] },
    },
    {
      name: 'list the logins of an org below',
      run: async (a) => a.client.get(`/v1/orgs/${await a.makeChild!()}/logins`),
      expect: { platform_admin: [200], provider_admin: [200], reseller: [200], account_owner: null, read_only: [200] },
    },
    {
      name: 'create a login in its own org',
      run: (a) => a.client.post(`/v1/orgs/${a.own}/logins`, { username: unique('lg'), password: PASSWORD }),
      expect: { platform_admin: [403, 'forbidden'], provider_admin: [403, 'forbidden'], reseller: [403, 'forbidden'], account_owner: [403, 'forbidden'], read_only: [403, 'forbidden'] },
    },
    {
      name: 'create a login in an org below',
      run: async (a) => a.client.post(`/v1/orgs/${await a.makeChild!()}/logins`, { username: unique('lg'), password: PASSWORD }),
      expect: { platform_admin: [201], provider_admin: [201], reseller: [201], account_owner: null, read_only: [403, 'forbidden'] },
    },
    {
      name: 'read the audit of its own org',
      run: (a) => a.client.get(`/v1/orgs/${a.own}/audit`),
      expect: { platform_admin: [200], provider_admin: [200], reseller: [200], account_owner: [200], read_only: [200] },
    },
    {
      name: 'read, rename, suspend or read the audit and logins of an org outside its subtree',
      run: async (a) => {
        const target = a.outside!;
        const replies = [
          await a.client.get(`/v1/orgs/${target}`),
          await a.client.get(`/v1/orgs/${target}/audit`),
          await a.client.get(`/v1/orgs/${target}/logins`),
          await a.client.post(`/v1/orgs/${target}/suspend`),
          await a.client.patch(`/v1/orgs/${target}`, { name: 'x' }),
        ];
        // read_only is refused any write before its target is looked up: only the reads are 404 for it.
        const reads = replies.slice(0, 3);
        for (const r of reads) assert.deepEqual([r.status, r.json.error.code], [404, 'not_found'], `a read outside the subtree is 404 not_found: ${JSON.stringify(r.json)}`);
        return replies[a === actors.read_only ? 0 : 3];
      },
      expect: { platform_admin: null, provider_admin: [404, 'not_found'], reseller: [404, 'not_found'], account_owner: [404, 'not_found'], read_only: [404, 'not_found'] },
    },
  ];

  for (const action of ACTIONS) {
    describe(action.name, () => {
      for (const role of ROLE_NAMES) {
        const e = action.expect[role];
        if (!e) continue;
        it(`${role}: ${e[0]}${e[1] ? ` ${e[1]}` : ''}`, async () => {
          const a = actors[role];
          const r = await action.run(a);
          assert.equal(r.status, e[0], JSON.stringify(r.json));
          if (e[1]) assert.equal(r.json.error.code, e[1], `${action.name}: the refusal's error code: ${JSON.stringify(r.json)}`);
          // Whatever was refused, the actor's own org is still active and usable.
          assert.equal((await a.client.get(`/v1/orgs/${a.own}`)).json.status, 'active', `${action.name}: the actor's own org is still active`);
        });
      }
    });
  }

  it('a reseller without create_subresellers cannot create or grant sub-resellers; one holding it can, and grants only what it holds', async () => {
    const plain = await createOrgWithLogin(provider.client, { type: 'reseller' });
    const r = await plain.client.post('/v1/orgs', orgBody('reseller'));
    assert.equal(r.status, 403, `a reseller without the power cannot create a sub-reseller: ${JSON.stringify(r.json)}`);
    assert.equal(r.json.error.code, 'power_missing', 'the refusal is power_missing');
    assert.equal(r.json.error.details.power, 'create_subresellers', 'the refusal names the missing power create_subresellers');
    // Not even the provider places a sub-reseller below it.
    assert.equal((await provider.client.post('/v1/orgs', orgBody('reseller', plain.id))).json.error.code, 'power_missing', 'the provider cannot place a sub-reseller below a reseller lacking the power');
    assert.equal((await plain.client.post('/v1/orgs', orgBody('customer', undefined))).status, 201, 'a reseller without the power still creates customers');
    // The holder creates a sub-reseller and passes the power on; it cannot grant one it lacks.
    const sub = await reseller.client.post('/v1/orgs', orgBody('reseller', undefined, { powers: ['create_subresellers'] }));
    assert.equal(sub.status, 201, JSON.stringify(sub.json));
    const got = await reseller.client.get(`/v1/orgs/${sub.json.id}`);
    assert.deepEqual(got.json.powers.effective, ['create_subresellers'], 'the sub-reseller holds the power passed on to it');
    const lacking = await reseller.client.post('/v1/orgs', orgBody('reseller', undefined, { powers: ['create_packages'] }));
    assert.equal(lacking.status, 403, `a reseller cannot grant a power it lacks: ${JSON.stringify(lacking.json)}`);
    assert.equal(lacking.json.error.code, 'power_missing', 'the refusal of an ungranted power is power_missing');
    assert.equal((await reseller.client.post('/v1/orgs', orgBody('reseller', undefined, { powers: ['no_such_power'] }))).status, 400, 'an unknown power is refused with 400');
  });

  it('the audit log shows who, what, before, after and the request id, for changes in the subtree only', async () => {
    const target = await newOrg(reseller.client, 'customer');
    const before = await nameOf(target);
    const renamed = await reseller.client.patch(`/v1/orgs/${target}`, { name: 'Audited name' });
    assert.equal(renamed.status, 200, `the reseller renames its customer: ${JSON.stringify(renamed.json)}`);
    const requestId = renamed.headers.get('x-request-id');
    assert.match(requestId!, /^[0-9a-f-]{36}$/, 'the answer carries a request id (a UUID)');
    // Changes elsewhere: a sibling reseller's customer, and another provider.
    const sibling = await createOrgWithLogin(provider.client, { type: 'reseller' });
    const siblingCustomer = await newOrg(sibling.client, 'customer');
    await sibling.client.patch(`/v1/orgs/${siblingCustomer}`, { name: 'Sibling rename' });
    await actors.platform_admin.client.patch(`/v1/orgs/${outsideProvider}`, { name: 'Outside rename' });

    const page = async (c: PanelClient, org: string) => {
      const r = await c.get(`/v1/orgs/${org}/audit?limit=500`);
      assert.equal(r.status, 200, `the audit page answers: ${JSON.stringify(r.json)}`);
      return r.json.entries as Array<Record<string, unknown>>;
    };
    const mine = await page(reseller.client, reseller.id);
    const entry = mine.find((e) => e.request_id === requestId)!;
    assert.ok(entry, 'the rename is in the reseller\'s audit');
    assert.equal(entry.action, 'org.rename', 'the entry records a rename');
    assert.equal(entry.actor_username, reseller.username, 'the entry names the acting login\'s username');
    assert.equal(entry.actor_login_id, (await reseller.client.get('/v1/account')).json.login.id, 'the entry names the acting login\'s id');
    assert.equal(entry.org_id, target, 'the entry is filed under the renamed org');
    assert.equal(entry.target_type, 'org', 'the entry\'s target is an org');
    assert.equal(entry.target_id, target, 'the entry\'s target is the renamed org');
    assert.deepEqual(entry.before, { name: before }, 'the entry keeps the name before');
    assert.deepEqual(entry.after, { name: 'Audited name' }, 'the entry keeps the name after');
    assert.ok(entry.at, `the audit entry has a time: ${JSON.stringify(entry)}`);
    // Only its subtree: its own org and the orgs below (or deleted since); not the sibling's, not the other provider's.
    const below = new Set([reseller.id, ...(await reseller.client.get('/v1/orgs?limit=500')).json.orgs.map((o: { id: string }) => o.id)]);
    for (const e of mine) {
      const org = e.org_id as string;
      assert.ok(below.has(org) || (await actors.platform_admin.client.get(`/v1/orgs/${org}`)).status === 404, `${e.action} of ${org}`);
      assert.ok(![siblingCustomer, sibling.id, outsideProvider, provider.id].includes(org), `${e.action} of ${org}`);
    }
    const providerAudit = await page(provider.client, provider.id);
    assert.ok(providerAudit.some((e) => e.org_id === siblingCustomer && e.action === 'org.rename'), 'the provider sees the rename of its sibling customer');
    assert.ok(providerAudit.some((e) => e.request_id === requestId), `the provider sees the entries of request ${requestId}`);
    assert.ok(!providerAudit.some((e) => e.org_id === outsideProvider), 'the provider sees nothing of another provider');
    // The customer sees the rename of its own account, nothing of the reseller's other changes.
    const customerAudit = await page(customer.client, customer.id);
    assert.ok(customerAudit.every((e) => e.org_id === customer.id), `the customer sees only its own entries: ${JSON.stringify(customerAudit.map((e) => e.org_id))}`);
    assert.ok(!customerAudit.some((e) => e.request_id === requestId), `the customer does not see the reseller's request ${requestId}`);
    // Newest first, a page at a time.
    const one = await reseller.client.get(`/v1/orgs/${reseller.id}/audit?limit=1`);
    assert.equal(one.json.entries.length, 1, 'limit=1 gives one entry');
    const two = await reseller.client.get(`/v1/orgs/${reseller.id}/audit?limit=1&before=${one.json.next_before}`);
    assert.ok(Number(two.json.entries[0].id) < Number(one.json.entries[0].id), `the page before ${one.json.next_before} holds older entries: ${two.json.entries[0].id} < ${one.json.entries[0].id}`);
    // Above the caller, or elsewhere: 404.
    assert.equal((await reseller.client.get(`/v1/orgs/${provider.id}/audit`)).status, 404, 'the audit of the org above is 404 to the reseller');
    assert.equal((await customer.client.get(`/v1/orgs/${reseller.id}/audit`)).status, 404, 'the audit of the org above is 404 to the customer');
  });
});
