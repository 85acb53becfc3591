import assert from 'node:assert/strict';
import { randomInt, randomUUID } from 'node:crypto';
import http from 'node:http';
import { seedTwoFactorRoles } from '../../../services/panel/logins/two-factor-policy';
import { createOrgWithLogin, PanelClient, PASSWORD, platformAdmin, startPanel, totp, unique, usePanel } from '../../helpers/panel';
import { env } from '../../setup/env';

// TOTP two-factor sign-in (spec 2 sections 2.5, 3 and 5.2-5.3; PANEL.md section 3): enrolment with
// a real authenticator code, recovery codes shown once, each code used once, removal by the level
// above, and -require-2fa-roles.

const now = () => Math.floor(Date.now() / 1000);
/** The code of the time step `offset` steps from now (-1: the previous one, +1: the next one). */
const codeAt = (secret: string, offset: number) => totp(secret, now() + offset * 30);

/** Waits when the current 30 s step is about to end, so that codes computed now stay what they are. */
async function awayFromStepEdge(): Promise<void> {
  const into = (Date.now() / 1000) % 30;
  if (into > 27) await new Promise((r) => setTimeout(r, (30 - into) * 1000 + 200));
}

/** A six-digit code that is none of the codes valid now (steps -1, 0, +1). */
function wrongCode(secret: string): string {
  const valid = new Set([-1, 0, 1].map((o) => codeAt(secret, o)));
  for (;;) {
    const c = String(randomInt(0, 1_000_000)).padStart(6, '0');
    if (!valid.has(c)) return c;
  }
}

/** Enrols the signed-in client; returns the secret and the recovery codes. Confirms with the previous step's code. */
async function enrol(c: PanelClient): Promise<{ secret: string; codes: string[]; uri: string }> {
  await awayFromStepEdge();
  const start = await c.post('/v1/account/two-factor');
  assert.equal(start.status, 200, JSON.stringify(start.json));
  const confirm = await c.post('/v1/account/two-factor/confirm', { code: codeAt(start.json.secret, -1) });
  assert.equal(confirm.status, 200, JSON.stringify(confirm.json));
  return { secret: start.json.secret, codes: confirm.json.recovery_codes, uri: start.json.otpauth_uri };
}

