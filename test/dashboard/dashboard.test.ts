import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { generateSync } from 'otplib';
import { call, settled, useStack } from '../helpers/stack';
import { dashboardUser, shot, signedIn, useBrowser } from '../helpers/dashboard';
import { createKey } from '../../services/keys/keys';
import { env } from '../setup/env';
import { startGatewayApi } from '../../main/gateway';

// The gateway dashboard (issue 22) in Debian's chromium against the real stack: sign-in, a key
// created in the browser and used with the OpenAI SDK, its request found by x-request-id on the
// requests page, revocation refusing the next call, and the usage page against /v1/usage.

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const HI = { model: 'sim-gpt', messages: [{ role: 'user' as const, content: 'hi [sim tokens=7]' }] };

describe('gateway dashboard, keyed variant (issue 22)', function () {
  this.timeout(120_000);
  const stack = useStack({ variant: 'keyed' });
  const { browser } = useBrowser();

  it('signs in, creates a key with limits, finds its request by x-request-id, revokes it and the next call is refused', async () => {
    const base = stack.gateway.url;
    const user = await dashboardUser();
    const { context, page } = await signedIn(browser(), base, user);
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
    await shot(page, 'keyed-01-keys-empty');

    await page.fill('#label', 'ci key');
    await page.fill('#spend_limit', '500');
    await page.fill('#rpm', '120');
    await page.fill('#expires_at', '2099-12-31');
    await page.selectOption('#models', ['sim-gpt']);
    await page.click('#create-key button[type=submit]');
    const key = (await page.textContent('#full-key'))!.trim();
    assert.match(key, /^mt-/, "the created key is shown in full with the keyed variant's mt- prefix");
    await page.click('[data-copy=full-key]');
    assert.equal(await page.evaluate<string>('navigator.clipboard.readText()'), key, 'the copy button puts the key on the clipboard');
    await shot(page, 'keyed-02-key-created');
    // Shown once: the list does not show it again.
    await page.goto(`${base}/dashboard/keys`);
    assert.ok(!(await page.content()).includes(key), 'the full key is not on the keys page again');

    const row = await env.db('api_keys').where({ account_id: user.accountId }).first();
    assert.equal(row.label, 'ci key', 'the key keeps the label typed in the form');
    assert.equal(row.rpm, 120, 'the key keeps its requests-per-minute limit');
    assert.equal(String(row.spend_limit).replace(/\.?0+$/, ''), '500', 'the key keeps its spend limit');
    assert.deepEqual(row.allowed_models, ['sim-gpt'], 'the key is limited to the model chosen');
    assert.equal(row.expires_at.toISOString(), '2100-01-01T00:00:00.000Z', 'the key expires at the end of the chosen day');

    const client = new OpenAI({ apiKey: key, baseURL: `${base}/v1`, maxRetries: 0 });
    const { data, response } = await client.chat.completions.create(HI).withResponse();
    assert.equal(data.usage?.completion_tokens, 7, 'the SDK call through the new key gets the simulated completion');
    const requestId = response.headers.get('x-request-id')!;
    assert.match(requestId, /^[0-9a-f-]{36}$/, 'the answer carries a request id');
    await settled(requestId);

    // The request log is written in batches after the answer: search until it is there.
    for (let i = 0; ; i++) {
      await page.goto(`${base}/dashboard/requests?id=${requestId}`);
      if (await page.$(`tr[data-request-id="${requestId}"]`)) break;
      if (i > 40) assert.fail('the request did not appear on the requests page');
      await sleep(100);
    }
    const cells = await page.$$eval(`tr[data-request-id="${requestId}"] td`, (tds) => tds.map((td) => td.textContent!.trim()));
    assert.equal(cells[2], 'ci key', 'the key column');
    assert.equal(cells[3], 'POST /v1/chat/completions', 'the call column: method and path');
    assert.equal(cells[4], 'sim-gpt', 'the model column');
    assert.equal(cells[5], '200', 'the status column');
    await shot(page, 'keyed-03-requests');
    await page.click(`tr[data-request-id="${requestId}"] a`);
    const detail = await page.textContent('#generation');
    assert.match(detail!, /settled/, 'the request detail shows it settled');
    assert.match(detail!, /7 out/, 'the request detail shows the 7 output tokens');
    await shot(page, 'keyed-04-request-detail');

    // Revoke in the browser (after its confirmation): the very next call is refused.
    await page.goto(`${base}/dashboard/keys`);
    await page.click(`tr[data-key-id="${row.id}"] a`);
    page.once('dialog', (d) => void d.accept());
    await page.click('#revoke-key button[type=submit]');
    await page.waitForURL(`${base}/dashboard/keys`);
    assert.equal((await page.textContent(`tr[data-key-id="${row.id}"] td.status-revoked`))?.trim(), 'revoked', 'the key list shows the key revoked');
    await shot(page, 'keyed-05-revoked');
    await assert.rejects(client.chat.completions.create(HI), (err: { status?: number }) => err.status === 401);
    await context.close();
  });

  it('edits a key\'s settings, and a bad value is refused with the reason and nothing changed', async () => {
    const base = stack.gateway.url;
    const user = await dashboardUser();
    const k = await createKey(env.db, { accountId: user.accountId, label: 'before', format: 'mt', settings: { rpm: 10 } });
    const { context, page } = await signedIn(browser(), base, user);
    await page.goto(`${base}/dashboard/keys/${k.id}`);
    await page.fill('#spend_limit', '-3');
    await page.click('#edit-key button[type=submit]');
    assert.match((await page.textContent('[role=alert]'))!, /spend_limit/, 'the refusal names spend_limit');
    assert.equal((await env.db('api_keys').where({ id: k.id }).first()).spend_limit, null, 'a refused edit leaves the spend limit unset');
    await page.fill('#label', '<b id="injected">after</b>');
    await page.fill('#spend_limit', '12.5');
    await page.fill('#rpm', '');
    await page.click('#edit-key button[type=submit]');
    await page.waitForURL(`${base}/dashboard/keys`);
    const row = await env.db('api_keys').where({ id: k.id }).first();
    assert.equal(row.label, '<b id="injected">after</b>', 'the label is saved as typed');
    assert.equal(await page.textContent(`tr[data-key-id="${k.id}"] td:first-child`), '<b id="injected">after</b>', 'a label is text, never markup');
    assert.equal(await page.$('#injected'), null, "the label's markup is not rendered as an element");
    assert.equal(Number(row.spend_limit), 12.5, 'the new spend limit is saved');
    assert.equal(row.rpm, null, 'an emptied field removes the setting');
    await shot(page, 'keyed-06-edited');
    await context.close();
  });

  it('shows the balance and a usage chart whose totals are those of /v1/usage', async () => {
    const base = stack.gateway.url;
    const user = await dashboardUser({ credits: '250' });
    const k = await createKey(env.db, { accountId: user.accountId, label: 'usage', format: 'mt' });
    for (const [model, tokens] of [['sim-gpt', 5], ['sim-gpt', 9], ['sim-gpt-mini', 4]] as const) {
      const r = await call(base, '/v1/chat/completions', { key: k.key, body: { model, messages: [{ role: 'user', content: `x [sim tokens=${tokens}]` }] } });
      assert.equal(r.status, 200, r.text);
      await settled(r.headers.get('x-request-id')!);
    }
    const v1 = await call(base, '/v1/usage', { key: k.key });
    const credits = await call(base, '/v1/credits', { key: k.key });
    const { context, page } = await signedIn(browser(), base, user);
    const started = Date.now();
    await page.goto(`${base}/dashboard/usage`);
    const chart = await page.$('#usage-chart');
    const [total, requests] = await Promise.all([chart!.getAttribute('data-total-credits'), chart!.getAttribute('data-total-requests')]);
    assert.equal(Number(total), v1.json.data.total.credits, "the chart's credits total is that of /v1/usage");
    assert.equal(Number(requests), v1.json.data.total.requests, "the chart's request total is that of /v1/usage");
    assert.equal(Number(requests), 3, 'the three calls are counted');
    assert.equal(Number(await page.textContent('#remaining')), credits.json.data.remaining_credits, 'the balance shown is that of /v1/credits');
    // One stacked segment per day and model, titled with its credits: they add up to /v1/usage's days.
    const segments = await page.$$eval('#usage-chart rect.bar', (bars) => bars.map((b) => b.textContent!));
    assert.equal(segments.length, 2, segments.join(' | '));
    for (const day of v1.json.data.by_day) {
      const sum = segments.filter((t) => t.startsWith(day.day)).reduce((s, t) => s + Number(t.split(': ')[1]), 0);
      assert.ok(Math.abs(sum - day.credits) < 1e-9, `${day.day}: chart ${sum}, /v1/usage ${day.credits}`);
    }
    assert.deepEqual(await page.$$eval('#usage-chart .legend span', (s) => s.map((x) => x.textContent!.trim())), ['sim-gpt', 'sim-gpt-mini'], 'the legend names each model once');
    assert.deepEqual(await page.$$eval('#by-model tbody tr td:first-child', (s) => s.map((x) => x.textContent)), v1.json.data.by_model.map((m: { model: string }) => m.model), 'the model table lists the models of /v1/usage in its order');
    // Page weight and time to interactive, for the report.
    // (a string: the test's TypeScript has no DOM types)
    const perf = await page.evaluate<{ interactiveMs: number; loadMs: number; bytes: number; resources: number }>(`(() => {
      const nav = performance.getEntriesByType('navigation')[0];
      const resources = performance.getEntriesByType('resource');
      return { interactiveMs: nav.domInteractive, loadMs: nav.loadEventEnd, bytes: nav.encodedBodySize + resources.reduce((s, r) => s + r.encodedBodySize, 0), resources: resources.length };
    })()`);
    console.log(`      usage page: ${perf.bytes} bytes in ${perf.resources + 1} responses, DOM interactive ${perf.interactiveMs.toFixed(0)} ms, load ${perf.loadMs.toFixed(0)} ms (wall ${Date.now() - started} ms)`);
    await shot(page, 'keyed-07-usage');
    await context.close();
  });
  it('filters the requests page by key, model and status, and pages by cursor', async () => {
    const base = stack.gateway.url;
    const user = await dashboardUser();
    const a = await createKey(env.db, { accountId: user.accountId, label: 'key a', format: 'mt', settings: { models: ['sim-gpt'] } });
    const b = await createKey(env.db, { accountId: user.accountId, label: 'key b', format: 'mt' });
    const ids: string[] = [];
    for (const [key, model] of [[a.key, 'sim-gpt'], [a.key, 'sim-gpt'], [a.key, 'sim-gpt-mini'], [b.key, 'sim-gpt-mini']]) {
      const r = await call(base, '/v1/chat/completions', { key, body: { model, messages: [{ role: 'user', content: 'x [sim tokens=2]' }] } });
      ids.push(r.headers.get('x-request-id')!);
    }
    const { context, page } = await signedIn(browser(), base, user);
    const shown = async (query: string) => {
      await page.goto(`${base}/dashboard/requests?${query}`);
      return page.$$eval('#requests tbody tr[data-request-id]', (rows) => rows.map((r) => r.getAttribute('data-request-id')!));
    };
    for (let i = 0; (await shown('')).length < 4; i++) if (i > 40) assert.fail('the request log was not written');
    assert.deepEqual(await shown(''), [...ids].reverse(), 'newest first');
    assert.deepEqual(await shown(`key=${b.id}`), [ids[3]], "the key filter shows only key b's request");
    assert.deepEqual(await shown('model=sim-gpt-mini'), [ids[3], ids[2]], 'the model filter shows the sim-gpt-mini requests, newest first');
    assert.deepEqual(await shown('status=error'), [ids[2]], 'the model key a may not call');
    assert.equal(await page.textContent(`tr[data-request-id="${ids[2]}"] td:nth-child(7)`), 'model_not_allowed', 'the error column');
    assert.deepEqual(await shown('status=ok&limit=2'), [ids[3], ids[1]], 'the first page of two successful requests, newest first');
    await page.click('#older');
    assert.deepEqual(await page.$$eval('#requests tbody tr[data-request-id]', (rows) => rows.map((r) => r.getAttribute('data-request-id'))), [ids[0]], 'the older page holds the remaining request');
    assert.equal(await page.$('#older'), null, 'the last page');
    await shot(page, 'keyed-08-requests-paged');
    const today = new Date().toISOString().slice(0, 10);
    assert.equal((await shown(`from=${today}&to=${today}`)).length, 4, "today's date range shows all four requests");
    assert.deepEqual(await shown('to=2000-01-01'), [], 'a date range before any request shows none');
    await page.goto(`${base}/dashboard/requests?id=not-a-uuid`);
    assert.match((await page.textContent('[role=alert]'))!, /request id/, 'a malformed request id is refused naming the request id');
    await context.close();
  });

  it('shows a request pending while its settlement waits, then its final charge', async () => {
    const base = stack.gateway.url;
    const user = await dashboardUser();
    const k = await createKey(env.db, { accountId: user.accountId, label: 'pending', format: 'mt' });
    await stack.stopWorker(); // no relay, no settlement: the hold stays
    let id: string;
    try {
      const r = await call(base, '/v1/chat/completions', { key: k.key, body: HI });
      assert.equal(r.status, 200, r.text);
      id = r.headers.get('x-request-id')!;
      const { context, page } = await signedIn(browser(), base, user);
      for (let i = 0; !(await page.goto(`${base}/dashboard/requests/${id}`))!.ok(); i++) if (i > 40) assert.fail('not logged');
      assert.match((await page.textContent('#generation'))!, /Billing\s*pending/, 'the request shows billing pending while its settlement waits');
      await shot(page, 'keyed-09-request-pending');
      await stack.startWorker();
      const final = await settled(id);
      await page.reload();
      const text = (await page.textContent('#generation'))!;
      assert.match(text, /settled/, 'the request shows settled once the worker returns');
      assert.ok(text.includes(String(Number(final.charge))), `${text} shows ${final.charge}`);
      await context.close();
    } finally {
      if (!stack.worker) await stack.startWorker();
    }
  });

  it('a revoke in the dashboard of one API process is refused on the next request by another, which had the key cached', async () => {
    const base = stack.gateway.url;
    const other = await startGatewayApi({ db: env.db, databaseUrl: env.databaseUrl, temporalAddress: env.temporalAddress, namespace: 'default', logger: env.logger, port: 0, upstreamTimeoutMs: 10_000, keyCacheTtlMs: 60_000, variant: 'keyed' });
    try {
      const user = await dashboardUser();
      const k = await createKey(env.db, { accountId: user.accountId, label: 'two processes', format: 'mt' });
      assert.equal((await call(other.url, '/v1/models', { key: k.key })).status, 200, 'the other process caches the key');
      const { context, page } = await signedIn(browser(), base, user);
      await page.goto(`${base}/dashboard/keys/${k.id}`);
      page.once('dialog', (d) => void d.accept());
      await page.click('#revoke-key button[type=submit]');
      await page.waitForURL(`${base}/dashboard/keys`);
      const r = await call(other.url, '/v1/models', { key: k.key });
      assert.equal(r.status, 401, r.text);
      await context.close();
    } finally {
      await other.close();
    }
  });

  it('every page is light and same-origin: weight and time to interactive (printed for the report)', async () => {
    const base = stack.gateway.url;
    const user = await dashboardUser();
    await createKey(env.db, { accountId: user.accountId, label: 'weight', format: 'mt' });
    const { context, page } = await signedIn(browser(), base, user);
    for (const p of ['keys', 'requests', 'usage', 'team', 'account']) {
      await page.goto(`${base}/dashboard/${p}`);
      const perf = await page.evaluate<{ interactiveMs: number; bytes: number; origins: string[] }>(`(() => {
        const nav = performance.getEntriesByType('navigation')[0];
        const resources = performance.getEntriesByType('resource');
        return { interactiveMs: nav.domInteractive, bytes: nav.encodedBodySize + resources.reduce((s, r) => s + r.encodedBodySize, 0), origins: resources.map((r) => new URL(r.name).origin) };
      })()`);
      console.log(`      /dashboard/${p}: ${perf.bytes} bytes (${perf.origins.length + 1} responses), DOM interactive ${perf.interactiveMs.toFixed(0)} ms`);
      assert.ok(perf.bytes < 64 * 1024, `${p}: ${perf.bytes} bytes`);
      assert.deepEqual([...new Set(perf.origins)].filter((o) => o !== base), [], 'nothing from another origin (no CDN)');
    }
    await context.close();
  });
});

