import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createOrgWithLogin, PanelClient, PASSWORD, platformAdmin, signInFresh, unique, usePanel } from '../../helpers/panel';
import { env } from '../../setup/env';

// Logins of the orgs below (spec 2 sections 2.5 and 3): the levels above manage them, never the
// login's own org; outside the subtree is 404; listing shows role, status, password age and
// two-factor but never a hash or secret; reset ends sessions; suspension refuses the next request;
// a read_only login changes nothing but its own credentials.

type Org = Awaited<ReturnType<typeof createOrgWithLogin>>;

describe('panel: logins management', () => {
  const url = usePanel();
  let admin: PanelClient;
  let provider: Org;
  let reseller: Org;
  let customer: Org;
  let otherReseller: Org;
  let otherCustomer: Org;
  let customerLoginId: string;
  let resellerLoginId: string;
  let otherCustomerLoginId: string;

  before(async function () {
    this.timeout(30_000);
    admin = await platformAdmin(url());
    provider = await createOrgWithLogin(admin, { type: 'provider' });
    reseller = await createOrgWithLogin(provider.client, { type: 'reseller' });
    customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    otherReseller = await createOrgWithLogin(provider.client, { type: 'reseller' });
    otherCustomer = await createOrgWithLogin(otherReseller.client, { type: 'customer' });
    customerLoginId = (await customer.client.get('/v1/account')).json.login.id;
    resellerLoginId = (await reseller.client.get('/v1/account')).json.login.id;
    otherCustomerLoginId = (await otherCustomer.client.get('/v1/account')).json.login.id;
  });

  /** A further login of `orgId`, created by `by`, signed in with its password changed. */
  async function addLogin(by: PanelClient, orgId: string, role?: string) {
    const username = unique('lg');
    const temporary = `temp-${randomUUID()}`;
    const r = await by.post(`/v1/orgs/${orgId}/logins`, { username, password: temporary, ...(role ? { role } : {}) });
    assert.equal(r.status, 201, JSON.stringify(r.json));
    return { id: r.json.id as string, username, body: r.json, client: await signInFresh(url(), username, temporary) };
  }

  it('the level above creates logins (the admin role by default, or read_only); the level two above too', async () => {
    const a = await addLogin(reseller.client, customer.id);
    assert.equal(a.body.role, 'account_owner', 'the admin role by default');
    assert.equal(a.body.org_id, customer.id, 'the login belongs to the customer org');
    assert.equal(a.body.status, 'active', 'a new login is active');
    const ro = await addLogin(provider.client, customer.id, 'read_only');
    assert.equal(ro.body.role, 'read_only', 'the read_only role as asked');
    assert.equal((await ro.client.get('/v1/account')).json.login.role, 'read_only', 'the read_only login signs in with its role');
    const audit = (await reseller.client.get(`/v1/orgs/${customer.id}/audit`)).json.entries.find((e: { action: string; target_id: string }) => e.action === 'login.create' && e.target_id === a.id);
    assert.deepEqual(audit.after, { username: a.username, role: 'account_owner' }, 'the audit entry holds the username and role');
    assert.equal(audit.actor_username, reseller.username, 'the audit entry names the creator');
  });

  it('a login never manages the logins of its own org: 403 forbidden for every action, nothing changes', async () => {
    const colleague = await addLogin(provider.client, reseller.id);
    const cases: Array<[PanelClient, string, string, unknown?]> = [
      [customer.client, 'POST', `/v1/orgs/${customer.id}/logins`, { username: unique('x'), password: PASSWORD }],
      [reseller.client, 'POST', `/v1/orgs/${reseller.id}/logins`, { username: unique('x'), password: PASSWORD }],
      [reseller.client, 'POST', `/v1/logins/${colleague.id}/suspend`],
      [reseller.client, 'POST', `/v1/logins/${colleague.id}/reactivate`],
      [reseller.client, 'POST', `/v1/logins/${colleague.id}/reset-password`, { password: PASSWORD }],
      [reseller.client, 'DELETE', `/v1/logins/${colleague.id}/two-factor`],
      [reseller.client, 'DELETE', `/v1/logins/${colleague.id}`],
      [reseller.client, 'POST', `/v1/logins/${resellerLoginId}/suspend`],
      [reseller.client, 'DELETE', `/v1/logins/${resellerLoginId}`],
      [customer.client, 'POST', `/v1/logins/${customerLoginId}/reset-password`, { password: PASSWORD }],
    ];
    for (const [c, m, p, body] of cases) {
      const r = await c.req(m, p, body);
      assert.equal(r.status, 403, `${m} ${p}`);
      assert.equal(r.json.error.code, 'forbidden', `${m} ${p}`);
    }
    assert.equal((await colleague.client.get('/v1/account')).status, 200, 'its sessions were not ended');
    assert.equal((await reseller.client.get('/v1/account')).status, 200, 'the reseller keeps its session');
    const listed = (await provider.client.get(`/v1/orgs/${reseller.id}/logins`)).json.logins;
    assert.equal(listed.length, 2, 'no login was added to the reseller org');
    assert.ok(listed.every((l: { status: string }) => l.status === 'active'), `both logins are active: ${listed.map((l: { status: string }) => l.status).join(', ')}`);
  });

  it('outside the subtree everything is 404, whether the login or org exists or not', async () => {
    const cases: Array<[PanelClient, string, string, unknown?]> = [];
    for (const [c, loginId, orgId] of [
      [reseller.client, otherCustomerLoginId, otherCustomer.id], // a sibling's customer
      [customer.client, resellerLoginId, reseller.id], // the level above
      [otherReseller.client, customerLoginId, customer.id],
      [reseller.client, randomUUID(), randomUUID()], // nothing at all
      [reseller.client, 'not-a-uuid', 'not-a-uuid'],
    ] as const) {
      cases.push(
        [c, 'GET', `/v1/orgs/${orgId}/logins`],
        [c, 'POST', `/v1/orgs/${orgId}/logins`, { username: unique('x'), password: PASSWORD }],
        [c, 'POST', `/v1/logins/${loginId}/suspend`],
        [c, 'POST', `/v1/logins/${loginId}/reactivate`],
        [c, 'POST', `/v1/logins/${loginId}/reset-password`, { password: PASSWORD }],
        [c, 'DELETE', `/v1/logins/${loginId}/two-factor`],
        [c, 'DELETE', `/v1/logins/${loginId}`],
      );
    }
    const bodies = new Set<string>();
    for (const [c, m, p, body] of cases) {
      const r = await c.req(m, p, body);
      assert.equal(r.status, 404, `${m} ${p}`);
      assert.equal(r.json.error.code, 'not_found', `${m} ${p}`);
      if (p.startsWith('/v1/logins/')) bodies.add(JSON.stringify(r.json));
    }
    assert.equal(bodies.size, 1, 'an existing login outside answers like a missing one');
    assert.equal((await otherCustomer.client.get('/v1/account')).json.login.status, 'active', 'the other customer login is still active');
  });

  it('listing shows role, status, password age and two-factor, never a hash or secret', async () => {
    const extra = await addLogin(reseller.client, customer.id, 'read_only');
    await env.db('panel_logins').where({ id: extra.id }).update({ password_changed_at: env.db.raw(`now() - interval '10 days 1 hour'`) });
    await reseller.client.post(`/v1/logins/${extra.id}/suspend`);
    // A pending two-factor enrolment and a token exist too: neither shows.
    const enrolment = await customer.client.post('/v1/account/two-factor');
    const token = (await customer.client.post('/v1/account/tokens', { name: 'x' })).json.token;
    for (const by of [reseller.client, provider.client, admin]) {
      const r = await by.get(`/v1/orgs/${customer.id}/logins`);
      assert.equal(r.status, 200, `the list answers 200: ${JSON.stringify(r.json)}`);
      const text = JSON.stringify(r.json);
      assert.doesNotMatch(text, /argon2|password_hash|totp|secret|recovery/i, 'no hash or secret in the list');
      assert.ok(!text.includes(enrolment.json.secret) && !text.includes(token) && !text.includes(PASSWORD), 'the answer holds neither the TOTP secret, the session token nor the password');
      const e = r.json.logins.find((l: { id: string }) => l.id === extra.id);
      assert.equal(e.role, 'read_only', 'the role is listed');
      assert.equal(e.status, 'suspended', 'the status is listed');
      assert.equal(e.password_age_days, 10, 'the password age in days is listed');
      assert.equal(e.two_factor, false, 'two-factor is listed');
      assert.equal(e.must_change_password, false, 'must_change_password is listed');
      const owner = r.json.logins.find((l: { id: string }) => l.id === customerLoginId);
      assert.deepEqual(
        Object.keys(owner).sort(),
        ['created_at', 'id', 'last_sign_in_at', 'must_change_password', 'org_id', 'password_age_days', 'password_changed_at', 'role', 'status', 'two_factor', 'username'],
        'only the documented fields are listed',
      );
      assert.equal(owner.role, 'account_owner', "the owner's role is listed");
      assert.equal(owner.password_age_days, 0, "the owner's password is new");
    }
    // The org's own logins may read their org's list (reading is not managing).
    assert.equal((await customer.client.get(`/v1/orgs/${customer.id}/logins`)).status, 200, "the org's own login reads its list");
    await reseller.client.post(`/v1/logins/${extra.id}/reactivate`);
  });

  it('a password reset by the level above ends that login\'s sessions; the new password is temporary', async () => {
    const target = await addLogin(reseller.client, customer.id);
    const second = new PanelClient(url());
    assert.equal((await second.signIn(target.username, PASSWORD)).status, 200, 'the second session signs in');
    const bystander = await addLogin(reseller.client, customer.id);
    const fresh = `reset-${randomUUID()}`;
    const r = await provider.client.post(`/v1/logins/${target.id}/reset-password`, { password: fresh });
    assert.equal(r.status, 200, `the reset is accepted: ${JSON.stringify(r.json)}`);
    assert.equal(r.json.must_change_password, true, 'the new password is temporary');
    for (const c of [target.client, second]) {
      const g = await c.get('/v1/account');
      assert.equal(g.status, 401, "the reset ended the login's sessions");
      assert.equal(g.json.error.code, 'unauthenticated', 'an ended session is unauthenticated');
    }
    assert.equal((await bystander.client.get('/v1/account')).status, 200, 'other logins keep their sessions');
    assert.equal((await new PanelClient(url()).signIn(target.username, PASSWORD)).status, 401, 'the old password no longer signs in');
    const c = new PanelClient(url());
    const s = await c.signIn(target.username, fresh);
    assert.equal(s.status, 200, 'the new password signs in');
    assert.equal(s.json.must_change_password, true, 'the new password must be changed');
    assert.equal((await c.get(`/v1/orgs/${customer.id}`)).json.error.code, 'password_change_required', 'nothing else until the password is changed');
    const audit = (await provider.client.get(`/v1/orgs/${customer.id}/audit`)).json.entries.find((e: { action: string; target_id: string }) => e.action === 'login.reset_password' && e.target_id === target.id);
    assert.equal(audit.actor_username, provider.username, 'the audit entry names who reset');
    assert.equal(audit.after.sessions_ended, 2, 'the audit entry counts the two ended sessions');
    assert.ok(!JSON.stringify(audit).includes(fresh), 'the reset audit entry does not hold the new password');
  });

  it('a suspended login is refused on its next request (session and API token alike) and at sign-in; reactivated it works again', async () => {
    const target = await addLogin(reseller.client, customer.id);
    const token = (await target.client.post('/v1/account/tokens', { name: 'x' })).json.token;
    const bearer = new PanelClient(url(), token);
    assert.equal((await bearer.get(`/v1/orgs/${customer.id}`)).status, 200, 'the token works before the suspension');
    const s = await reseller.client.post(`/v1/logins/${target.id}/suspend`);
    assert.equal(s.status, 200, `the suspension is accepted: ${JSON.stringify(s.json)}`);
    assert.equal(s.json.status, 'suspended', 'the login is suspended');
    for (const c of [target.client, bearer]) {
      for (const [m, p] of [['GET', `/v1/orgs/${customer.id}`], ['GET', '/v1/account'], ['POST', '/v1/auth/sign-out']]) {
        const r = await c.req(m, p);
        assert.equal(r.status, 403, `${m} ${p}`);
        assert.equal(r.json.error.code, 'suspended', 'refused as suspended');
      }
    }
    const si = await new PanelClient(url()).signIn(target.username, PASSWORD);
    assert.equal(si.status, 403, 'a suspended login cannot sign in');
    assert.equal(si.json.error.code, 'suspended', 'sign-in refused as suspended');
    // A wrong password does not tell that the login is suspended.
    assert.equal((await new PanelClient(url()).signIn(target.username, 'a wrong password')).json.error.code, 'invalid_credentials', 'a wrong password is refused as invalid credentials');
    // The other logins of the org are not affected.
    assert.equal((await customer.client.get(`/v1/orgs/${customer.id}`)).status, 200, 'the other logins of the org work');
    assert.equal((await reseller.client.post(`/v1/logins/${target.id}/reactivate`)).json.status, 'active', 'reactivated');
    assert.equal((await target.client.get(`/v1/orgs/${customer.id}`)).status, 200, 'the session works again');
    assert.equal((await bearer.get(`/v1/orgs/${customer.id}`)).status, 200, 'the token works again');
    const entries = (await reseller.client.get(`/v1/orgs/${customer.id}/audit`)).json.entries.filter((e: { target_id: string }) => e.target_id === target.id);
    assert.deepEqual(entries.slice(0, 2).map((e: { action: string; before: unknown; after: unknown }) => [e.action, e.before, e.after]), [
      ['login.reactivate', { status: 'suspended' }, { status: 'active' }],
      ['login.suspend', { status: 'active' }, { status: 'suspended' }],
    ], 'the audit holds the suspension and reactivation with before and after');
  });

  it('a deleted login loses its sessions and tokens and cannot sign in', async () => {
    const target = await addLogin(reseller.client, customer.id);
    const token = (await target.client.post('/v1/account/tokens', { name: 'x' })).json.token;
    assert.equal((await reseller.client.del(`/v1/logins/${target.id}`)).status, 204, 'the login is deleted');
    assert.equal((await target.client.get('/v1/account')).status, 401, 'its session is ended');
    assert.equal((await new PanelClient(url(), token).get('/v1/account')).status, 401, 'its token is revoked');
    assert.equal((await new PanelClient(url()).signIn(target.username, PASSWORD)).json.error.code, 'invalid_credentials', 'it cannot sign in');
    const listed = (await reseller.client.get(`/v1/orgs/${customer.id}/logins`)).json.logins;
    assert.ok(!listed.some((l: { id: string }) => l.id === target.id), `the deleted login ${target.id} is not listed`);
    assert.equal((await reseller.client.del(`/v1/logins/${target.id}`)).status, 404, 'a second delete finds nothing');
  });

  it('a read_only login reads what its org can read, changes nothing (403 forbidden), and still manages its own password and tokens', async () => {
    const ro = await addLogin(provider.client, reseller.id, 'read_only');
    const before = await provider.client.get(`/v1/orgs/${customer.id}`);
    for (const p of ['/v1/account', '/v1/orgs', `/v1/orgs/${reseller.id}`, `/v1/orgs/${customer.id}`, `/v1/orgs/${customer.id}/logins`, `/v1/orgs/${reseller.id}/logins`, `/v1/orgs/${reseller.id}/audit`]) {
      assert.equal((await ro.client.get(p)).status, 200, p);
    }
    assert.equal((await ro.client.get(`/v1/orgs/${otherCustomer.id}`)).status, 404, 'outside its subtree is 404');
    const writes: Array<[string, string, unknown?]> = [
      ['POST', '/v1/orgs', { type: 'customer', name: 'x', login: { username: unique('x'), password: PASSWORD } }],
      ['PATCH', `/v1/orgs/${customer.id}`, { name: 'renamed by read_only' }],
      ['PATCH', `/v1/orgs/${reseller.id}`, { name: 'renamed by read_only' }],
      ['POST', `/v1/orgs/${customer.id}/suspend`],
      ['POST', `/v1/orgs/${customer.id}/reactivate`],
      ['DELETE', `/v1/orgs/${customer.id}`, { confirm: customer.id }],
      ['POST', `/v1/orgs/${customer.id}/logins`, { username: unique('x'), password: PASSWORD }],
      ['POST', `/v1/logins/${customerLoginId}/suspend`],
      ['POST', `/v1/logins/${customerLoginId}/reset-password`, { password: `x-${randomUUID()}` }],
      ['DELETE', `/v1/logins/${customerLoginId}/two-factor`],
      ['DELETE', `/v1/logins/${customerLoginId}`],
    ];
    const check = async (c: PanelClient) => {
      for (const [m, p, body] of writes) {
        const r = await c.req(m, p, body);
        assert.equal(r.status, 403, `${m} ${p}`);
        assert.equal(r.json.error.code, 'forbidden', `${m} ${p}`);
      }
    };
    await check(ro.client);
    // Its own credentials: a token (which is read-only too), and its password.
    const tok = await ro.client.post('/v1/account/tokens', { name: 'ro' });
    assert.equal(tok.status, 201, `the read_only login creates a token: ${JSON.stringify(tok.json)}`);
    await check(new PanelClient(url(), tok.json.token));
    assert.equal((await new PanelClient(url(), tok.json.token).get(`/v1/orgs/${customer.id}`)).status, 200, 'its token reads');
    const next = `ro-${randomUUID()}`;
    assert.equal((await ro.client.post('/v1/account/password', { current_password: PASSWORD, new_password: next })).status, 204, 'it changes its own password');
    assert.equal((await new PanelClient(url()).signIn(ro.username, next)).status, 200, 'it signs in with the new password');
    assert.equal((await ro.client.del(`/v1/account/tokens/${tok.json.id}`)).status, 204, 'it revokes its own token');
    // Nothing changed.
    const after = await provider.client.get(`/v1/orgs/${customer.id}`);
    assert.deepEqual(after.json, before.json, 'the org is unchanged');
    assert.equal((await customer.client.get('/v1/account')).status, 200, "the customer's session is intact");
    const changes = await env.db('panel_audit').where({ actor_username: ro.username }).pluck('action');
    assert.deepEqual(changes.sort(), ['login.change_password', 'login.change_password', 'token.create', 'token.revoke'], 'only its own credential changes are audited');
  });
});
