import assert from 'node:assert/strict';
import { randomInt, randomUUID } from 'node:crypto';
import http from 'node:http';
import { Writable } from 'node:stream';
import pino from 'pino';
import { startPanelApi, type PanelRuntime } from '../../../main/panel-api';
import { parsePanelFlags } from '../../../platform/panel-flags';
import { createOrgWithLogin, PANEL_TEST_KEY, PanelClient, PASSWORD, platformAdmin, startPanel, totp, unique, usePanel } from '../../helpers/panel';
import { env } from '../../setup/env';

// Sign-in, sessions, throttling, temporary passwords and API tokens over real HTTP (spec 2
// sections 2.5 and 5, PANEL.md section 3).

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A loopback address of its own (127.x.y.z), so the per-IP throttle of one test touches nothing else. */
const freshIp = () => `127.${randomInt(1, 255)}.${randomInt(0, 256)}.${randomInt(2, 255)}`;

/** POST /v1/auth/sign-in from a given local source address (Koa's ctx.ip is the socket's peer). */
function signInFrom(base: string, ip: string, body: Record<string, unknown>): Promise<{ status: number; headers: http.IncomingHttpHeaders; json: any }> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const u = new URL(base + '/v1/auth/sign-in');
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: u.hostname, port: u.port, path: u.pathname, method: 'POST', localAddress: ip, agent: false, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } },
      (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, json: text ? JSON.parse(text) : undefined }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/** A new customer (below a new provider) whose login has changed its password to PASSWORD. */
async function newCustomer(base: string) {
  const admin = await platformAdmin(base);
  const provider = await createOrgWithLogin(admin, { type: 'provider' });
  const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
  return { admin, provider, customer };
}

describe('panel: sign-in and sessions', () => {
  const url = usePanel();

  it('sets an HttpOnly, SameSite=Strict session cookie and answers with the login', async () => {
    const { customer } = await newCustomer(url());
    const c = new PanelClient(url());
    const r = await c.signIn(customer.username, PASSWORD);
    assert.equal(r.status, 200, `the sign-in succeeds: ${JSON.stringify(r.json)}`);
    assert.equal(r.json.login.username, customer.username, 'the answer names the login');
    assert.equal(r.json.login.role, 'account_owner', 'a customer\'s first login is its account owner');
    assert.equal(r.json.must_change_password, false, 'a changed password has nothing left to change');
    const cookie = r.headers.get('set-cookie')!;
    assert.match(cookie, /^panel_session=[A-Za-z0-9_-]{40,};/, 'the cookie is a long random panel_session');
    const attrs = cookie.toLowerCase().split(';').map((s) => s.trim());
    assert.ok(attrs.includes('httponly'), cookie);
    assert.ok(attrs.includes('samesite=strict'), cookie);
    assert.ok(attrs.includes('path=/'), cookie);
    const me = await c.get('/v1/account');
    assert.equal(me.status, 200, 'the cookie opens the account page');
    assert.equal(me.json.login.username, customer.username, 'the session is the login\'s');
    assert.equal(me.json.via, 'session', 'authenticated by the session cookie');
    // The username is matched case-insensitively (usernames are lower-case).
    assert.equal((await new PanelClient(url()).signIn(customer.username.toUpperCase(), PASSWORD)).status, 200, 'an upper-case username signs in too');
  });

  it('answers a wrong password and an unknown username alike: 401 invalid_credentials, same body, no cookie', async () => {
    const { customer } = await newCustomer(url());
    const wrong = await new PanelClient(url()).signIn(customer.username, 'not the password at all');
    const unknown = await new PanelClient(url()).signIn(unique('nobody'), 'not the password at all');
    for (const r of [wrong, unknown]) {
      assert.equal(r.status, 401, 'refused as 401');
      assert.equal(r.json.error.code, 'invalid_credentials', 'refused as invalid_credentials');
      assert.equal(r.headers.get('set-cookie'), null, 'no cookie for a refused sign-in');
    }
    assert.deepEqual(wrong.json, unknown.json, 'a wrong password and an unknown username get the same body');
    await env.db('panel_signin_failures').where({ scope: 'login' }).whereIn('key', [customer.username]).delete();
  });

  it('refuses requests without a cookie, with an unknown cookie, and with the cookie of a session that signed out', async () => {
    const anon = new PanelClient(url());
    for (const path of ['/v1/account', '/v1/orgs', '/v1/account/tokens']) {
      const r = await anon.get(path);
      assert.equal(r.status, 401, `${path} without a cookie is 401`);
      assert.equal(r.json.error.code, 'unauthenticated', `${path} without a cookie is unauthenticated`);
    }
    assert.equal((await anon.post('/v1/auth/sign-out')).status, 401, 'sign-out without a session is 401');
    anon.cookie = 'panel_session=' + 'A'.repeat(43);
    assert.equal((await anon.get('/v1/account')).json.error.code, 'unauthenticated', 'an unknown cookie is unauthenticated');

    const { customer } = await newCustomer(url());
    const c = new PanelClient(url());
    await c.signIn(customer.username, PASSWORD);
    const kept = c.cookie;
    const other = new PanelClient(url());
    await other.signIn(customer.username, PASSWORD);
    const out = await c.post('/v1/auth/sign-out');
    assert.equal(out.status, 204, 'sign-out answers 204');
    assert.equal(c.cookie, null, 'sign-out clears the cookie');
    c.cookie = kept; // a client that keeps the old cookie anyway
    const r = await c.get('/v1/account');
    assert.equal(r.status, 401, 'the signed-out session\'s cookie is refused');
    assert.equal(r.json.error.code, 'unauthenticated', 'the signed-out session is unauthenticated');
    // Only that session ended.
    assert.equal((await other.get('/v1/account')).status, 200, 'the login\'s other session still works');
  });

  it('ends a session left idle longer than sessionIdleMs, and keeps an active one alive past it', async function () {
    this.timeout(30_000);
    const { customer } = await newCustomer(url());
    const short = await startPanel({ sessionIdleMs: 2000 });
    try {
      const active = new PanelClient(short.url);
      const idle = new PanelClient(short.url);
      const r = await active.signIn(customer.username, PASSWORD);
      await idle.signIn(customer.username, PASSWORD);
      // The cookie outlives the idle period (the server enforces that), up to the session's maximum life.
      const expires = Date.parse(/expires=([^;]+)/i.exec(r.headers.get('set-cookie')!)![1]);
      assert.ok(expires > Date.now() + 6 * 86_400_000, `cookie expires ${new Date(expires).toISOString()}`);
      // Used every 1.2 s: alive at 2.4 s, beyond the 2 s idle period.
      await sleep(1200);
      assert.equal((await active.get('/v1/account')).status, 200, 'used at 1.2 s: still alive');
      await sleep(1200);
      assert.equal((await active.get('/v1/account')).status, 200, 'an active session is kept alive');
      const gone = await idle.get('/v1/account');
      assert.equal(gone.status, 401, 'the idle session ended');
      assert.equal(gone.json.error.code, 'unauthenticated', 'the idle session is unauthenticated');
      await sleep(2600);
      assert.equal((await active.get('/v1/account')).status, 401, 'idle for 2.6 s');
    } finally {
      await short.close();
    }
  });
});

