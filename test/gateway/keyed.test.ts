import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import knex from 'knex';
import { Agent, request } from 'undici';
import { createAccount } from '../../services/accounts/accounts';
import { createKey } from '../../services/keys/keys';
import type { KeySettingsInput } from '../../services/keys/keys';
import { clientIpResolver } from '../../api/gateway/keyed/client-ip';
import { RequestLog } from '../../services/keys/request-log';
import { startGatewayApi } from '../../main/gateway';
import { ConfigError, loadConfig } from '../../platform/config';
import { createLogger } from '../../platform/logger';
import { env } from '../setup/env';
import { call, checkInvariants, settled, startStack, type Stack } from '../helpers/stack';
import { cliWith } from '../helpers/admin-cli';

// The key-authenticated variant (GATEWAY_VARIANT=keyed, spec 3 A) over real HTTP, PostgreSQL and
// Temporal, with two API processes on one database where sharing matters.

const ADMIN = 'admin-token-for-tests-0123456789';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const HI = { model: 'sim-gpt', messages: [{ role: 'user', content: 'hi [sim tokens=3]' }] };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const unknownKey = () => `mt-${randomBytes(32).toString('base64url')}`;

interface KeyedKey {
  accountId: string;
  keyId: string;
  key: string;
}

async function keyedKey(settings: KeySettingsInput = {}, credits = '100'): Promise<KeyedKey> {
  const a = await createAccount(env.db, { name: `keyed-${randomUUID()}`, tier: 'pro', credits });
  const k = await createKey(env.db, { accountId: a.id, label: 'keyed test', format: 'mt', settings });
  return { accountId: a.id, keyId: k.id, key: k.key };
}

type Reply = Awaited<ReturnType<typeof call>>;

const chat = (base: string, key: string, body: unknown = HI, headers: Record<string, string> = {}) => call(base, '/v1/chat/completions', { key, body, headers });
const admin = (base: string, p: string, opts: { body?: unknown; method?: string; token?: string | null } = {}) =>
  call(base, p, { body: opts.body, method: opts.method, headers: opts.token === null ? {} : { authorization: `Bearer ${opts.token ?? ADMIN}` } });

/** The error envelope of spec 1 2.10 with this code and status, and an x-request-id. */
function refused(r: Reply, status: number, code: string) {
  assert.equal(r.status, status, `expected ${status} ${code}, got ${r.status}: ${r.text}`);
  assert.equal(r.json?.error?.code, code, r.text);
  assert.equal(typeof r.json.error.message, 'string', 'the error envelope has a message');
  assert.equal(typeof r.json.error.type, 'string', 'the error envelope has a type');
  assert.match(r.headers.get('x-request-id') ?? '', UUID, 'x-request-id on the error');
}

/** HTTP from a chosen local address (127.0.0.0/8 is all loopback), so the server sees that client IP. */
const agents = new Map<string, Agent>();
async function callFrom(localAddress: string, base: string, p: string, opts: { key?: string; headers?: Record<string, string> } = {}) {
  let agent = agents.get(localAddress);
  if (!agent) agents.set(localAddress, (agent = new Agent({ localAddress })));
  const res = await request(base + p, {
    dispatcher: agent,
    headers: { ...(opts.key ? { authorization: `Bearer ${opts.key}` } : {}), ...opts.headers },
  });
  const text = await res.body.text();
  const headers = new Headers();
  for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(', ') : v);
  return { status: res.statusCode, headers, json: JSON.parse(text), text };
}

/** Waits for the request log's batch writer (and anything else eventually true). */
async function eventually<T>(fn: () => Promise<T | undefined | null | false>, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(50);
  }
}