describe('gateway dashboard, sign-in and protection (issue 22)', function () {
  this.timeout(120_000);
  const stack = useStack({ variant: 'credits' });
  const { browser } = useBrowser();

  it('credits variant: creates a gw_ai key, uses it, revokes it and the next call is refused', async () => {
    const base = stack.gateway.url;
    const user = await dashboardUser();
    const { context, page } = await signedIn(browser(), base, user);
    assert.equal(await page.$('#spend_limit'), null, 'the credits variant has no per-key limits');
    await page.fill('#label', 'credits key');
    await page.click('#create-key button[type=submit]');
    const key = (await page.textContent('#full-key'))!.trim();
    assert.match(key, /^gw_ai_/, "the credits variant's key has the gw_ai_ prefix");
    await shot(page, 'credits-01-key-created');
    const client = new OpenAI({ apiKey: key, baseURL: `${base}/v1`, maxRetries: 0 });
    assert.equal((await client.chat.completions.create(HI)).usage?.completion_tokens, 7, 'the SDK call through the new key gets the simulated completion');
    await client.models.list();
    // Issue 33 item 11: the credits variant's requests page lists both, each with its method and path.
    const calls = async () => {
      await page.goto(`${base}/dashboard/requests`);
      return page.$$eval('#requests tbody tr[data-request-id] td:nth-child(4)', (cells) => cells.map((c) => c.textContent));
    };
    for (let i = 0; (await calls()).length < 2; i++) if (i > 40) assert.fail('the request log was not written');
    assert.deepEqual(await calls(), ['GET /v1/models', 'POST /v1/chat/completions'], 'each request shows its method and path, newest first');
    await shot(page, 'credits-02-requests');
    await page.goto(`${base}/dashboard/keys`);
    const id = await page.getAttribute('tr[data-key-id]', 'data-key-id');
    await page.goto(`${base}/dashboard/keys/${id}`);
    page.once('dialog', (d) => void d.accept());
    await page.click('#revoke-key button[type=submit]');
    await page.waitForURL(`${base}/dashboard/keys`);
    await assert.rejects(client.chat.completions.create(HI), (err: { status?: number }) => err.status === 401);
    await context.close();
  });

  it('refuses a wrong password, asks for the TOTP code of a user who has one, and throttles guessing', async () => {
    const base = stack.gateway.url;
    const user = await dashboardUser({ totp: true });
    const context = await browser().newContext();
    const page = await context.newPage();
    await page.goto(`${base}/dashboard/keys`);
    assert.equal(new URL(page.url()).pathname, '/dashboard/sign-in', 'signed out: to the sign-in page');
    const attempt = async (password: string, code?: string) => {
      await page.fill('#email', user.email);
      await page.fill('#password', password);
      await page.fill('#code', code ?? '');
      const [res] = await Promise.all([page.waitForResponse((r) => r.request().method() === 'POST'), page.click('button[type=submit]')]);
      return res.status();
    };
    assert.equal(await attempt('wrong password'), 401, 'a wrong password is refused with 401');
    assert.match((await page.textContent('[role=alert]'))!, /Wrong email, password or code/, 'the refusal says wrong email, password or code');
    assert.equal(await attempt(user.password), 200, 'the right password is accepted, then a code is asked for');
    assert.match((await page.textContent('[role=alert]'))!, /authenticator/, 'the page asks for the authenticator code');
    await shot(page, 'signin-01-code-required');
    assert.equal(await attempt(user.password, '000000'), 401, 'a wrong TOTP code is refused');
    await attempt(user.password, generateSync({ secret: user.totpSecret! }));
    await page.waitForURL(`${base}/dashboard/keys`);
    const cookie = (await context.cookies()).find((c) => c.name === 'gw_dashboard')!;
    assert.equal(cookie.httpOnly, true, 'the session cookie is httpOnly');
    assert.equal(cookie.sameSite, 'Strict', 'the session cookie is SameSite Strict');
    await context.close();

    // Five failures for one email lock it, even for the right password.
    const other = await dashboardUser();
    const p2 = await (await browser().newContext()).newPage();
    await p2.goto(`${base}/dashboard/sign-in`);
    for (let i = 0; i < 5; i++) {
      await p2.fill('#email', other.email);
      await p2.fill('#password', `wrong-${i}`);
      await p2.click('button[type=submit]');
    }
    await p2.fill('#email', other.email);
    await p2.fill('#password', other.password);
    const [res] = await Promise.all([p2.waitForResponse((r) => r.request().method() === 'POST'), p2.click('button[type=submit]')]);
    assert.equal(res.status(), 429, 'the right password is throttled after five failures');
    assert.ok(Number(res.headers()['retry-after']) > 0, `a throttled sign-in carries retry-after: ${res.headers()['retry-after']}`);
    await shot(p2, 'signin-02-throttled');
    await p2.context().close();
  });

  it('refuses a POST without the session\'s CSRF token or from another origin, a member\'s key changes, and another account\'s key', async () => {
    const base = stack.gateway.url;
    const owner = await dashboardUser();
    const { context, page } = await signedIn(browser(), base, owner);
    const cookie = (await context.cookies()).find((c) => c.name === 'gw_dashboard')!;
    const csrf = await page.getAttribute('input[name=_csrf]', 'value');
    const post = (p: string, body: string, headers: Record<string, string> = {}) =>
      fetch(base + p, { method: 'POST', redirect: 'manual', headers: { cookie: `gw_dashboard=${cookie.value}`, 'content-type': 'application/x-www-form-urlencoded', ...headers }, body });
    const get = (p: string) => fetch(base + p, { redirect: 'manual', headers: { cookie: `gw_dashboard=${cookie.value}` } });
    assert.equal((await get('/dashboard')).headers.get('location'), '/dashboard/keys', 'a signed-in /dashboard goes to the keys page');
    assert.equal((await fetch(`${base}/dashboard`, { redirect: 'manual' })).headers.get('location'), '/dashboard/sign-in', 'a signed-out /dashboard goes to the sign-in page');
    assert.equal((await get('/dashboard/no-such-page')).status, 404, 'an unknown dashboard page is 404');
    assert.equal((await fetch(`${base}/dashboard/keys`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'label=x' })).status, 401, 'no session');
    assert.equal((await get('/v1/models')).status, 401, 'a dashboard session is no API key');
    assert.equal((await post('/dashboard/keys', 'label=x')).status, 403, 'no CSRF token');
    assert.equal((await post('/dashboard/keys', `label=x&_csrf=${csrf}`, { origin: 'http://evil.example' })).status, 403, 'another origin');
    assert.equal(await env.db('api_keys').where({ account_id: owner.accountId }).count('* as n').first().then((r) => Number(r!.n)), 0, 'nothing created');
    assert.equal((await post('/dashboard/keys', `label=x&_csrf=${csrf}`)).status, 201, "a POST with the session's CSRF token from the same origin creates the key");
    const foreign = await createKey(env.db, { accountId: (await dashboardUser()).accountId, label: 'not yours' });
    assert.equal((await post(`/dashboard/keys/${foreign.id}/revoke`, `_csrf=${csrf}`)).status, 404, "another account's key cannot be revoked: 404");
    assert.equal((await env.db('api_keys').where({ id: foreign.id }).first()).revoked_at, null, "another account's key is not revoked");
    await context.close();

    const member = await dashboardUser({ role: 'member', accountId: owner.accountId });
    const m = await signedIn(browser(), base, member);
    assert.equal(await m.page.$('#create-key'), null, 'a member sees no create form');
    const mCookie = (await m.context.cookies()).find((c) => c.name === 'gw_dashboard')!;
    const mCsrf = await m.page.getAttribute('input[name=_csrf]', 'value');
    const r = await fetch(`${base}/dashboard/keys`, { method: 'POST', headers: { cookie: `gw_dashboard=${mCookie.value}`, 'content-type': 'application/x-www-form-urlencoded' }, body: `label=y&_csrf=${mCsrf}` });
    assert.equal(r.status, 403, 'a member cannot create a key');
    // Signing out ends the session server-side: the old cookie is refused.
    await m.page.click('.signout button');
    await m.page.waitForURL(`${base}/dashboard/sign-in`);
    const after = await fetch(`${base}/dashboard/keys`, { redirect: 'manual', headers: { cookie: `gw_dashboard=${mCookie.value}` } });
    assert.equal(after.status, 302, 'the signed-out cookie is sent back to sign in');
    await m.context.close();
  });

  it('an owner invites a member by a one-time link; the member chooses a password, signs in and only looks', async () => {
    const base = stack.gateway.url;
    const owner = await dashboardUser();
    const { context, page } = await signedIn(browser(), base, owner);
    await page.goto(`${base}/dashboard/team`);
    const email = `member-${Date.now()}@example.com`;
    await page.fill('#invite-email', email);
    await page.selectOption('#invite-role', 'member');
    await page.click('#invite button[type=submit]');
    const link = (await page.textContent('#invitation-link'))!.trim();
    assert.ok(link.startsWith(`${base}/dashboard/invite/`), link);
    assert.equal(await page.$$eval('#invitations tbody tr[data-invitation-id]', (rows) => rows.length), 1, 'one pending invitation is listed');
    await shot(page, 'team-01-invited');
    // A second invitation, cancelled: its link no longer works.
    await page.fill('#invite-email', `other-${Date.now()}@example.com`);
    await page.click('#invite button[type=submit]');
    const cancelled = (await page.textContent('#invitation-link'))!.trim();
    await page.click('#invitations tbody tr:last-child button');
    await page.waitForURL(`${base}/dashboard/team`);
    assert.equal((await fetch(cancelled)).status, 404, "the cancelled invitation's link no longer works");

    const invitee = await (await browser().newContext()).newPage();
    await invitee.goto(link);
    await invitee.fill('#password', 'short');
    await invitee.evaluate('document.getElementById("password").removeAttribute("minlength")');
    const [tooShort] = await Promise.all([invitee.waitForResponse((r) => r.request().method() === 'POST'), invitee.click('#accept button')]);
    assert.equal(tooShort.status(), 400, 'a password that is too short is refused');
    assert.match((await invitee.textContent('[role=alert]'))!, /at least 10/, 'the refusal gives the minimum length');
    await invitee.fill('#password', 'a good long password');
    await invitee.click('#accept button');
    await invitee.waitForURL(`${base}/dashboard/sign-in?joined=1`);
    await shot(invitee, 'team-02-joined');
    await invitee.context().close();
    assert.equal((await fetch(link)).status, 404, 'the link works once');

    const member = await signedIn(browser(), base, { accountId: owner.accountId, email, password: 'a good long password' });
    assert.equal(await member.page.$('#create-key'), null, 'a member sees no create form');
    await member.page.goto(`${base}/dashboard/team`);
    assert.equal(await member.page.$('#invite'), null, 'a member invites nobody');
    assert.deepEqual(await member.page.$$eval('#users tbody tr td:nth-child(2)', (c) => c.map((x) => x.textContent)), ['owner', 'member'], 'the team lists the owner and the new member');
    await member.context.close();
    await context.close();
  });

  it('a user turns on TOTP from the QR code page and changes the password; the next sign-in asks for a code', async () => {
    const base = stack.gateway.url;
    const user = await dashboardUser();
    const { context, page } = await signedIn(browser(), base, user);
    await page.click('.signout a');
    await page.click('#totp-start');
    assert.ok(await page.$('.qr svg'), 'a QR code');
    const secret = (await page.textContent('#totp-secret'))!.trim();
    await shot(page, 'account-00-two-factor-qr');
    await page.fill('#totp_code', '123456');
    await page.click('#two-factor button[type=submit]');
    assert.match((await page.textContent('[role=alert]'))!, /not the current code/, 'a wrong code is refused as not the current code');
    await page.fill('#totp_code', generateSync({ secret }));
    await page.click('#two-factor button[type=submit]');
    assert.match((await page.textContent('[role=status]'))!, /on/, 'the status says two-factor sign-in is on');
    await page.fill('#current_password', 'not it');
    await page.fill('#new_password', 'another long password');
    await page.click('#password-form button');
    assert.match((await page.textContent('[role=alert]'))!, /current password: is wrong/, 'a wrong current password is refused');
    await page.fill('#current_password', user.password);
    await page.fill('#new_password', 'another long password');
    await page.click('#password-form button');
    assert.match((await page.textContent('[role=status]'))!, /Password changed/, 'the status says the password changed');
    await shot(page, 'account-01-two-factor-on');
    await context.close();

    const fresh = await (await browser().newContext()).newPage();
    await fresh.goto(`${base}/dashboard/sign-in`);
    await fresh.fill('#email', user.email);
    await fresh.fill('#password', 'another long password');
    await fresh.click('button[type=submit]');
    assert.match((await fresh.textContent('[role=alert]'))!, /authenticator/, 'after a password sign-in the next step asks for the authenticator code');
    await fresh.fill('#password', 'another long password');
    // The confirmation used the current code: the next step's is accepted (±30 s of drift).
    await fresh.fill('#code', generateSync({ secret, epoch: Math.floor(Date.now() / 1000) + 30 }));
    await fresh.click('button[type=submit]');
    await fresh.waitForURL(`${base}/dashboard/keys`);
    await fresh.context().close();
  });
});