describe('panel: session maximum life', () => {
  let panel: PanelRuntime | null = null;
  before(async function () {
    this.timeout(30_000);
    panel = await startPanelApi({
      db: env.db,
      temporalAddress: env.temporalAddress,
      namespace: 'default',
      logger: env.logger,
      port: 0,
      flags: parsePanelFlags([]),
      sealingKey: PANEL_TEST_KEY,
      sessionIdleMs: 1500,
      sessionMaxMs: 3000,
      throttle: { loginFailures: 1000, ipFailures: 100_000 },
    });
  });
  after(async () => {
    await panel?.close();
  });

  it('ends a session at sessionMaxMs however active it is; the cookie expires then too', async function () {
    this.timeout(20_000);
    const { customer } = await newCustomer(panel!.url);
    const c = new PanelClient(panel!.url);
    const started = Date.now();
    const r = await c.signIn(customer.username, PASSWORD);
    const expires = Date.parse(/expires=([^;]+)/i.exec(r.headers.get('set-cookie')!)![1]);
    assert.ok(Math.abs(expires - (started + 3000)) < 2000, `cookie expires ${new Date(expires).toISOString()}`);
    while (Date.now() - started + 700 < 2600) {
      await sleep(700);
      assert.equal((await c.get('/v1/account')).status, 200, `active at ${Date.now() - started} ms`);
    }
    await sleep(Math.max(0, started + 3300 - Date.now()));
    assert.equal((await c.get('/v1/account')).status, 401, 'ended at sessionMaxMs despite activity');
  });
});