describe('keyed gateway variant (spec 3 A)', function () {
  this.timeout(120_000);
  let a: Stack; // two API processes on one database
  let b: Stack;

  before(async () => {
    await env.db('auth_failures').delete();
    const opts = { variant: 'keyed' as const, adminToken: ADMIN, keyed: { authFailureLimit: 10_000, requestLogFlushMs: 50 } };
    [a, b] = await Promise.all([startStack(opts), startStack(opts)]);
  });
  after(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await Promise.all([...agents.values()].map((x) => x.close()));
  });

  describe('section 7 error table', () => {
    it('401 invalid_api_key for a key of the wrong format, an unknown key, an expired or revoked key; a valid key answers', async () => {
      const ok = await keyedKey();
      const legacy = await createKey(env.db, { accountId: ok.accountId, label: 'credits-variant key' });
      const malformed = [
        'mt-short',
        `mt-${'a'.repeat(42)}`,
        `mt-${'a'.repeat(44)}`,
        `mt-${'a'.repeat(42)}!`,
        `mt_${'a'.repeat(43)}`,
        `MT-${'a'.repeat(43)}`,
        legacy.key, // gw_ai_: not a key of this deployment
        'sk-proj-abc',
      ];
      for (const key of malformed) refused(await chat(a.gateway.url, key), 401, 'invalid_api_key');
      refused(await chat(a.gateway.url, unknownKey()), 401, 'invalid_api_key');
      refused(await call(a.gateway.url, '/v1/models', { headers: { 'x-api-key': unknownKey() } }), 401, 'invalid_api_key');
      refused(await call(a.gateway.url, '/v1/models', { headers: { authorization: 'Basic Zm9vOmJhcg==' } }), 401, 'invalid_api_key');
      refused(await call(a.gateway.url, '/v1/models'), 401, 'invalid_api_key');

      const expired = await keyedKey({ expires_at: new Date(Date.now() - 1000).toISOString() });
      refused(await chat(a.gateway.url, expired.key), 401, 'invalid_api_key');
      const dated = await keyedKey({ expires_at: '2999-01-01' });
      assert.equal((await chat(a.gateway.url, dated.key)).status, 200, 'a key valid until 2999 answers');
      // A date is the last day the key works: today still answers, yesterday's does not.
      const today = new Date().toISOString().slice(0, 10);
      const yesterday = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
      assert.equal((await chat(a.gateway.url, (await keyedKey({ expires_at: today })).key)).status, 200, 'a key whose last day is today still answers');
      refused(await chat(a.gateway.url, (await keyedKey({ expires_at: yesterday })).key), 401, 'invalid_api_key');

      const r = await chat(a.gateway.url, ok.key);
      assert.equal(r.status, 200, r.text);
      assert.equal(r.headers.get('x-request-id'), r.headers.get('x-gateway-request-id'), 'x-request-id is the request id');
      await settled(r.headers.get('x-request-id')!);
      // Nothing was held or billed for the refused requests.
      const rows = await env.db('reservations').where({ account_id: expired.accountId });
      assert.equal(rows.length, 0, 'the refused requests of an expired key hold nothing');
    });

    it('401 for a key of the wrong format without any database work (the gateway answers with its database unreachable)', async () => {
      const quiet = { warn() {}, error() {}, debug() {}, deprecate() {} };
      const dead = knex({ client: 'pg', connection: 'postgres://nobody:nothing@127.0.0.1:1/none', pool: { min: 0, max: 1 }, acquireConnectionTimeout: 1000, log: quiet });
      const gw = await startGatewayApi({
        db: dead,
        databaseUrl: env.databaseUrl, // the NOTIFY listener only
        temporalAddress: env.temporalAddress,
        namespace: 'default',
        logger: createLogger('silent'),
        port: 0,
        upstreamTimeoutMs: 5000,
        keyCacheTtlMs: 60_000,
        variant: 'keyed',
      });
      try {
        const t0 = Date.now();
        refused(await chat(gw.url, 'mt-not-a-key'), 401, 'invalid_api_key');
        refused(await call(gw.url, '/v1/models', { headers: { 'x-api-key': `gw_ai_${'x'.repeat(40)}` } }), 401, 'invalid_api_key');
        assert.ok(Date.now() - t0 < 900, 'answered without waiting for the database');
        // A well-formed key does need the database: here it cannot be checked, a 503 to retry.
        const r = await chat(gw.url, unknownKey());
        assert.equal(r.status, 503, r.text);
        assert.equal(r.json.error.code, 'service_unavailable', `a database outage is service_unavailable: ${r.text}`);
        assert.ok(Number(r.headers.get('retry-after')) >= 1, `a 503 carries retry-after: ${r.headers.get('retry-after')}`);
        assert.match(r.headers.get('x-request-id') ?? '', UUID, 'the 503 carries an x-request-id');
      } finally {
        await gw.close();
        await dead.destroy();
      }
    });

    it('403 key_spend_limit_exceeded once the limit is reached; 402 insufficient_quota when the account balance is the smaller', async () => {
      const k = await keyedKey({ spend_limit: '0.001' });
      // One request holds about 0.0000x; the first passes, then the spend is at the limit.
      const first = await chat(a.gateway.url, k.key, { ...HI, max_tokens: 10 });
      assert.equal(first.status, 200, first.text);
      await settled(first.headers.get('x-request-id')!);
      await env.db('api_keys').where({ id: k.keyId }).update({ spend: '0.001' });
      refused(await chat(a.gateway.url, k.key, { ...HI, max_tokens: 10 }), 403, 'key_spend_limit_exceeded');
      // A request needing more than what remains is refused before the limit is reached, too.
      const near = await keyedKey({ spend_limit: '0.0001' });
      const r = await chat(a.gateway.url, near.key, { ...HI, max_tokens: 1000 });
      refused(r, 403, 'key_spend_limit_exceeded');
      assert.match(r.json.error.message, /0\.0001/, 'the spend-limit error names what is left of the limit');
      // Reads are not inference: still answered.
      assert.equal((await call(a.gateway.url, '/v1/credits', { key: k.key })).status, 200, 'reads still answer on a key at its spend limit');

      const poor = await keyedKey({ spend_limit: '1000' }, '0.0000001');
      refused(await chat(a.gateway.url, poor.key), 402, 'insufficient_quota');
      const row = await env.db('api_keys').where({ id: poor.keyId }).first();
      assert.equal(row.spend, '0.000000000000', 'a refused hold leaves the key spend alone');
    });

    it('GET /v1/key shows the key spend limit and what is left of it, or the balance when that is smaller', async () => {
      const info = async (key: string) => (await call(a.gateway.url, '/v1/key', { key })).json.data;
      const k = await keyedKey({ spend_limit: '2.5' }, '100');
      await env.db('api_keys').where({ id: k.keyId }).update({ spend: '0.75' });
      assert.deepEqual((({ limit, limit_reset, limit_remaining }) => ({ limit, limit_reset, limit_remaining }))(await info(k.key)), { limit: 2.5, limit_reset: null, limit_remaining: 1.75 }, 'the key shows its limit, no reset, and what is left of the limit');
      const poor = await keyedKey({ spend_limit: '1000' }, '0.125');
      assert.equal((await info(poor.key)).limit_remaining, 0.125, 'the remaining limit is the balance when the balance is smaller');
      const spent = await keyedKey({ spend_limit: '1' });
      await env.db('api_keys').where({ id: spent.keyId }).update({ spend: '1' });
      assert.equal((await info(spent.key)).limit_remaining, 0, 'a fully spent key has nothing remaining');
      const open = await info((await keyedKey({}, '42')).key);
      assert.equal(open.limit, null, 'a key without a spend limit shows no limit');
      assert.equal(open.limit_remaining, 42, 'a key without a spend limit has the balance remaining');
    });

    it('403 model_not_allowed for other models; GET /v1/models lists only the allowed ones', async () => {
      const k = await keyedKey({ models: ['sim-gpt-mini'] });
      refused(await chat(a.gateway.url, k.key), 403, 'model_not_allowed');
      const mini = await chat(a.gateway.url, k.key, { ...HI, model: 'sim-gpt-mini' });
      assert.equal(mini.status, 200, mini.text);
      const listed = await call(a.gateway.url, '/v1/models', { key: k.key });
      assert.equal(listed.status, 200, `the model list answers: ${listed.text}`);
      assert.deepEqual(
        listed.json.data.map((m: { id: string }) => m.id),
        ['sim-gpt-mini'],
        'the model list shows only the allowed model',
      );
      const all = await call(a.gateway.url, '/v1/models', { key: (await keyedKey()).key });
      assert.ok(all.json.data.length > 1, 'a key without a list sees every model of its plan');
      assert.ok(all.json.data.some((m: { id: string }) => m.id === 'sim-gpt'), 'sim-gpt is among the models of a key without a list');
    });

    it('429 rate_limit_exceeded with Retry-After past the per-minute limit', async () => {
      await awayFromMinuteBoundary();
      const k = await keyedKey({ rpm: 2 });
      assert.equal((await call(a.gateway.url, '/v1/models', { key: k.key })).status, 200, 'the first request within the per-minute limit answers');
      assert.equal((await chat(a.gateway.url, k.key)).status, 200, 'the second request within the per-minute limit answers');
      const r = await chat(a.gateway.url, k.key);
      refused(r, 429, 'rate_limit_exceeded');
      const retry = Number(r.headers.get('retry-after'));
      assert.ok(Number.isInteger(retry) && retry >= 1 && retry <= 60, `Retry-After ${r.headers.get('retry-after')}`);
      refused(await call(a.gateway.url, '/v1/models', { key: k.key }), 429, 'rate_limit_exceeded');
    });

    it('Authorization: Bearer and x-api-key on every endpoint, /v1/messages included', async () => {
      const k = await keyedKey();
      const gen = await chat(a.gateway.url, k.key);
      const id = gen.headers.get('x-request-id')!;
      const endpoints: Array<[string, string, unknown]> = [
        ['GET', '/v1/models', undefined],
        ['GET', '/v1/credits', undefined],
        ['GET', '/v1/key', undefined],
        ['GET', '/v1/usage', undefined],
        ['GET', `/v1/generation?id=${id}`, undefined],
        ['POST', '/v1/chat/completions', HI],
        ['POST', '/v1/messages', { model: 'sim-gpt', max_tokens: 20, messages: [{ role: 'user', content: 'hi [sim tokens=3]' }] }],
        ['POST', '/v1/responses', { model: 'sim-gpt', input: 'hi [sim tokens=3]' }],
      ];
      for (const [method, p, body] of endpoints) {
        for (const headers of [{ authorization: `Bearer ${k.key}` }, { 'x-api-key': k.key }] as Array<Record<string, string>>) {
          const r = await call(a.gateway.url, p, { method, body, headers });
          assert.ok(r.status !== 401 && r.status !== 403 && r.status < 500, `${method} ${p} with ${Object.keys(headers)[0]}: ${r.status} ${r.text}`);
          assert.match(r.headers.get('x-request-id') ?? '', UUID, `${method} ${p} carries an x-request-id`);
        }
        for (const headers of [{ authorization: `Bearer ${unknownKey()}` }, { 'x-api-key': 'mt-wrong' }] as Array<Record<string, string>>) {
          const r = await call(a.gateway.url, p, { method, body, headers });
          assert.equal(r.status, 401, `${method} ${p} with a wrong key: ${r.text}`);
          assert.match(r.headers.get('x-request-id') ?? '', UUID, `${method} ${p} with a wrong key carries an x-request-id`);
        }
      }
      await settled(id);
    });

    it('every path under /v1 is authenticated, routed or not: a wrong key counts there too', async () => {
      const k = await keyedKey();
      for (const [method, p] of [['GET', '/v1/nope'], ['POST', '/v1/nope/deeper'], ['GET', '/v1'], ['GET', '/v1/chat/completions']]) {
        refused(await call(a.gateway.url, p, { method }), 401, 'invalid_api_key');
        refused(await call(a.gateway.url, p, { method, headers: { 'x-api-key': 'mt-bad' } }), 401, 'invalid_api_key');
        refused(await call(a.gateway.url, p, { method, headers: { 'x-api-key': unknownKey() } }), 401, 'invalid_api_key');
      }
      // With a good key the router answers: 404 for no route, 405 with Allow for a wrong method.
      refused(await call(a.gateway.url, '/v1/nope', { key: k.key }), 404, 'route_not_found');
      const wrongMethod = await call(a.gateway.url, '/v1/chat/completions', { key: k.key });
      assert.equal(wrongMethod.status, 405, `a GET on a POST route with a good key is 405: ${wrongMethod.text}`);
      assert.equal(wrongMethod.headers.get('allow'), 'POST', 'the 405 names POST in Allow');
    });

    it('x-request-id on every response: errors, unknown routes, health', async () => {
      const k = await keyedKey();
      const ids = new Set<string>();
      for (const r of [
        await chat(a.gateway.url, k.key, '{not json'),
        await chat(a.gateway.url, k.key, { model: 'sim-gpt' }),
        await chat(a.gateway.url, k.key, { ...HI, model: 'no-such-model' }),
        await call(a.gateway.url, '/nowhere'),
        await call(a.gateway.url, '/healthz'),
        await admin(a.gateway.url, '/admin/keys/00000000-0000-0000-0000-000000000000', { token: null }),
      ]) {
        const id = r.headers.get('x-request-id') ?? '';
        assert.match(id, UUID, `${r.status} ${r.text}`);
        ids.add(id);
      }
      assert.equal(ids.size, 6, 'a new id per request');
    });
  });

  it('spend limit under concurrency: 100 parallel requests against a nearly spent key never exceed it (exact decimals)', async () => {
    const k = await keyedKey({ spend_limit: '1500.50' });
    // The key has spent all but 0.004 rupiah; each request holds about 0.0006.
    await env.db('api_keys').where({ id: k.keyId }).update({ spend: '1500.496' });
    const body = { model: 'sim-gpt', max_tokens: 100, messages: [{ role: 'user', content: 'go [sim tokens=20 latency=30]' }] };
    const results = await Promise.all(Array.from({ length: 100 }, (_, i) => chat((i % 2 ? a : b).gateway.url, k.key, body)));
    const ok = results.filter((r) => r.status === 200);
    const refusedOnes = results.filter((r) => r.status !== 200);
    for (const r of refusedOnes) refused(r, 403, 'key_spend_limit_exceeded');
    assert.ok(ok.length >= 1 && refusedOnes.length >= 80, `ok=${ok.length}`);

    // While settling: spend = prior spend + active holds + charges so far, within the limit.
    const mid = await env.db.raw(
      `SELECT k.spend, k.spend <= k.spend_limit AS within,
         k.spend - 1500.496 = COALESCE(sum(r.held_credits) FILTER (WHERE r.status = 'held'), 0)
           + COALESCE(sum(r.charge) FILTER (WHERE r.status <> 'held'), 0) AS adds_up
       FROM api_keys k LEFT JOIN reservations r ON r.key_id = k.id WHERE k.id = ? GROUP BY k.id`,
      [k.keyId],
    );
    assert.equal(mid.rows[0].within, true, `spend ${mid.rows[0].spend}`);
    assert.equal(mid.rows[0].adds_up, true, `spend ${mid.rows[0].spend}`);

    await Promise.all(ok.map((r) => settled(r.headers.get('x-request-id')!)));
    const after = await env.db.raw(
      `SELECT k.spend, k.spend_limit, COALESCE(sum(r.charge), 0) AS charges, count(r.id)::int AS n,
         k.spend = 1500.496 + COALESCE(sum(r.charge), 0) AS exact, k.spend <= k.spend_limit AS within
       FROM api_keys k LEFT JOIN reservations r ON r.key_id = k.id WHERE k.id = ? GROUP BY k.id`,
      [k.keyId],
    );
    const s = after.rows[0];
    assert.equal(s.n, ok.length, 'a reservation for each answered request only');
    assert.equal(s.exact, true, `spend ${s.spend} = 1500.496 + charges ${s.charges}`);
    assert.equal(s.within, true, `spend ${s.spend} <= ${s.spend_limit}`);
    const shown = ok.reduce((sum, r) => sum + Number(r.headers.get('x-gateway-cost')), 0);
    assert.ok(Math.abs(shown - Number(s.charges)) < 1e-9, `the summed x-gateway-cost ${shown} equals the charges ${s.charges}`);
    // The account's own invariants hold alongside.
    const inv = await checkInvariants(k.accountId);
    assert.equal(inv.account.pending_requests, 0, 'no request is pending after all settled');
    assert.equal(inv.ledger.usage, inv.account.total_usage, "ledger usage matches the account's total usage");
    assert.equal(inv.account.total_usage, s.charges, "the account's total usage is the summed charges");
  });

  describe('two API processes', () => {
    it('the per-minute limit is shared: rpm 5 across two processes → exactly 5 answered, the rest 429 with Retry-After', async () => {
      await awayFromMinuteBoundary();
      const k = await keyedKey({ rpm: 5 });
      const results = await Promise.all(Array.from({ length: 12 }, (_, i) => chat((i % 2 ? a : b).gateway.url, k.key)));
      const ok = results.filter((r) => r.status === 200);
      const limited = results.filter((r) => r.status === 429);
      assert.equal(ok.length, 5, results.map((r) => r.status).join(','));
      assert.equal(limited.length, 7, `all requests past the first five are rate limited: ${results.map((r) => r.status).join(',')}`);
      for (const r of limited) {
        refused(r, 429, 'rate_limit_exceeded');
        assert.ok(Number(r.headers.get('retry-after')) >= 1, 'Retry-After');
      }
      // Both processes answered some and refused some? At least, both took part.
      assert.ok(results.filter((_, i) => i % 2 === 0).some((r) => r.status === 200 || r.status === 429), 'the first process answered or refused some of the requests');
      // Rate-limited requests held nothing.
      const rows = await env.db('reservations').where({ key_id: k.keyId });
      assert.equal(rows.length, 5, 'only the five answered requests have reservations');
      await Promise.all(ok.map((r) => settled(r.headers.get('x-request-id')!)));
    });

    it('a revoked key is refused by the other process on its very next request', async () => {
      const k = await keyedKey();
      // Both processes have the key in their caches.
      assert.equal((await call(a.gateway.url, '/v1/models', { key: k.key })).status, 200, 'the key answers on the first process before revocation');
      assert.equal((await call(b.gateway.url, '/v1/models', { key: k.key })).status, 200, 'the key answers on the second process before revocation');
      const rev = await admin(a.gateway.url, `/admin/keys/${k.keyId}/revoke`, { method: 'POST' });
      assert.equal(rev.status, 200, rev.text);
      assert.ok(rev.json.revoked_at, `the revoked key has a revocation time: ${rev.text}`);
      refused(await call(b.gateway.url, '/v1/models', { key: k.key }), 401, 'invalid_api_key');
      refused(await chat(b.gateway.url, k.key), 401, 'invalid_api_key');
      refused(await chat(a.gateway.url, k.key), 401, 'invalid_api_key');
    });

    it('changed settings reach the other process on its very next request', async () => {
      const k = await keyedKey();
      assert.equal((await chat(b.gateway.url, k.key)).status, 200, 'the key answers on the other process before its settings change');
      const p = await admin(a.gateway.url, `/admin/keys/${k.keyId}`, { method: 'PATCH', body: { models: ['sim-gpt-mini'] } });
      assert.equal(p.status, 200, p.text);
      refused(await chat(b.gateway.url, k.key), 403, 'model_not_allowed');
      await admin(a.gateway.url, `/admin/keys/${k.keyId}`, { method: 'PATCH', body: { expires_at: '2001-01-01' } });
      refused(await chat(b.gateway.url, k.key, { ...HI, model: 'sim-gpt-mini' }), 401, 'invalid_api_key');
    });
  });

  describe('per-IP lockout after wrong keys', () => {
    let c: Stack;
    let d: Stack;
    const LOCK_MS = 2500;
    before(async () => {
      await env.db('auth_failures').delete();
      const opts = { variant: 'keyed' as const, keyed: { authFailureLimit: 3, authFailureWindowMs: 60_000, authLockoutMs: LOCK_MS, trustedProxies: ['127.0.0.1'], requestLogFlushMs: 50 } };
      [c, d] = await Promise.all([startStack(opts), startStack(opts)]);
    });
    after(() => Promise.all([c?.close(), d?.close()]));

    it('locks the IP (429 with Retry-After, valid keys included) on every process; other IPs unaffected; lifts after the lockout', async () => {
      const k = await keyedKey();
      const from = '127.0.0.2';
      refused(await callFrom(from, c.gateway.url, '/v1/models', { key: unknownKey() }), 401, 'invalid_api_key');
      refused(await callFrom(from, d.gateway.url, '/v1/models', { key: 'mt-malformed' }), 401, 'invalid_api_key');
      assert.equal((await callFrom(from, c.gateway.url, '/v1/models', { key: k.key })).status, 200, 'not yet');
      refused(await callFrom(from, c.gateway.url, '/v1/models', { headers: { 'x-api-key': unknownKey() } }), 401, 'invalid_api_key');
      // Three wrong keys from 127.0.0.2, over two processes: locked.
      const locked = await eventually(async () => {
        const r = await callFrom(from, c.gateway.url, '/v1/models', { key: k.key });
        return r.status === 429 ? r : null;
      });
      assert.equal(locked.json.error.code, 'rate_limit_exceeded', `a locked IP is refused as rate_limit_exceeded: ${locked.text}`);
      const retry = Number(locked.headers.get('retry-after'));
      assert.ok(retry >= 1 && retry <= Math.ceil(LOCK_MS / 1000), `Retry-After ${retry}`);
      assert.match(locked.headers.get('x-request-id') ?? '', UUID, 'the lockout 429 carries an x-request-id');
      // The other process locks it too (NOTIFY), and a wrong-format key gets the 429 as well.
      await eventually(async () => (await callFrom(from, d.gateway.url, '/v1/models', { key: k.key })).status === 429);
      assert.equal((await callFrom(from, d.gateway.url, '/v1/models', { key: 'mt-x' })).status, 429, 'the other process refuses a wrong-format key from the locked IP with 429');
      // The same valid key from another IP works, on both processes.
      assert.equal((await callFrom('127.0.0.3', c.gateway.url, '/v1/models', { key: k.key })).status, 200, 'the same key from another IP answers on the first process');
      assert.equal((await callFrom('127.0.0.3', d.gateway.url, '/v1/models', { key: k.key })).status, 200, 'the same key from another IP answers on the second process');
      // After the lockout the IP is served again.
      await sleep(LOCK_MS + 200);
      assert.equal((await callFrom(from, c.gateway.url, '/v1/models', { key: k.key })).status, 200, 'after the lockout the IP is served again by the first process');
      assert.equal((await callFrom(from, d.gateway.url, '/v1/models', { key: k.key })).status, 200, 'after the lockout the IP is served again by the second process');
    });

    it('behind a trusted proxy the client IP comes from X-Forwarded-For; an untrusted peer cannot choose its IP', async () => {
      const k = await keyedKey();
      // 127.0.0.1 is a trusted proxy: the client is the rightmost untrusted X-Forwarded-For entry.
      for (let i = 0; i < 3; i++) {
        const r = await callFrom('127.0.0.1', c.gateway.url, '/v1/models', { key: unknownKey(), headers: { 'x-forwarded-for': `198.51.100.${i}, 203.0.113.9` } });
        assert.equal(r.status, 401, `an unknown key behind the trusted proxy is refused 401: ${r.text}`);
      }
      const xff = (ip: string) => ({ key: k.key, headers: { 'x-forwarded-for': ip } });
      await eventually(async () => (await callFrom('127.0.0.1', c.gateway.url, '/v1/models', xff('203.0.113.9'))).status === 429);
      assert.equal((await callFrom('127.0.0.1', c.gateway.url, '/v1/models', xff('203.0.113.10'))).status, 200, 'another client behind the proxy');
      assert.equal((await callFrom('127.0.0.1', c.gateway.url, '/v1/models', { key: k.key })).status, 200, 'the proxy itself');

      // 127.0.0.4 is not trusted: its X-Forwarded-For is ignored, the lockout is on 127.0.0.4.
      for (let i = 0; i < 3; i++) {
        const r = await callFrom('127.0.0.4', c.gateway.url, '/v1/models', { key: unknownKey(), headers: { 'x-forwarded-for': '203.0.113.77' } });
        assert.equal(r.status, 401, `an unknown key from the untrusted peer is refused 401: ${r.text}`);
      }
      assert.equal((await callFrom('127.0.0.4', c.gateway.url, '/v1/models', xff('203.0.113.78'))).status, 429, 'the untrusted peer is locked whatever X-Forwarded-For it sends');
      assert.equal((await callFrom('127.0.0.1', c.gateway.url, '/v1/models', xff('203.0.113.77'))).status, 200, 'the client the untrusted peer named in X-Forwarded-For is not locked');
      // The 429 came from this process's own count; the shared row follows right after the answer.
      await eventually(async () => (await env.db('auth_failures').where({ ip: '127.0.0.4' }).first())?.locked_until);
    });

    it('the admin API answers 401 when no ADMIN_TOKEN is configured', async () => {
      refused(await admin(c.gateway.url, '/admin/keys/00000000-0000-0000-0000-000000000000'), 401, 'admin_unauthorized');
    });
  });

  describe('request log and admin HTTP API', () => {
    it('entries older than the retention are pruned on start and in batches; newer ones stay', async () => {
      const old = (days: number, n: number) =>
        Array.from({ length: n }, () => ({ id: randomUUID(), method: 'GET', path: '/v1/models', status: 200, latency_ms: 1, created_at: new Date(Date.now() - days * 86_400_000).toISOString() }));
      const aged = old(31, 5_200); // more than one delete batch
      const kept = old(29, 3);
      for (let i = 0; i < aged.length; i += 1000) await env.db('request_log').insert(aged.slice(i, i + 1000));
      await env.db('request_log').insert(kept);
      const log = new RequestLog(env.db, env.logger, 50, 30);
      log.startPruning();
      try {
        const agedLeft = async () => Number((await env.db('request_log').whereIn('id', aged.map((r) => r.id)).count({ n: '*' }).first())!.n);
        await eventually(async () => (await agedLeft()) === 0, 10_000);
        const left = await env.db('request_log').whereIn('id', [...aged, ...kept].map((r) => r.id)).select('id');
        assert.deepEqual(left.map((r) => r.id).sort(), kept.map((r) => r.id).sort(), 'only the entries within the retention are left');
        assert.equal(await log.prune(), 0, 'nothing more to prune after pruning finished');
      } finally {
        await log.close();
        await env.db('request_log').whereIn('id', kept.map((r) => r.id)).delete();
      }
    });

    it('records every request (401 and 429 included) with x-request-id, key, model, status, latency and cost; listed per key', async () => {
      await awayFromMinuteBoundary();
      const k = await keyedKey({ rpm: 4, models: ['sim-gpt'] });
      const okReply = await chat(a.gateway.url, k.key);
      const notAllowed = await chat(b.gateway.url, k.key, { ...HI, model: 'sim-gpt-mini' });
      const models = await call(b.gateway.url, '/v1/models', { headers: { 'x-api-key': k.key } });
      const fourth = await chat(a.gateway.url, k.key, '{broken');
      const limited = await chat(a.gateway.url, k.key);
      const unknown = await chat(a.gateway.url, unknownKey());
      assert.deepEqual([okReply, notAllowed, models, fourth, limited, unknown].map((r) => r.status), [200, 403, 200, 400, 429, 401], 'the statuses: answered, model not allowed, models listed, bad JSON, rate limited, unknown key');
      const id = (r: Reply) => r.headers.get('x-request-id')!;
      await settled(id(okReply));

      const list = await eventually(async () => {
        const r = await admin(a.gateway.url, `/admin/keys/${k.keyId}/requests`);
        assert.equal(r.status, 200, r.text);
        return r.json.data.length === 5 && r.json.data.every((e: { cost: string | null; billing: string | null }) => e.billing !== 'held') ? r.json : null;
      });
      const byId = new Map(list.data.map((e: { id: string }) => [e.id, e]));
      const entry = (r: Reply) => byId.get(id(r)) as Record<string, unknown>;
      const settledRow = await env.db('reservations').where({ id: id(okReply) }).first();
      assert.deepEqual(
        { ...entry(okReply), latency_ms: 0, created_at: '', ip: '' },
        {
          id: id(okReply),
          key_id: k.keyId,
          method: 'POST',
          path: '/v1/chat/completions',
          model: 'sim-gpt',
          status: 200,
          error_code: null,
          latency_ms: 0,
          cost: String(Number(settledRow.charge)),
          held: null,
          billing: 'settled',
          // no provider cost from the simulator: tokens × the catalog's rates (a cache hit says `cache`)
          billing_source: 'token_fallback',
          // the route that answered (issue 23, feature 1)
          route: { model: 'sim-gpt', provider: 'simulator', upstream_model: 'sim-gpt-2026-01-15', attempts: [{ model: 'sim-gpt', provider: 'simulator', upstream_model: 'sim-gpt-2026-01-15', result: 'ok', http_status: 200, error: null }] },
          ip: '',
          created_at: '',
        },
        'the log entry of the answered request',
      );
      assert.equal(entry(okReply).cost, okReply.headers.get('x-gateway-cost'), 'the logged cost is the answer\'s');
      assert.ok((entry(okReply).latency_ms as number) >= 0, `latency_ms recorded: ${JSON.stringify(entry(okReply))}`);
      assert.ok(Date.parse(entry(okReply).created_at as string) > Date.now() - 60_000, `created_at is recent: ${JSON.stringify(entry(okReply))}`);
      assert.equal(entry(okReply).ip, '127.0.0.1', 'the log entry records the client IP');
      assert.deepEqual([entry(notAllowed).status, entry(notAllowed).model, entry(notAllowed).error_code, entry(notAllowed).cost], [403, 'sim-gpt-mini', 'model_not_allowed', null], 'the not-allowed request is logged with its status, model, error code and no cost');
      assert.deepEqual([entry(models).status, entry(models).path, entry(models).model], [200, '/v1/models', null], 'the model list request is logged with its status and path and no model');
      assert.deepEqual([entry(fourth).status, entry(fourth).error_code], [400, 'invalid_json'], 'the bad-JSON request is logged as 400 invalid_json');
      assert.deepEqual([entry(limited).status, entry(limited).error_code], [429, 'rate_limit_exceeded'], 'the rate-limited request is logged as 429 rate_limit_exceeded');
      // Newest first.
      assert.deepEqual(
        list.data.map((e: { id: string }) => e.id),
        [limited, fourth, models, notAllowed, okReply].map(id),
        "the key's log lists its five requests newest first",
      );
      // The unknown key's 401 is recorded without a key.
      const anon = await eventually(async () => await env.db('request_log').where({ id: id(unknown) }).first());
      assert.deepEqual([anon.key_id, anon.status, anon.error_code], [null, 401, 'invalid_api_key'], "the unknown key's 401 is logged without a key");

      // Pages.
      const p1 = await admin(a.gateway.url, `/admin/keys/${k.keyId}/requests?limit=2`);
      assert.equal(p1.json.data.length, 2, `the first page has the limit of 2 entries: ${p1.text}`);
      assert.equal(p1.json.has_more, true, 'the first page says more follow');
      const p2 = await admin(a.gateway.url, `/admin/keys/${k.keyId}/requests?limit=10&before=${p1.json.next_before}`);
      assert.deepEqual(
        [...p1.json.data, ...p2.json.data].map((e: { id: string }) => e.id),
        list.data.map((e: { id: string }) => e.id),
        'the two pages together are the whole list in order',
      );
      assert.equal(p2.json.has_more, false, 'the last page says nothing more follows');
      refused(await admin(a.gateway.url, `/admin/keys/${k.keyId}/requests?limit=0`), 400, 'invalid_parameter');
    });

    it('admin API: 401 without the token; keys created, shown, changed and revoked with their per-key settings', async () => {
      const acct = await createAccount(env.db, { name: `admin-${randomUUID()}`, tier: 'pro', credits: '10' });
      refused(await admin(a.gateway.url, '/admin/keys', { body: { account_id: acct.id }, token: null }), 401, 'admin_unauthorized');
      refused(await admin(a.gateway.url, '/admin/keys', { body: { account_id: acct.id }, token: 'wrong' }), 401, 'admin_unauthorized');
      const viaHeader = await call(a.gateway.url, `/admin/accounts/${acct.id}/keys`, { headers: { 'x-admin-token': ADMIN } });
      assert.equal(viaHeader.status, 200, `the admin token in x-admin-token is accepted: ${viaHeader.text}`);

      const created = await admin(a.gateway.url, '/admin/keys', {
        body: { account_id: acct.id, label: 'ci', spend_limit: '1500.50', rpm: 60, expires_at: '2999-01-01', models: ['sim-gpt', 'sim-gpt-mini'] },
      });
      assert.equal(created.status, 201, created.text);
      const c = created.json;
      assert.match(c.key, /^mt-[A-Za-z0-9_-]{43}$/, 'an mt- key by default in the keyed variant');
      assert.deepEqual(
        { spend_limit: c.spend_limit, spend: c.spend, rpm: c.rpm, expires_at: c.expires_at, models: c.models, label: c.label, format: c.format, account_id: c.account_id },
        { spend_limit: '1500.5', spend: '0', rpm: 60, expires_at: '2999-01-02T00:00:00.000Z', models: ['sim-gpt', 'sim-gpt-mini'], label: 'ci', format: 'mt', account_id: acct.id },
        'the created key carries the settings it was given, normalised',
      );
      const row = await env.db('api_keys').where({ id: c.id }).first();
      assert.equal(row.spend_limit, '1500.500000000000', 'the spend limit is stored as an exact decimal');
      assert.equal((await chat(a.gateway.url, c.key)).status, 200, 'the created key answers a chat request');

      const shown = await admin(a.gateway.url, `/admin/keys/${c.id}`);
      assert.equal(shown.status, 200, `the key is shown: ${shown.text}`);
      assert.equal(shown.json.key, undefined, 'the key is shown once only');
      assert.equal(shown.json.key_prefix, c.key.slice(0, 12), "the shown key has the created key's prefix");

      const changed = await admin(a.gateway.url, `/admin/keys/${c.id}`, { method: 'PATCH', body: { rpm: null, spend_limit: 0.25, models: null, label: 'ci-2' } });
      assert.equal(changed.status, 200, changed.text);
      assert.deepEqual([changed.json.rpm, changed.json.spend_limit, changed.json.models, changed.json.label], [null, '0.25', null, 'ci-2'], 'the PATCH removed rpm and models, set the spend limit and the label');
      const listed = await admin(a.gateway.url, `/admin/accounts/${acct.id}/keys`);
      assert.deepEqual(
        listed.json.data.map((x: { id: string }) => x.id),
        [c.id],
        'the account lists the created key',
      );

      for (const [body, param] of [
        [{ account_id: acct.id, spend_limit: '-1' }, 'spend_limit'],
        [{ account_id: acct.id, spend_limit: '1e3' }, 'spend_limit'],
        [{ account_id: acct.id, rpm: 0 }, 'rpm'],
        [{ account_id: acct.id, rpm: 1.5 }, 'rpm'],
        [{ account_id: acct.id, expires_at: 'tomorrow' }, 'expires_at'],
        [{ account_id: acct.id, models: [] }, 'models'],
        [{ account_id: acct.id, format: 'gw_ai', rpm: 5 }, 'format'],
        [{ account_id: 'nope' }, 'account_id'],
      ] as const) {
        const r = await admin(a.gateway.url, '/admin/keys', { body });
        refused(r, 400, 'invalid_parameter');
        assert.equal(r.json.error.param, param, r.text);
      }
      refused(await admin(a.gateway.url, '/admin/keys', { body: { account_id: acct.id, colour: 'red' } }), 400, 'unsupported_parameter');
      refused(await admin(a.gateway.url, '/admin/keys', { body: { account_id: randomUUID() } }), 404, 'not_found');
      refused(await admin(a.gateway.url, `/admin/keys/${randomUUID()}`), 404, 'not_found');

      const revoked = await admin(a.gateway.url, `/admin/keys/${c.id}`, { method: 'DELETE' });
      assert.equal(revoked.status, 200, `the key is deleted: ${revoked.text}`);
      assert.ok(revoked.json.revoked_at, `the deleted key has a revocation time: ${JSON.stringify(revoked.json)}`);
      refused(await chat(b.gateway.url, c.key), 401, 'invalid_api_key');
      refused(await admin(a.gateway.url, `/admin/keys/${c.id}/revoke`, { method: 'POST' }), 404, 'not_found');
    });
  });

  describe('admin CLI', () => {
    // the CLI finds the variant in GATEWAY_VARIANT, as the gateway does
    const cli = (...args: string[]) => cliWith({ GATEWAY_VARIANT: 'keyed' }, ...args);

    it('key create --format mt --spend-limit 1500.50 --rpm 60 --expires-at 2027-01-01 --models sim-gpt,sim-gpt-mini returns {id, key}; key update changes and removes settings', async () => {
      const acct = await createAccount(env.db, { name: `cli-keyed-${randomUUID()}`, tier: 'pro', credits: '10' });
      const r = await cli('key', 'create', '--account', acct.id, '--format', 'mt', '--spend-limit', '1500.50', '--rpm', '60', '--expires-at', '2027-01-01', '--models', 'sim-gpt,sim-gpt-mini');
      assert.equal(r.code, 0, JSON.stringify(r.json));
      assert.match(r.json.id, UUID, 'the CLI returns the key id as a UUID');
      assert.match(r.json.key, /^mt-[A-Za-z0-9_-]{43}$/, 'the CLI returns an mt- key');
      const row = await env.db('api_keys').where({ id: r.json.id }).first();
      assert.equal(row.spend_limit, '1500.500000000000', "the CLI's spend limit is stored as an exact decimal");
      assert.equal(row.rpm, 60, "the CLI's rpm is stored");
      assert.equal(row.expires_at.toISOString(), '2027-01-02T00:00:00.000Z', 'valid through 2027-01-01');
      assert.deepEqual(row.allowed_models, ['sim-gpt', 'sim-gpt-mini'], "the CLI's model list is stored");

      const u = await cli('key', 'update', '--id', r.json.id, '--rpm', 'none', '--spend-limit', '2000');
      assert.equal(u.code, 0, JSON.stringify(u.json));
      assert.deepEqual([u.json.rpm, u.json.spend_limit, u.json.models], [null, '2000', ['sim-gpt', 'sim-gpt-mini']], 'the update removed rpm, changed the spend limit and kept the models');

      const wrong = await cliWith({ GATEWAY_VARIANT: 'credits' }, 'key', 'create', '--account', acct.id, '--spend-limit', '10');
      assert.equal(wrong.code, 2, 'an mt-only setting in the credits variant is a usage error (exit 2)');
      assert.match(wrong.json.error.message, /format mt/, 'the error says the setting needs format mt');
      const bad = await cli('key', 'create', '--account', acct.id, '--format', 'mt', '--rpm', 'many');
      assert.equal(bad.code, 2, 'a non-numeric rpm is a usage error (exit 2)');
      assert.equal(bad.json.error.type, 'usage_error', 'a non-numeric rpm is reported as usage_error');
    });
  });

  describe('configuration', () => {
    it('reads the keyed-variant settings and refuses a bad trusted-proxy list', () => {
      const c = loadConfig({ GATEWAY_VARIANT: 'keyed', ADMIN_TOKEN: 't', AUTH_FAILURE_LIMIT: '5', AUTH_FAILURE_WINDOW_SECONDS: '30', TRUSTED_PROXIES: '10.0.0.0/8, ::1,192.0.2.7' });
      assert.equal(c.GATEWAY_VARIANT, 'keyed', 'the variant is read');
      assert.equal(c.AUTH_FAILURE_LIMIT, 5, 'the failure limit is read');
      assert.equal(c.AUTH_FAILURE_WINDOW_SECONDS, 30, 'the failure window is read');
      assert.equal(c.AUTH_LOCKOUT_SECONDS, 300, 'the lockout defaults to 300 seconds');
      assert.deepEqual(c.TRUSTED_PROXIES, ['10.0.0.0/8', '::1', '192.0.2.7'], 'the trusted-proxy list is split and trimmed');
      assert.deepEqual(loadConfig({}).TRUSTED_PROXIES, [], 'no trusted proxies by default');
      for (const bad of ['proxy.local', '10.0.0.0/33', '1.2.3.4/8/1']) {
        assert.throws(() => loadConfig({ TRUSTED_PROXIES: bad }), (e: unknown) => e instanceof ConfigError && /TRUSTED_PROXIES/.test(e.message));
      }
      assert.throws(() => loadConfig({ AUTH_FAILURE_LIMIT: '0' }), /AUTH_FAILURE_LIMIT/);
    });
  });

  describe('client IP', () => {
    const ctxOf = (remote: string, xff?: string) => ({ req: { socket: { remoteAddress: remote } }, get: (h: string) => (h === 'x-forwarded-for' ? (xff ?? '') : '') }) as never;

    it('is the socket address unless the peer is a trusted proxy', () => {
      const none = clientIpResolver([]);
      assert.equal(none(ctxOf('::ffff:10.1.2.3', '1.1.1.1')), '10.1.2.3', 'without trusted proxies the socket address is the client, unmapped from IPv6');
      const trusted = clientIpResolver(['10.0.0.0/8', '::1']);
      assert.equal(trusted(ctxOf('10.1.2.3', '1.1.1.1, 10.9.9.9')), '1.1.1.1', 'behind a trusted proxy the rightmost untrusted X-Forwarded-For entry is the client');
      assert.equal(trusted(ctxOf('10.1.2.3', '6.6.6.6, 1.1.1.1')), '1.1.1.1', 'entries left of the first untrusted one are the client’s own');
      assert.equal(trusted(ctxOf('::1', '2001:db8::5')), '2001:db8::5', 'an IPv6 trusted proxy passes the IPv6 client on');
      assert.equal(trusted(ctxOf('192.0.2.1', '1.1.1.1')), '192.0.2.1', 'an untrusted peer');
      assert.equal(trusted(ctxOf('10.1.2.3')), '10.1.2.3', 'no header');
    });
  });
});

/** A per-minute count must not straddle two minutes of the database clock. */
async function awayFromMinuteBoundary(): Promise<void> {
  const r = await env.db.raw(`SELECT extract(epoch FROM date_trunc('minute', now()) + interval '1 minute' - now()) * 1000 AS left_ms`);
  const left = Number(r.rows[0].left_ms);
  if (left < 10_000) await sleep(left + 300);
}