describe('panel: two-factor sign-in', () => {
  const url = usePanel();

  async function tree() {
    const admin = await platformAdmin(url());
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const reseller = await createOrgWithLogin(provider.client, { type: 'reseller' });
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const loginId: string = (await customer.client.get('/v1/account')).json.login.id;
    return { admin, provider, reseller, customer, loginId };
  }

  it('enrols with a real TOTP code: secret and otpauth URI, 10 recovery codes shown once; then sign-in needs a code, each code used once', async () => {
    const { reseller, customer, loginId } = await tree();
    await awayFromStepEdge();
    const start = await customer.client.post('/v1/account/two-factor');
    assert.equal(start.status, 200, `enrolment starts: ${JSON.stringify(start.json)}`);
    const secret: string = start.json.secret;
    assert.match(secret, /^[A-Z2-7]{16,}=*$/, 'the secret is base32');
    const uri = new URL(start.json.otpauth_uri);
    assert.equal(uri.protocol, 'otpauth:', 'the URI is an otpauth URI');
    assert.equal(uri.host, 'totp', 'the URI is for TOTP');
    assert.equal(uri.searchParams.get('secret'), secret, 'the URI carries the secret');
    assert.ok(uri.searchParams.get('issuer'), `the otpauth URI names an issuer: ${uri}`);
    assert.ok(decodeURIComponent(uri.pathname).includes(customer.username), `the otpauth URI names the login ${customer.username}: ${uri.pathname}`);
    // Not in force until confirmed: sign-in still needs no code.
    assert.equal((await new PanelClient(url()).signIn(customer.username, PASSWORD)).status, 200, 'before confirmation sign-in needs no code');
    const bad = await customer.client.post('/v1/account/two-factor/confirm', { code: wrongCode(secret) });
    assert.equal(bad.status, 401, `a wrong code does not confirm enrolment: ${JSON.stringify(bad.json)}`);
    assert.equal(bad.json.error.code, 'invalid_two_factor_code', 'the refusal\'s code is invalid_two_factor_code');
    assert.equal((await customer.client.get('/v1/account')).json.login.two_factor, false, 'the refused confirmation left two-factor off');

    const confirmCode = codeAt(secret, -1);
    const confirm = await customer.client.post('/v1/account/two-factor/confirm', { code: confirmCode });
    assert.equal(confirm.status, 200, `the previous step's code confirms enrolment: ${JSON.stringify(confirm.json)}`);
    const codes: string[] = confirm.json.recovery_codes;
    assert.equal(codes.length, 10, '10 recovery codes are shown');
    assert.equal(new Set(codes).size, 10, 'the 10 recovery codes differ');
    // Shown once: a second confirmation or enrolment is refused; the account page has no codes or secret.
    assert.equal((await customer.client.post('/v1/account/two-factor/confirm', { code: codeAt(secret, 0) })).status, 409, 'a second confirmation is refused with 409');
    assert.equal((await customer.client.post('/v1/account/two-factor')).status, 409, 'a second enrolment is refused with 409');
    const me = await customer.client.get('/v1/account');
    assert.equal(me.json.login.two_factor, true, 'the account page shows two-factor on');
    const listed = await reseller.client.get(`/v1/orgs/${customer.id}/logins`);
    assert.equal(listed.json.logins.find((l: { id: string }) => l.id === loginId).two_factor, true, 'the level above sees two-factor on in the login list');
    for (const text of [JSON.stringify(me.json), JSON.stringify(listed.json)]) {
      assert.ok(!text.includes(secret), 'the TOTP secret is shown');
      for (const code of codes) assert.ok(!text.includes(code), 'a recovery code is shown');
    }

    // Sign-in: the password alone is not enough; a wrong code and a garbage code are refused.
    const c = new PanelClient(url());
    const none = await c.signIn(customer.username, PASSWORD);
    assert.equal(none.status, 401, `the password alone does not sign in: ${JSON.stringify(none.json)}`);
    assert.equal(none.json.error.code, 'two_factor_code_required', 'the refusal asks for a code');
    assert.equal(none.headers.get('set-cookie'), null, 'no session cookie without a code');
    for (const code of [wrongCode(secret), 'abcdef', '12345', confirmCode /* used by the confirmation */]) {
      const r = await c.signIn(customer.username, PASSWORD, code);
      assert.equal(r.status, 401, code);
      assert.equal(r.json.error.code, 'invalid_two_factor_code', code);
      assert.equal(r.headers.get('set-cookie'), null, `${code}: no session cookie for a refused code`);
    }
    // A wrong password with a right code is still invalid_credentials.
    assert.equal((await c.signIn(customer.username, 'not the password', codeAt(secret, 0))).json.error.code, 'invalid_credentials', 'a wrong password with a right code is still invalid_credentials');
    await awayFromStepEdge();
    const current = codeAt(secret, 0);
    const ok = await c.signIn(customer.username, PASSWORD, current);
    assert.equal(ok.status, 200, `the current code signs in: ${JSON.stringify(ok.json)}`);
    assert.equal((await c.get('/v1/account')).status, 200, 'the new session works');
    // The same code cannot be used twice, nor an older one; a newer one (next step, within drift) works once.
    const reuse = await new PanelClient(url()).signIn(customer.username, PASSWORD, current);
    assert.equal(reuse.status, 401, 'a code already used is refused');
    assert.equal(reuse.json.error.code, 'invalid_two_factor_code', 'the refusal of a used code is invalid_two_factor_code');
    const next = codeAt(secret, 1);
    assert.equal((await new PanelClient(url()).signIn(customer.username, PASSWORD, next)).status, 200, 'the next step\'s code (within drift) signs in');
    assert.equal((await new PanelClient(url()).signIn(customer.username, PASSWORD, next)).status, 401, 'the next step\'s code does not sign in twice');
    assert.equal((await new PanelClient(url()).signIn(customer.username, PASSWORD, current)).status, 401, 'an older code than the last used does not sign in');

    // A recovery code works once, with or without its dash and in either case.
    assert.equal((await new PanelClient(url()).signIn(customer.username, PASSWORD, codes[0])).status, 200, 'a recovery code signs in');
    const again = await new PanelClient(url()).signIn(customer.username, PASSWORD, codes[0]);
    assert.equal(again.status, 401, 'a recovery code does not sign in twice');
    assert.equal(again.json.error.code, 'invalid_two_factor_code', 'the refusal of a used recovery code is invalid_two_factor_code');
    assert.equal((await new PanelClient(url()).signIn(customer.username, PASSWORD, codes[1].replace('-', '').toUpperCase())).status, 200, 'a recovery code signs in without its dash and in capitals');
    assert.equal((await new PanelClient(url()).signIn(customer.username, PASSWORD, codes[1])).status, 401, 'that recovery code, used in another form, does not sign in again');
    assert.equal((await new PanelClient(url()).signIn(customer.username, PASSWORD, codes[2])).status, 200, 'another recovery code signs in');

    // Neither the secret nor a recovery code is in the audit log (rows or API).
    const rows = JSON.stringify(await env.db('panel_audit').where({ target_id: loginId }));
    const api = JSON.stringify((await reseller.client.get(`/v1/orgs/${customer.id}/audit`)).json);
    assert.ok(rows.includes('login.enable_two_factor'), 'enabling two-factor is audited');
    for (const text of [rows, api]) {
      assert.ok(!text.includes(secret), 'the audit log holds no TOTP secret');
      for (const code of codes) assert.ok(!text.includes(code), 'the audit log holds no recovery code');
    }
    // The secret is stored sealed, the recovery codes hashed.
    const stored = await env.db('panel_logins').where({ id: loginId }).first();
    assert.ok(!JSON.stringify(stored).includes(secret), 'the TOTP secret is stored sealed, not in clear');
    for (const code of codes) assert.ok(!JSON.stringify(stored).includes(code), 'the recovery codes are stored hashed, not in clear');
  });

  it('removal by the level above ends the login\'s sessions; it signs in with the password only and may enrol again', async () => {
    const { provider, reseller, customer, loginId } = await tree();
    await enrol(customer.client);
    const other = await createOrgWithLogin(provider.client, { type: 'reseller' });
    // Not by the login itself (its own org), nor from outside the subtree.
    const own = await customer.client.del(`/v1/logins/${loginId}/two-factor`);
    assert.equal(own.status, 403, `the login cannot remove its own two-factor: ${JSON.stringify(own.json)}`);
    assert.equal(own.json.error.code, 'forbidden', 'the refusal\'s code is forbidden');
    assert.equal((await other.client.del(`/v1/logins/${loginId}/two-factor`)).status, 404, 'a reseller outside the subtree gets 404');
    assert.equal((await customer.client.get('/v1/account')).status, 200, 'the refused removals left the login\'s session working');

    const removed = await reseller.client.del(`/v1/logins/${loginId}/two-factor`);
    assert.equal(removed.status, 200, `the reseller above removes the two-factor: ${JSON.stringify(removed.json)}`);
    assert.equal(removed.json.two_factor, false, 'the removal answers two-factor off');
    const gone = await customer.client.get('/v1/account');
    assert.equal(gone.status, 401, 'the removal ended the login\'s session');
    assert.equal(gone.json.error.code, 'unauthenticated', 'the ended session is unauthenticated');
    const c = new PanelClient(url());
    const r = await c.signIn(customer.username, PASSWORD);
    assert.equal(r.status, 200, `the password alone signs in again: ${JSON.stringify(r.json)}`);
    assert.equal((await c.get('/v1/account')).json.login.two_factor, false, 'the account page shows two-factor off');
    const listed = await provider.client.get(`/v1/orgs/${customer.id}/logins`);
    assert.equal(listed.json.logins.find((l: { id: string }) => l.id === loginId).two_factor, false, 'the level above sees two-factor off in the login list');
    const audit = (await reseller.client.get(`/v1/orgs/${customer.id}/audit`)).json.entries.find((e: { action: string }) => e.action === 'login.remove_two_factor');
    assert.equal(audit.actor_username, reseller.username, 'the removal\'s audit names the reseller as actor');
    assert.deepEqual(audit.before, { two_factor: true }, 'the audit records two-factor on before');
    // Enrols again with a new secret.
    const { secret } = await enrol(c);
    await awayFromStepEdge();
    assert.equal((await new PanelClient(url()).signIn(customer.username, PASSWORD)).json.error.code, 'two_factor_code_required', 'after enrolling again the password alone asks for a code');
    assert.equal((await new PanelClient(url()).signIn(customer.username, PASSWORD, codeAt(secret, 0))).status, 200, 'the new secret\'s code signs in');
  });

  it('the same TOTP code or recovery code sent in parallel signs in once', async () => {
    const { customer } = await tree();
    const { secret, codes } = await enrol(customer.client);
    await awayFromStepEdge();
    for (const code of [codeAt(secret, 0), codes[0]]) {
      const replies = await Promise.all(Array.from({ length: 6 }, () => new PanelClient(url()).signIn(customer.username, PASSWORD, code)));
      assert.deepEqual(replies.map((r) => r.status).sort(), [200, 401, 401, 401, 401, 401], code);
    }
  });

  it('a wrong code counts as a failed sign-in for the throttle', async () => {
    const { customer } = await tree();
    const { secret } = await enrol(customer.client);
    const throttled = await startPanel({ throttle: { loginFailures: 2, ipFailures: 1000, windowSeconds: 60, lockSeconds: 60 } });
    const ip = `127.${randomInt(1, 255)}.${randomInt(0, 256)}.${randomInt(2, 255)}`;
    const from = (body: Record<string, unknown>) =>
      new Promise<{ status: number; json: { error?: { code: string } } }>((resolve, reject) => {
        const u = new URL(throttled.url);
        const payload = JSON.stringify(body);
        const req = http.request({ host: u.hostname, port: u.port, path: '/v1/auth/sign-in', method: 'POST', localAddress: ip, agent: false, headers: { 'content-type': 'application/json' } }, (res) => {
          let text = '';
          res.on('data', (d) => (text += d));
          res.on('end', () => resolve({ status: res.statusCode!, json: JSON.parse(text || '{}') }));
        });
        req.on('error', reject);
        req.end(payload);
      });
    try {
      // The right password without a code is no failure.
      for (let i = 0; i < 3; i++) assert.equal((await from({ username: customer.username, password: PASSWORD })).json.error?.code, 'two_factor_code_required', 'the right password without a code is refused as needing a code (no failure)');
      for (let i = 0; i < 2; i++) assert.equal((await from({ username: customer.username, password: PASSWORD, code: wrongCode(secret) })).json.error?.code, 'invalid_two_factor_code', 'a wrong code is refused as invalid');
      await awayFromStepEdge();
      const r = await from({ username: customer.username, password: PASSWORD, code: codeAt(secret, 0) });
      assert.equal(r.status, 429, `two wrong codes lock the login even with a right code: ${JSON.stringify(r.json)}`);
      assert.equal(r.json.error?.code, 'too_many_attempts', 'the refusal\'s code is too_many_attempts');
    } finally {
      await throttled.close();
      await env.db('panel_signin_failures').where((w) => w.where({ scope: 'login', key: customer.username }).orWhere({ scope: 'ip', key: ip })).delete();
    }
  });
});