describe('panel: sign-in throttling per login and per IP', () => {
  const url = usePanel({ throttle: { loginFailures: 3, ipFailures: 5, windowSeconds: 60, lockSeconds: 3 } });
  const ips: string[] = [];
  const usernames: string[] = [];
  const ip = () => {
    const a = freshIp();
    ips.push(a);
    return a;
  };
  after(async () => {
    await env.db('panel_signin_failures').where({ scope: 'ip' }).whereIn('key', ips).delete();
    await env.db('panel_signin_failures').where({ scope: 'login' }).whereIn('key', usernames).delete();
  });

  it('locks a username after 3 failures: the 4th attempt is 429 with Retry-After even with the right password, from any address; the lock ends', async function () {
    this.timeout(20_000);
    const { customer, provider } = await newCustomer(url());
    usernames.push(customer.username, provider.username);
    const here = ip();
    for (let i = 0; i < 3; i++) {
      const r = await signInFrom(url(), here, { username: customer.username, password: `wrong password ${i}` });
      assert.equal(r.status, 401, `wrong password ${i} is 401`);
      assert.equal(r.json.error.code, 'invalid_credentials', `wrong password ${i} is invalid_credentials`);
    }
    for (const from of [here, ip()]) {
      const r = await signInFrom(url(), from, { username: customer.username, password: PASSWORD });
      assert.equal(r.status, 429, `the locked login from ${from} is 429 even with the right password`);
      assert.equal(r.json.error.code, 'too_many_attempts', 'throttled as too_many_attempts');
      assert.equal(r.json.error.details.scope, 'login', 'the lock is on the login');
      const retry = Number(r.headers['retry-after']);
      assert.ok(Number.isInteger(retry) && retry >= 1 && retry <= 3, `Retry-After ${r.headers['retry-after']}`);
      assert.equal(r.headers['set-cookie'], undefined, 'no cookie for a throttled sign-in');
    }
    // Another username from the same address is not locked by this login's failures (3 < 5 per IP).
    assert.equal((await signInFrom(url(), here, { username: provider.username, password: PASSWORD })).status, 200, 'another username from the same address signs in');
    // After the lock, the right password works, and a success resets the login's count.
    await sleep(3100);
    assert.equal((await signInFrom(url(), here, { username: customer.username, password: PASSWORD })).status, 200, 'after the lock the right password works');
    for (let i = 0; i < 2; i++) await signInFrom(url(), ip(), { username: customer.username, password: 'wrong again, twice' });
    assert.equal((await signInFrom(url(), ip(), { username: customer.username, password: PASSWORD })).status, 200, 'a success reset the count: two more failures do not lock');
  });

  it('a burst of parallel attempts on one username gets at most 3 password checks; the rest are 429', async () => {
    const { customer } = await newCustomer(url());
    usernames.push(customer.username);
    const replies = await Promise.all(Array.from({ length: 15 }, (_, i) => signInFrom(url(), ip(), { username: customer.username, password: `wrong password ${i}` })));
    const checked = replies.filter((r) => r.status === 401).length;
    assert.ok(checked >= 1 && checked <= 3, `${checked} of 15 parallel attempts were checked`);
    assert.equal(replies.filter((r) => r.status === 429 && r.json.error.code === 'too_many_attempts').length, 15 - checked, 'every attempt not checked is throttled');
    assert.equal((await signInFrom(url(), ip(), { username: customer.username, password: PASSWORD })).status, 429, 'the login is locked afterwards');
  });

  it('a burst of parallel attempts from one address gets at most 5 password checks; the rest are 429', async () => {
    const from = ip();
    const names = Array.from({ length: 15 }, () => unique('burst'));
    usernames.push(...names);
    const replies = await Promise.all(names.map((username) => signInFrom(url(), from, { username, password: 'a guessed password' })));
    const checked = replies.filter((r) => r.status === 401).length;
    assert.ok(checked >= 1 && checked <= 5, `${checked} of 15 parallel attempts were checked`);
    assert.equal(replies.filter((r) => r.status === 429).length, 15 - checked, 'every attempt not checked is throttled');
  });

  it('only failures count: successful sign-ins from an address do not use up its budget', async () => {
    const { customer } = await newCustomer(url());
    usernames.push(customer.username);
    const from = ip();
    for (let i = 0; i < 7; i++) assert.equal((await signInFrom(url(), from, { username: customer.username, password: PASSWORD })).status, 200, `success ${i + 1} from the address`);
    for (let i = 0; i < 5; i++) {
      const name = unique('guess');
      usernames.push(name);
      assert.equal((await signInFrom(url(), from, { username: name, password: 'a guessed password' })).status, 401, `failure ${i + 1}`);
    }
    const r = await signInFrom(url(), from, { username: customer.username, password: PASSWORD });
    assert.equal(r.status, 429, 'the address\'s budget is used up by failures only');
    assert.equal(r.json.error.details.scope, 'address', 'the lock is on the address');
  });

  it('locks an unknown username the same way (no hint that it does not exist)', async () => {
    const nobody = unique('nobody');
    usernames.push(nobody);
    const from = ip();
    for (let i = 0; i < 3; i++) assert.equal((await signInFrom(url(), from, { username: nobody, password: 'whatever it is' })).status, 401, `failure ${i + 1} on an unknown username`);
    const r = await signInFrom(url(), from, { username: nobody, password: 'whatever it is' });
    assert.equal(r.status, 429, 'the unknown username is locked after 3 failures');
    assert.equal(r.json.error.code, 'too_many_attempts', 'throttled as too_many_attempts');
    assert.ok(r.headers['retry-after'], 'a throttled sign-in carries retry-after');
  });

  it('locks an address after 5 failures over any usernames: another username from it is refused, from elsewhere it signs in', async () => {
    const { customer } = await newCustomer(url());
    usernames.push(customer.username);
    const from = ip();
    for (let i = 0; i < 5; i++) {
      const name = unique('guess');
      usernames.push(name);
      assert.equal((await signInFrom(url(), from, { username: name, password: 'a guessed password' })).status, 401, `failure ${i + 1} from the address`);
    }
    const r = await signInFrom(url(), from, { username: customer.username, password: PASSWORD });
    assert.equal(r.status, 429, 'another username from the locked address is refused');
    assert.equal(r.json.error.code, 'too_many_attempts', 'throttled as too_many_attempts');
    assert.equal(r.json.error.details.scope, 'address', 'the lock is on the address');
    assert.ok(Number(r.headers['retry-after']) >= 1, `an address-throttled sign-in carries retry-after: ${r.headers['retry-after']}`);
    assert.equal((await signInFrom(url(), ip(), { username: customer.username, password: PASSWORD })).status, 200, 'the same login signs in from another address');
  });
});

describe('panel: temporary passwords', () => {
  const url = usePanel();

  /** Only the account page, the password change and sign-out work; everything else is 403 password_change_required. */
  async function assertOnlyPasswordChange(c: PanelClient, orgId: string) {
    assert.equal((await c.get('/v1/account')).status, 200, 'the account page works with a temporary password');
    assert.equal((await c.get('/v1/account')).json.login.must_change_password, true, 'the account page says the password must change');
    const refused: Array<[string, string, unknown?]> = [
      ['GET', '/v1/orgs'],
      ['GET', `/v1/orgs/${orgId}`],
      ['GET', `/v1/orgs/${orgId}/logins`],
      ['GET', `/v1/orgs/${orgId}/audit`],
      ['PATCH', `/v1/orgs/${orgId}`, { name: 'renamed' }],
      ['POST', '/v1/orgs', { type: 'customer', name: 'x', login: { username: unique('x'), password: PASSWORD } }],
      ['GET', '/v1/account/tokens'],
      ['POST', '/v1/account/tokens', { name: 'x' }],
      ['POST', '/v1/account/two-factor'],
    ];
    for (const [m, p, body] of refused) {
      const r = await c.req(m, p, body);
      assert.equal(r.status, 403, `${m} ${p}`);
      assert.equal(r.json.error.code, 'password_change_required', `${m} ${p}`);
    }
  }

  it('the first login of a new org: only its account, the password change and sign-out until it changes the password', async () => {
    const admin = await platformAdmin(url());
    const username = unique('prv');
    const temporary = `temp-${randomUUID()}`;
    const created = await admin.post('/v1/orgs', { type: 'provider', name: username, login: { username, password: temporary } });
    assert.equal(created.status, 201, `the org is created: ${JSON.stringify(created.json)}`);
    assert.equal(created.json.first_login.must_change_password, true, 'the first login must change its password');
    const c = new PanelClient(url());
    const r = await c.signIn(username, temporary);
    assert.equal(r.status, 200, 'the temporary password signs in');
    assert.equal(r.json.must_change_password, true, 'the sign-in says the password must change');
    await assertOnlyPasswordChange(c, created.json.id);

    // The change is validated: length of the new one (naming the field), the current one, and a different one.
    const short = await c.post('/v1/account/password', { current_password: temporary, new_password: 'elevenchars' });
    assert.equal(short.status, 400, 'a short new password is refused');
    assert.equal(short.json.error.code, 'validation_failed', 'refused as validation_failed');
    assert.equal(short.json.error.details.field, 'new_password', 'the refusal names new_password');
    const wrongCurrent = await c.post('/v1/account/password', { current_password: 'not the current one', new_password: PASSWORD });
    assert.equal(wrongCurrent.status, 400, 'a wrong current password is refused');
    assert.equal(wrongCurrent.json.error.details.field, 'current_password', 'the refusal names current_password');
    const same = await c.post('/v1/account/password', { current_password: temporary, new_password: temporary });
    assert.equal(same.status, 400, 'the same password again is refused');
    assert.equal(same.json.error.details.field, 'new_password', 'the refusal names new_password');
    const twelve = 'twelve chars';
    assert.equal(twelve.length, 12, 'the test password is exactly 12 characters');
    assert.equal((await c.post('/v1/account/password', { current_password: temporary, new_password: twelve })).status, 204, 'a 12-character password is accepted');
    assert.equal((await c.get('/v1/orgs')).status, 200, 'after the change the orgs are readable');
    assert.equal((await c.get('/v1/account')).json.login.must_change_password, false, 'nothing left to change');
    // The temporary password no longer signs in; the new one does, with nothing to change.
    assert.equal((await new PanelClient(url()).signIn(username, temporary)).status, 401, 'the temporary password no longer signs in');
    const again = await new PanelClient(url()).signIn(username, twelve);
    assert.equal(again.status, 200, 'the new password signs in');
    assert.equal(again.json.must_change_password, false, 'nothing left to change at the next sign-in');
  });

  it('a temporary-password login may sign out', async () => {
    const admin = await platformAdmin(url());
    const username = unique('prv');
    const temporary = `temp-${randomUUID()}`;
    assert.equal((await admin.post('/v1/orgs', { type: 'provider', name: username, login: { username, password: temporary } })).status, 201, 'the provider is created with a temporary password');
    const c = new PanelClient(url());
    await c.signIn(username, temporary);
    const kept = c.cookie;
    assert.equal((await c.post('/v1/auth/sign-out')).status, 204, 'a temporary-password login signs out');
    c.cookie = kept;
    assert.equal((await c.get('/v1/account')).status, 401, 'the signed-out session is refused');
  });

  it('a login created by the level above and a reset password are temporary too', async () => {
    const { provider, customer } = await newCustomer(url());
    const username = unique('second');
    const temporary = `temp-${randomUUID()}`;
    const created = await provider.client.post(`/v1/orgs/${customer.id}/logins`, { username, password: temporary });
    assert.equal(created.status, 201, `the login is created: ${JSON.stringify(created.json)}`);
    assert.equal(created.json.must_change_password, true, 'a login made by the level above must change its password');
    const c = new PanelClient(url());
    assert.equal((await c.signIn(username, temporary)).json.must_change_password, true, 'the sign-in says the password must change');
    await assertOnlyPasswordChange(c, customer.id);
    assert.equal((await c.post('/v1/account/password', { current_password: temporary, new_password: PASSWORD })).status, 204, 'the password change is accepted');
    assert.equal((await c.get(`/v1/orgs/${customer.id}`)).status, 200, 'after the change the org is readable');

    const reset = `reset-${randomUUID()}`;
    const rr = await provider.client.post(`/v1/logins/${created.json.id}/reset-password`, { password: reset });
    assert.equal(rr.status, 200, `the password is reset: ${JSON.stringify(rr.json)}`);
    assert.equal(rr.json.must_change_password, true, 'a reset password must be changed');
    const d = new PanelClient(url());
    assert.equal((await d.signIn(username, PASSWORD)).status, 401, 'the old password is gone');
    assert.equal((await d.signIn(username, reset)).json.must_change_password, true, 'the reset password signs in and must change');
    await assertOnlyPasswordChange(d, customer.id);
    assert.equal((await d.post('/v1/account/password', { current_password: reset, new_password: PASSWORD })).status, 204, 'the password change is accepted');
    assert.equal((await d.get(`/v1/orgs/${customer.id}`)).status, 200, 'after the change the org is readable');
  });

  it('a password change ends the login\'s other sessions, not the one that made it', async () => {
    const { customer } = await newCustomer(url());
    const a = new PanelClient(url());
    const b = new PanelClient(url());
    await a.signIn(customer.username, PASSWORD);
    await b.signIn(customer.username, PASSWORD);
    const next = `next-${randomUUID()}`;
    assert.equal((await a.post('/v1/account/password', { current_password: PASSWORD, new_password: next })).status, 204, 'the password change is accepted');
    assert.equal((await a.get('/v1/account')).status, 200, 'the session that made the change goes on');
    const r = await b.get('/v1/account');
    assert.equal(r.status, 401, 'the login\'s other session ended');
    assert.equal(r.json.error.code, 'unauthenticated', 'the ended session is unauthenticated');
    // The first session of createOrgWithLogin ended too.
    assert.equal((await customer.client.get('/v1/account')).status, 401, 'the session createOrgWithLogin opened ended too');
  });

  it('validates usernames (3 to 32 lower-case) and passwords (at least 12) naming the field', async () => {
    const { provider, customer } = await newCustomer(url());
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ username: 'ab', password: PASSWORD }, 'username'],
      [{ username: 'x'.repeat(33), password: PASSWORD }, 'username'],
      [{ username: 'Upper-case', password: PASSWORD }, 'username'],
      [{ username: 'with space', password: PASSWORD }, 'username'],
      [{ username: unique('ok'), password: 'elevenchars' }, 'password'],
      [{ username: unique('ok'), password: '' }, 'password'],
      [{ username: unique('ok'), password: PASSWORD, role: 'reseller' }, 'role'],
    ];
    for (const [body, field] of cases) {
      const r = await provider.client.post(`/v1/orgs/${customer.id}/logins`, body);
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.equal(r.json.error.code, 'validation_failed', `${JSON.stringify(body)}: refused as validation_failed`);
      assert.equal(r.json.error.details.field, field, JSON.stringify(r.json));
    }
    // The bounds themselves are accepted: 3 and 32 characters, a 12-character password.
    const three = randomUUID().slice(0, 3).replace(/^[^a-z0-9]/, 'a');
    for (const username of [three, unique('b').padEnd(32, 'z')]) {
      const r = await provider.client.post(`/v1/orgs/${customer.id}/logins`, { username, password: 'exactly12chr' });
      assert.equal(r.status, 201, `${username}: ${JSON.stringify(r.json)}`);
    }
    // Creating an org names the field of its first login; a reset and a change name theirs.
    const org = await provider.client.post('/v1/orgs', { type: 'customer', name: 'x', login: { username: 'X', password: PASSWORD } });
    assert.equal(org.json.error.details.field, 'login.username', 'the org\'s refusal names login.username');
    const org2 = await provider.client.post('/v1/orgs', { type: 'customer', name: 'x', login: { username: unique('c'), password: 'short' } });
    assert.equal(org2.json.error.details.field, 'login.password', 'the org\'s refusal names login.password');
    const login = (await provider.client.get(`/v1/orgs/${customer.id}/logins`)).json.logins[0];
    const reset = await provider.client.post(`/v1/logins/${login.id}/reset-password`, { password: 'short' });
    assert.equal(reset.status, 400, 'a short reset password is refused');
    assert.equal(reset.json.error.details.field, 'password', 'the reset\'s refusal names password');
    // A taken username is a conflict.
    const taken = await provider.client.post(`/v1/orgs/${customer.id}/logins`, { username: customer.username, password: PASSWORD });
    assert.equal(taken.status, 409, 'a taken username is a conflict');
  });
});