describe('panel: -require-2fa-roles reseller', () => {
  const main = usePanel();
  const strict = usePanel({ flags: ['-require-2fa-roles', 'reseller'] });

  it('an unenrolled reseller may only read its account, set up two-factor, change its password, list or revoke tokens and sign out; enrolled, it works', async () => {
    const admin = await platformAdmin(main());
    // the flag of one process seeded the platform-wide policy (issue 32 item 5)
    assert.deepEqual((await admin.get('/v1/platform/two-factor-policy')).json.require_roles, ['reseller'], 'the flag seeded the stored policy');
    assert.equal((await admin.put('/v1/platform/two-factor-policy', { require_roles: [] })).status, 200, 'lifted while the tree is made');
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const reseller = await createOrgWithLogin(provider.client, { type: 'reseller' });
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    // Tokens made before the policy named its role.
    const tok = await reseller.client.post('/v1/account/tokens', { name: 'old' });
    const tok2 = await reseller.client.post('/v1/account/tokens', { name: 'older' });
    assert.equal((await admin.put('/v1/platform/two-factor-policy', { require_roles: ['reseller'] })).status, 200, 'the policy again');

    const c = new PanelClient(strict());
    const signIn = await c.signIn(reseller.username, PASSWORD);
    assert.equal(signIn.status, 200, 'it may sign in');
    const refused: Array<[string, string, unknown?]> = [
      ['GET', '/v1/orgs'],
      ['GET', `/v1/orgs/${reseller.id}`],
      ['GET', `/v1/orgs/${customer.id}`],
      ['GET', `/v1/orgs/${customer.id}/logins`],
      ['GET', `/v1/orgs/${reseller.id}/audit`],
      ['POST', '/v1/orgs', { type: 'customer', name: 'x', login: { username: unique('x'), password: PASSWORD } }],
      ['PATCH', `/v1/orgs/${customer.id}`, { name: 'renamed' }],
      ['POST', `/v1/orgs/${customer.id}/suspend`],
      ['POST', '/v1/account/tokens', { name: 'new' }],
    ];
    const expectRefused = async (client: PanelClient) => {
      for (const [m, p, body] of refused) {
        const r = await client.req(m, p, body);
        assert.equal(r.status, 403, `${m} ${p}`);
        assert.equal(r.json.error.code, 'two_factor_required', `${m} ${p}`);
        assert.equal(r.json.error.details.role, 'reseller', `${m} ${p}: the refusal names the role reseller`);
      }
    };
    await expectRefused(c);
    // Its old API token is held to the same rule.
    const bearer = new PanelClient(strict(), tok.json.token);
    await expectRefused(bearer);
    assert.equal((await bearer.get('/v1/account')).status, 200, 'the old token may read its account');
    // What it may do.
    assert.equal((await c.get('/v1/account')).status, 200, 'the unenrolled reseller may read its account');
    const tokens = await c.get('/v1/account/tokens');
    assert.equal(tokens.status, 200, `the unenrolled reseller may list its tokens: ${JSON.stringify(tokens.json)}`);
    assert.equal(tokens.json.tokens.length, 2, 'both old tokens are listed');
    assert.equal((await c.del(`/v1/account/tokens/${tok2.json.id}`)).status, 204, 'the unenrolled reseller may revoke a token');
    const changed = `changed-${randomUUID()}`;
    assert.equal((await c.post('/v1/account/password', { current_password: PASSWORD, new_password: changed })).status, 204, 'the unenrolled reseller may change its password');
    const kept = c.cookie;
    assert.equal((await c.post('/v1/auth/sign-out')).status, 204, 'the unenrolled reseller may sign out');
    c.cookie = kept;
    assert.equal((await c.get('/v1/account')).status, 401, 'the signed-out session no longer works');
    // Other roles are not concerned.
    const cust = new PanelClient(strict());
    assert.equal((await cust.signIn(customer.username, PASSWORD)).status, 200, 'a customer signs in on the strict process');
    assert.equal((await cust.get(`/v1/orgs/${customer.id}`)).status, 200, 'a customer is not held to the reseller rule');

    // Enrolled: the same session works normally, and sign-in asks for the code.
    const d = new PanelClient(strict());
    assert.equal((await d.signIn(reseller.username, changed)).status, 200, 'the reseller signs in with the changed password');
    const { secret } = await enrol(d);
    assert.equal((await d.get('/v1/orgs')).status, 200, 'once enrolled, the same session reads the orgs');
    const made = await d.post('/v1/orgs', { type: 'customer', name: 'after enrolment', login: { username: unique('cus'), password: PASSWORD } });
    assert.equal(made.status, 201, JSON.stringify(made.json));
    assert.equal((await bearer.get(`/v1/orgs/${customer.id}`)).status, 200, 'its token too');
    assert.equal((await new PanelClient(strict()).signIn(reseller.username, changed)).json.error.code, 'two_factor_code_required', 'once enrolled, sign-in asks for the code');
    await awayFromStepEdge();
    const e = new PanelClient(strict());
    assert.equal((await e.signIn(reseller.username, changed, codeAt(secret, 0))).status, 200, 'the password with a current code signs in');
    assert.equal((await e.get(`/v1/orgs/${customer.id}`)).status, 200, 'the signed-in enrolled reseller reads its customer');
  });

  it('the policy is platform-wide (issue 32 item 5): set over the API on one process, every process enforces it on the next request; a flag only seeds it', async () => {
    const admin = await platformAdmin(main());
    assert.equal((await admin.put('/v1/platform/two-factor-policy', { require_roles: ['reseller'] })).status, 200, 'the policy names resellers');
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const reseller = await createOrgWithLogin(provider.client, { type: 'reseller' });
    const onStrict = new PanelClient(strict());
    assert.equal((await onStrict.signIn(reseller.username, PASSWORD)).status, 200, 'it signs in on the other process');
    for (const [name, c] of [['the process without the flag', reseller.client], ['the process with it', onStrict]] as const) {
      const r = await c.get('/v1/orgs');
      assert.equal(r.status, 403, `${name}: ${JSON.stringify(r.json)}`);
      assert.equal(r.json.error.code, 'two_factor_required', `${name}: the code`);
    }

    const lifted = await new PanelClient(strict(), null).req('GET', '/v1/platform/two-factor-policy');
    assert.equal(lifted.status, 401, 'no sign-in, no policy');
    const adminOnStrict = new PanelClient(strict());
    assert.equal((await adminOnStrict.signIn('admin', PASSWORD)).status, 200, 'the admin on the other process');
    const set = await adminOnStrict.put('/v1/platform/two-factor-policy', { require_roles: [] });
    assert.equal(set.status, 200, JSON.stringify(set.json));
    assert.deepEqual(set.json.require_roles, [], 'nobody must use two-factor now');
    assert.equal(set.json.updated_by, 'admin', 'who set it');
    assert.equal((await reseller.client.get('/v1/orgs')).status, 200, 'the first process lets the reseller in on its next request');
    await seedTwoFactorRoles(env.db, ['reseller']);
    assert.equal((await reseller.client.get('/v1/orgs')).status, 200, 'a flag at a later start does not override the stored policy');
    const audited = await env.db('panel_audit').where({ action: 'settings.two_factor' }).orderBy('id', 'desc').first();
    assert.deepEqual([audited?.before, audited?.after], [{ require_roles: ['reseller'] }, { require_roles: [] }], 'the change is audited');

    for (const [body, field] of [[{ require_roles: ['root'] }, 'require_roles.0'], [{}, 'require_roles'], [{ require_roles: 'reseller' }, 'require_roles']] as const) {
      const r = await admin.put('/v1/platform/two-factor-policy', body);
      assert.equal(r.status, 400, `${JSON.stringify(body)}: ${JSON.stringify(r.json)}`);
      assert.equal(r.json.error.details.field, field, `${JSON.stringify(body)}: names the field`);
    }
    assert.equal((await provider.client.get('/v1/platform/two-factor-policy')).status, 404, 'below the platform: 404');
    assert.equal((await provider.client.put('/v1/platform/two-factor-policy', { require_roles: [] })).status, 404, 'below the platform: 404 on change too');
  });
});