describe('panel: API tokens', () => {
  const url = usePanel();

  it('a password reset by the level above revokes every API token of the login and says so (issue 32 item 11)', async () => {
    const { provider, customer } = await newCustomer(url());
    const tokens: string[] = [];
    for (const name of ['deploy', 'backup script']) {
      const t = await customer.client.post('/v1/account/tokens', { name });
      assert.equal(t.status, 201, JSON.stringify(t.json));
      tokens.push(t.json.token);
    }
    const other = await provider.client.post('/v1/account/tokens', { name: 'the level above' });
    for (const t of tokens) assert.equal((await new PanelClient(url(), t).get('/v1/account')).status, 200, 'a token works before the reset');
    const login = (await provider.client.get(`/v1/orgs/${customer.id}/logins`)).json.logins[0];
    const reset = await provider.client.post(`/v1/logins/${login.id}/reset-password`, { password: `reset-${randomUUID()}` });
    assert.equal(reset.status, 200, JSON.stringify(reset.json));
    assert.equal(reset.json.tokens_revoked, 2, `the answer counts the revoked tokens: ${JSON.stringify(reset.json)}`);
    assert.equal(typeof reset.json.sessions_ended, 'number', 'and the ended sessions');
    for (const t of tokens) {
      const r = await new PanelClient(url(), t).get('/v1/account');
      assert.equal(r.status, 401, `a token of the reset login stops at once: ${JSON.stringify(r.json)}`);
    }
    assert.equal((await new PanelClient(url(), other.json.token).get('/v1/account')).status, 200, 'other logins keep their tokens');
    const entry = (await provider.client.get(`/v1/orgs/${customer.id}/audit`)).json.entries.find((e: { action: string }) => e.action === 'login.reset_password');
    assert.equal(entry?.after?.tokens_revoked, 2, `the audit entry records it: ${JSON.stringify(entry)}`);
  });

  it('are shown once (pnl_ prefix), listed without the token, carry the login\'s role and scope, and stop when revoked', async () => {
    const admin = await platformAdmin(url());
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const reseller = await createOrgWithLogin(provider.client, { type: 'reseller' });
    const sibling = await createOrgWithLogin(provider.client, { type: 'reseller' });
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const created = await reseller.client.post('/v1/account/tokens', { name: 'billing export' });
    assert.equal(created.status, 201, `the token is created: ${JSON.stringify(created.json)}`);
    const token: string = created.json.token;
    assert.match(token, /^pnl_[A-Za-z0-9_-]{40,}$/, 'the token is a long random pnl_ token');
    assert.equal(created.json.name, 'billing export', 'the token keeps its name');
    const listed = await reseller.client.get('/v1/account/tokens');
    assert.equal(listed.status, 200, 'the tokens are listed');
    assert.deepEqual(listed.json.tokens.map((t: { id: string }) => t.id), [created.json.id], 'the one token is listed');
    assert.ok(!JSON.stringify(listed.json).includes(token), 'the token is never listed');
    assert.ok(!JSON.stringify(listed.json).includes(token.slice(12)), 'nor more of it than the prefix');
    assert.equal(listed.json.tokens[0].name, 'billing export', 'the listed token keeps its name');

    const bearer = new PanelClient(url(), token);
    const me = await bearer.get('/v1/account');
    assert.equal(me.status, 200, 'the token opens the account page');
    assert.equal(me.json.via, 'token', 'authenticated by the token');
    assert.equal(me.json.login.username, reseller.username, 'the token acts as its login');
    assert.equal(me.json.login.role, 'reseller', 'the token carries the login\'s role');
    assert.equal((await bearer.get(`/v1/orgs/${customer.id}`)).status, 200, 'the token reaches an org below');
    assert.equal((await bearer.get(`/v1/orgs/${sibling.id}`)).status, 404, 'the token does not reach a sibling org');
    assert.equal((await bearer.get(`/v1/orgs/${provider.id}`)).status, 404, 'the token does not reach the org above');
    const made = await bearer.post('/v1/orgs', { type: 'customer', name: 'by token', login: { username: unique('tok'), password: PASSWORD } });
    assert.equal(made.status, 201, JSON.stringify(made.json));
    // As for the login itself: the suspension of its own org is for the level above.
    assert.equal((await bearer.post(`/v1/orgs/${reseller.id}/suspend`)).json.error.code, 'forbidden', 'the token cannot suspend its own org');
    // The last use is recorded.
    assert.ok((await reseller.client.get('/v1/account/tokens')).json.tokens[0].last_used_at, 'the token records its last use');
    // A bearer token wins over a cookie; an unknown one is refused.
    for (const t of ['pnl_' + 'x'.repeat(43), 'not-a-panel-token', token + 'x']) {
      const r = await new PanelClient(url(), t).get('/v1/account');
      assert.equal(r.status, 401, t);
      assert.equal(r.json.error.code, 'unauthenticated', `${t}: an unknown token is unauthenticated`);
    }

    // Another login cannot revoke it; its owner can, and then it is refused.
    assert.equal((await customer.client.del(`/v1/account/tokens/${created.json.id}`)).status, 404, 'another login cannot revoke the token');
    assert.equal((await bearer.get('/v1/account')).status, 200, 'the token still works');
    assert.equal((await reseller.client.del(`/v1/account/tokens/${created.json.id}`)).status, 204, 'its owner revokes it');
    const revoked = await bearer.get('/v1/account');
    assert.equal(revoked.status, 401, 'the revoked token is refused');
    assert.equal(revoked.json.error.code, 'unauthenticated', 'the revoked token is unauthenticated');
    assert.equal((await reseller.client.del(`/v1/account/tokens/${created.json.id}`)).status, 404, 'revoking again finds nothing');
    assert.deepEqual((await reseller.client.get('/v1/account/tokens')).json.tokens, [], 'no tokens left');
  });

  it('are refused while their login, its org or an org above it is suspended', async () => {
    const admin = await platformAdmin(url());
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const reseller = await createOrgWithLogin(provider.client, { type: 'reseller' });
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const token = (await customer.client.post('/v1/account/tokens', { name: 'ci' })).json.token;
    const bearer = new PanelClient(url(), token);
    const loginId = (await bearer.get('/v1/account')).json.login.id;
    const expectSuspended = async (why: string) => {
      const r = await bearer.get(`/v1/orgs/${customer.id}`);
      assert.equal(r.status, 403, why);
      assert.equal(r.json.error.code, 'suspended', why);
    };
    const steps: Array<[string, PanelClient, string]> = [
      ['login', reseller.client, `/v1/logins/${loginId}`],
      ['own org', reseller.client, `/v1/orgs/${customer.id}`],
      ['org above', provider.client, `/v1/orgs/${reseller.id}`],
      ['org two levels above', admin, `/v1/orgs/${provider.id}`],
    ];
    for (const [why, by, path] of steps) {
      assert.equal((await by.post(`${path}/suspend`)).status, 200, why);
      await expectSuspended(why);
      assert.equal((await by.post(`${path}/reactivate`)).status, 200, why);
      assert.equal((await bearer.get(`/v1/orgs/${customer.id}`)).status, 200, `${why} reactivated`);
    }
  });
});

describe('panel: secrets never appear in responses after creation, in the audit log or in logs', () => {
  let panel: PanelRuntime | null = null;
  const lines: string[] = [];
  before(async function () {
    this.timeout(30_000);
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    });
    panel = await startPanelApi({
      db: env.db,
      temporalAddress: env.temporalAddress,
      namespace: 'default',
      logger: pino({ level: 'trace' }, sink),
      port: 0,
      flags: parsePanelFlags([]),
      sealingKey: PANEL_TEST_KEY,
      sessionIdleMs: 3_600_000,
      sessionMaxMs: 86_400_000,
      throttle: { loginFailures: 1000, ipFailures: 100_000 },
    });
  });
  after(async () => {
    await panel?.close();
  });

  it('passwords, TOTP secrets, recovery codes, session cookies and API tokens', async function () {
    this.timeout(30_000);
    const base = panel!.url;
    const secrets: string[] = [];
    const admin = await platformAdmin(base);
    const username = unique('prv');
    const temporary = `temporary-${randomUUID()}`;
    secrets.push(temporary);
    const created = await admin.post('/v1/orgs', { type: 'provider', name: username, login: { username, password: temporary } });
    assert.equal(created.status, 201, `the provider is created: ${JSON.stringify(created.json)}`);
    const c = new PanelClient(base);
    await c.signIn(username, temporary);
    secrets.push(c.cookie!.split('=')[1]);
    const chosen = `chosen-${randomUUID()}`;
    secrets.push(chosen);
    assert.equal((await c.post('/v1/account/password', { current_password: temporary, new_password: chosen })).status, 204, 'the temporary password is changed');
    const wrong = `wrong-${randomUUID()}`;
    secrets.push(wrong);
    assert.equal((await new PanelClient(base).signIn(username, wrong)).status, 401, 'a wrong password is refused');
    assert.equal((await c.post('/v1/account/password', { current_password: wrong, new_password: `never-${randomUUID()}` })).status, 400, 'a change with a wrong current password is refused');

    const enrol = await c.post('/v1/account/two-factor');
    const secret: string = enrol.json.secret;
    secrets.push(secret);
    const confirm = await c.post('/v1/account/two-factor/confirm', { code: totp(secret, Math.floor(Date.now() / 1000) - 30) });
    assert.equal(confirm.status, 200, JSON.stringify(confirm.json));
    const codes: string[] = confirm.json.recovery_codes;
    secrets.push(...codes);
    assert.equal((await new PanelClient(base).signIn(username, chosen, codes[0])).status, 200, 'a recovery code signs in');

    const tok = await c.post('/v1/account/tokens', { name: 'log test' });
    const token: string = tok.json.token;
    secrets.push(token);
    assert.equal((await new PanelClient(base, token).get('/v1/account')).status, 200, 'the token opens the account page');

    // A login below, created and reset by this provider.
    const customer = await createOrgWithLogin(new PanelClient(base, token), { type: 'customer' });
    const customerLogin = (await customer.client.get('/v1/account')).json.login.id;
    const reset = `reset-${randomUUID()}`;
    secrets.push(reset);
    assert.equal((await c.post(`/v1/logins/${customerLogin}/reset-password`, { password: reset })).status, 200, 'the level above resets the customer\'s password');
    const extra = `extra-${randomUUID()}`;
    secrets.push(extra);
    assert.equal((await c.post(`/v1/orgs/${customer.id}/logins`, { username: unique('extra'), password: extra })).status, 201, 'the level above creates a login with a password');

    // Every read the login and the level above make afterwards.
    const reads = [
      await c.get('/v1/account'),
      await c.get('/v1/account/tokens'),
      await c.get(`/v1/orgs/${created.json.id}`),
      await c.get(`/v1/orgs/${created.json.id}/audit?limit=500`),
      await c.get(`/v1/orgs/${customer.id}/logins`),
      await admin.get(`/v1/orgs/${created.json.id}/logins`),
      await admin.get(`/v1/orgs/${created.json.id}/audit?limit=500`),
      await admin.get(`/v1/orgs?root=${created.json.id}`),
    ];
    for (const r of reads) assert.equal(r.status, 200, 'every read the login and the level above make succeeds');
    const responses = JSON.stringify(reads.map((r) => r.json));
    const auditRows = JSON.stringify(await env.db('panel_audit').where('org_path', 'like', `%${created.json.id}/%`));
    const logs = lines.join('');
    assert.ok(logs.includes('"msg":"request"') && logs.includes(username), 'the panel logged its requests');
    for (const s of secrets) {
      assert.ok(!responses.includes(s), `a secret in a response: ${s.slice(0, 6)}…`);
      assert.ok(!auditRows.includes(s), `a secret in the audit log: ${s.slice(0, 6)}…`);
      assert.ok(!logs.includes(s), `a secret in the logs: ${s.slice(0, 6)}…`);
    }
    // Nor what is stored of them: argon2 hashes, sealed TOTP secrets (v1.<iv>.<tag>.<ciphertext>).
    assert.doesNotMatch(responses, /\$argon2|v1\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]{22}\./, 'no password hash or sealed TOTP secret in any response');
  });
});
