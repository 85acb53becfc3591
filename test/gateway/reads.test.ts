import assert from 'node:assert/strict';
import Decimal from 'decimal.js';
import { createKey } from '../../services/keys/keys';
import { env } from '../setup/env';
import { call, newAccount, settled, useStack, type TestAccount } from '../helpers/stack';

// Read endpoints of spec 1 sections 2.4, 2.5, 2.9 and 4.6 over real HTTP.

const PROMPT = 'hi [sim tokens=5]';
// Simulator: prompt tokens = ceil(17 / 4) + 4 = 9, completion tokens = 5 (spec 2.1 table price):
// sim-gpt 9 x 0.000002 + 5 x 0.000008; sim-gpt-mini 9 x 0.0000005 + 5 x 0.0000015.
const SIM_GPT_COST = '0.000058';
const SIM_GPT_MINI_COST = '0.000012';

const DAY_MS = 86_400_000;
const utcDay = (d: Date) => d.toISOString().slice(0, 10);
const shiftDay = (day: string, days: number) => utcDay(new Date(Date.parse(`${day}T00:00:00Z`) + days * DAY_MS));

interface Settled {
  requestId: string;
  bodyId: string;
  cost: string;
  settledAt: Date;
}

function assertEnvelope(res: { status: number; json: any }, status: number, code: string, param: string | null) { // eslint-disable-line @typescript-eslint/no-explicit-any
  assert.equal(res.status, status, JSON.stringify(res.json));
  assert.deepEqual(Object.keys(res.json).sort(), ['error'], `${code}: the body holds only error`);
  assert.deepEqual(Object.keys(res.json.error).sort(), ['code', 'message', 'param', 'type'], `${code}: the error has code, message, param and type`);
  assert.equal(res.json.error.code, code, `the error code is ${code}`);
  assert.equal(res.json.error.param, param, `${code}: the error names the param`);
  assert.equal(typeof res.json.error.message, 'string', `${code}: the message is a string`);
  assert.ok(res.json.error.message.length > 0, `${code}: the error has a message`);
  assert.equal(typeof res.json.error.type, 'string', `${code}: the type is a string`);
}

const sumOf = (costs: string[]) => costs.reduce((s, c) => s.add(c), new Decimal(0));

describe('read endpoints (spec 1 sections 2.4, 2.5, 2.9, 4.6)', function () {
  const stack = useStack();
  let base: string;

  before(async function () {
    base = stack.gateway.url;
  });


  /** One non-streaming chat request, answered 200, waited for until its hold has settled. */
  async function chat(key: string, model = 'sim-gpt', content = PROMPT): Promise<Settled> {
    const res = await call(base, '/v1/chat/completions', { key, body: { model, messages: [{ role: 'user', content }] } });
    assert.equal(res.status, 200, res.text);
    const requestId = res.headers.get('x-gateway-request-id');
    const cost = res.headers.get('x-gateway-cost');
    assert.ok(requestId, 'x-gateway-request-id header');
    assert.ok(cost !== null, 'x-gateway-cost header');
    const row = await settled(requestId);
    assert.equal(row.status, 'settled', 'the request settled');
    return { requestId, bodyId: res.json.id, cost, settledAt: row.settled_at };
  }

  /** Waits until no reservation of the account is held (for requests whose id the client never saw). */
  async function quiet(accountId: string, timeoutMs = 20_000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const n = (await env.db('reservations').where({ account_id: accountId, status: 'held' }).select('id')).length;
      if (n === 0) return;
      if (Date.now() > deadline) throw new Error(`account ${accountId} still has ${n} held reservations`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  describe('GET /v1/credits', function () {
    let acct: TestAccount;
    let done: Settled[];

    before(async function () {
      acct = await newAccount({ credits: '10', tier: 'pro' });
      done = [];
      for (let i = 0; i < 3; i++) done.push(await chat(acct.key));
    });

    it('charges the documented table price for the probe prompt', function () {
      for (const d of done) assert.equal(d.cost, SIM_GPT_COST, 'each probe is charged the table price');
    });

    it('reports the balance after settled requests: usage = sum of charges, nothing reserved or pending', async function () {
      const res = await call(base, '/v1/credits', { key: acct.key });
      assert.equal(res.status, 200, res.text);
      const d = res.json.data;
      assert.deepEqual(Object.keys(d).sort(), [
        'cycle_started_at',
        'expires_at',
        'is_expired',
        'pending_requests',
        'remaining_credits',
        'reserved_credits',
        'tier',
        'total_credits',
        'total_usage',
      ], 'the credits fields as documented');
      const usage = sumOf(done.map((x) => x.cost));
      assert.equal(d.total_credits, 10, 'total credits as granted');
      assert.equal(d.total_usage, usage.toNumber(), 'usage is the sum of the charges');
      assert.equal(d.remaining_credits, new Decimal(10).sub(usage).toNumber(), 'remaining is the grant minus the charges');
      assert.equal(d.remaining_credits, new Decimal(d.total_credits).sub(d.total_usage).toNumber(), 'remaining is total minus usage');
      assert.equal(d.reserved_credits, 0, 'nothing reserved');
      assert.equal(d.pending_requests, 0, 'nothing pending');
      assert.equal(d.tier, 'pro', "the account's tier");
      assert.equal(d.expires_at, null, 'no plan expiry');
      assert.equal(d.is_expired, false, 'not expired');
      assert.equal(typeof d.cycle_started_at, 'string', 'cycle_started_at is a string');
      assert.ok(!Number.isNaN(Date.parse(d.cycle_started_at)), `cycle_started_at is a date: ${d.cycle_started_at}`);
    });

    it('stays readable on an expired plan and says so', async function () {
      const expiredAt = new Date(Date.now() - DAY_MS).toISOString();
      const a = await newAccount({ credits: '3', tier: 'starter', planExpiresAt: expiredAt });
      const res = await call(base, '/v1/credits', { key: a.key });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.data.is_expired, true, 'an expired plan says so');
      assert.equal(res.json.data.expires_at, expiredAt, 'the expiry date as set');
      assert.equal(res.json.data.remaining_credits, 3, 'the balance stays readable');
      assert.equal(res.json.data.tier, 'starter', "the account's tier");
    });
  });

  describe('GET /v1/key', function () {
    it('describes a fresh key: prefix, nulls, zero usage, never used', async function () {
      const a = await newAccount({ credits: '5', tier: 'pro' });
      const res = await call(base, '/v1/key', { key: a.key });
      assert.equal(res.status, 200, res.text);
      const d = res.json.data;
      assert.equal(d.id, a.keyId, 'the key id');
      assert.equal(d.label, 'test', 'the key label');
      assert.equal(d.key_prefix, a.key.slice(0, 12), 'the prefix is the first 12 characters of the key');
      assert.equal(d.key_prefix.length, 12, 'the prefix has 12 characters');
      assert.ok(!JSON.stringify(res.json).includes(a.key), 'the full key is never returned');
      assert.equal(d.limit, null, 'no spend limit');
      assert.equal(d.limit_reset, null, 'no limit reset');
      assert.equal(d.limit_remaining, 5, 'without a limit, limit_remaining is the balance');
      assert.equal(d.balance, 5, "the account's balance");
      assert.equal(d.usage, 0, 'no usage yet');
      assert.equal(d.usage_daily, 0, 'no daily usage yet');
      assert.equal(d.usage_weekly, 0, 'no weekly usage yet');
      assert.equal(d.usage_monthly, 0, 'no monthly usage yet');
      assert.equal(d.requests, 0, 'no requests yet');
      assert.equal(d.requests_daily, 0, 'no daily requests yet');
      assert.equal(d.requests_weekly, 0, 'no weekly requests yet');
      assert.equal(d.requests_monthly, 0, 'no monthly requests yet');
      assert.equal(d.last_used_at, null, 'never used');
      assert.equal(d.is_free_tier, false, 'a pro key is not free tier');
      assert.equal(d.is_expired, false, 'not expired');
      assert.equal(d.tier, 'pro', "the account's tier");
      const row = await env.db('api_keys').where({ id: a.keyId }).first();
      assert.equal(d.created_at, row.created_at.toISOString(), "created_at is the key row's");
    });

    it('sums the charges of the key in every window and counts its requests', async function () {
      const a = await newAccount({ credits: '5', tier: 'pro' });
      const other = await createKey(env.db, { accountId: a.accountId, label: 'other' });
      const mine = [await chat(a.key), await chat(a.key, 'sim-gpt-mini')];
      await chat(other.key); // same account, other key: not in this key's numbers
      const res = await call(base, '/v1/key', { key: a.key });
      assert.equal(res.status, 200, res.text);
      const d = res.json.data;
      const usage = sumOf(mine.map((x) => x.cost)).toNumber();
      assert.equal(usage, new Decimal(SIM_GPT_COST).add(SIM_GPT_MINI_COST).toNumber(), 'usage is the two table prices');
      assert.equal(d.usage, usage, "usage is the key's charges");
      assert.equal(d.usage_daily, usage, 'daily usage is the charges of today');
      assert.equal(d.usage_weekly, usage, 'weekly usage is the charges of this week');
      assert.equal(d.usage_monthly, usage, 'monthly usage is the charges of this month');
      assert.equal(d.requests, 2, "the key's two requests counted");
      assert.equal(d.requests_daily, 2, 'two requests today');
      assert.equal(d.requests_weekly, 2, 'two requests this week');
      assert.equal(d.requests_monthly, 2, 'two requests this month');
      const last = mine.map((x) => x.settledAt).sort((x, y) => x.getTime() - y.getTime())[1];
      assert.equal(d.last_used_at, last.toISOString(), 'last_used_at is the later settlement');
      // The balance is the account's, after all three requests.
      const credits = await call(base, '/v1/credits', { key: a.key });
      assert.equal(d.balance, credits.json.data.remaining_credits, "the key's balance is the account's remaining credits");
      assert.equal(d.limit_remaining, credits.json.data.remaining_credits, 'without a limit, limit_remaining is the balance');
      assert.equal(d.balance, new Decimal(5).sub(usage).sub(SIM_GPT_COST).toNumber(), 'the balance is after all three requests');

      const o = await call(base, '/v1/key', { key: other.key });
      assert.equal(o.json.data.id, other.id, 'the other key is described');
      assert.equal(o.json.data.label, 'other', "the other key's label");
      assert.equal(o.json.data.requests, 1, "the other key's one request");
      assert.equal(o.json.data.usage, Number(SIM_GPT_COST), "the other key's usage is its one charge");
    });

    it('is_free_tier is true for user and free_trial, false for paid plans', async function () {
      const expect: Array<['user' | 'free_trial' | 'starter' | 'pro' | 'business', boolean]> = [
        ['user', true],
        ['free_trial', true],
        ['starter', false],
        ['pro', false],
        ['business', false],
      ];
      for (const [tier, free] of expect) {
        const a = await newAccount({ tier, credits: '1' });
        const res = await call(base, '/v1/key', { key: a.key });
        assert.equal(res.status, 200, res.text);
        assert.equal(res.json.data.is_free_tier, free, tier);
        assert.equal(res.json.data.tier, tier, `the ${tier} tier is reported`);
      }
    });

    it('limit_remaining is 0 when the plan expired, while balance keeps the account balance', async function () {
      const expiredAt = new Date(Date.now() - 60_000).toISOString();
      const a = await newAccount({ credits: '7.5', tier: 'pro', planExpiresAt: expiredAt });
      const res = await call(base, '/v1/key', { key: a.key });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.data.is_expired, true, 'an expired plan says so');
      assert.equal(res.json.data.expires_at, expiredAt, 'the expiry date as set');
      assert.equal(res.json.data.limit_remaining, 0, 'nothing left to spend on an expired plan');
      assert.equal(res.json.data.balance, 7.5, 'the balance stays the account balance');
      // ...and inference is refused with 403 on the same key.
      const chatRes = await call(base, '/v1/chat/completions', { key: a.key, body: { model: 'sim-gpt', messages: [{ role: 'user', content: PROMPT }] } });
      assert.equal(chatRes.status, 403, `inference on an expired plan is refused with 403: ${chatRes.text}`);
    });

    it('a plan that ends in the future is not expired', async function () {
      const a = await newAccount({ credits: '2', tier: 'pro', planExpiresAt: new Date(Date.now() + 30 * DAY_MS).toISOString() });
      const res = await call(base, '/v1/key', { key: a.key });
      assert.equal(res.json.data.is_expired, false, 'a future end is not expired');
      assert.equal(res.json.data.limit_remaining, 2, 'limit_remaining is the balance');
    });
  });

  describe('GET /v1/generation', function () {
    let acct: TestAccount;
    let g: Settled;

    before(async function () {
      acct = await newAccount({ credits: '5', tier: 'pro' });
      g = await chat(acct.key);
    });

    it('finds the record by request id and by body id; both are the same settled record', async function () {
      assert.match(g.bodyId, /^chatcmpl-/, 'the body id is a chat completion id');
      const byId = await call(base, `/v1/generation?id=${g.requestId}`, { key: acct.key });
      const byBody = await call(base, `/v1/generation?id=${encodeURIComponent(g.bodyId)}`, { key: acct.key });
      assert.equal(byId.status, 200, byId.text);
      assert.equal(byBody.status, 200, byBody.text);
      assert.deepEqual(byBody.json, byId.json, 'both ids give the same record');
      const d = byId.json.data;
      assert.equal(d.id, g.requestId, 'the record id is the request id');
      assert.equal(d.body_id, g.bodyId, 'the body id is recorded');
      assert.equal(d.model, 'sim-gpt', 'the model');
      assert.equal(d.provider, 'simulator', 'the provider');
      assert.equal(d.status, 'settled', 'the record is settled');
      assert.equal(d.outcome, 'completed', 'the request completed');
      assert.equal(d.billing_source, 'token_fallback', 'billed from tokens without a provider cost');
      assert.equal(d.is_estimate, true, 'a token price is an estimate');
      assert.equal(d.cost, Number(g.cost), 'the cost is the x-gateway-cost header');
      assert.equal(d.cost, Number(SIM_GPT_COST), 'the cost is the table price');
      assert.equal(d.cost_details.input_credits, new Decimal(9).mul('0.000002').toNumber(), 'input credits are 9 tokens at the input price');
      assert.equal(d.cost_details.output_credits, new Decimal(5).mul('0.000008').toNumber(), 'output credits are 5 tokens at the output price');
      assert.equal(d.cost_details.pricing_adjustment_credits, 0, 'no pricing adjustment');
      assert.equal(d.tokens.prompt_tokens, 9, '9 prompt tokens');
      assert.equal(d.tokens.completion_tokens, 5, '5 completion tokens');
      assert.equal(d.http_status, 200, 'answered 200');
      assert.equal(d.settled_at, g.settledAt.toISOString(), 'the settlement time');
    });

    it('reports provider_cost when the provider reported a cost, and the same cost as the header', async function () {
      // [sim cost=auto]: prompt x 0.000001 + completion x 0.000002 USD, 1 credit per USD.
      const p = await chat(acct.key, 'sim-gpt', 'hi [sim tokens=5 cost=auto]');
      const res = await call(base, `/v1/generation?id=${p.requestId}`, { key: acct.key });
      assert.equal(res.status, 200, res.text);
      const d = res.json.data;
      assert.equal(d.billing_source, 'provider_cost', 'billed from the provider cost');
      assert.equal(d.is_estimate, false, 'a provider cost is not an estimate');
      assert.equal(d.cost, Number(p.cost), 'the cost is the x-gateway-cost header');
      const prompt = Math.ceil('hi [sim tokens=5 cost=auto]'.length / 4) + 4;
      assert.equal(d.tokens.prompt_tokens, prompt, 'the prompt tokens of the simulator');
      assert.equal(d.cost, new Decimal(prompt).mul('0.000001').add(new Decimal(5).mul('0.000002')).toNumber(), 'the cost is what the simulator reported');
    });

    it("another account's request id or body id answers 404 in the error envelope", async function () {
      const other = await newAccount({ credits: '5', tier: 'pro' });
      const theirs = await chat(other.key);
      for (const id of [theirs.requestId, theirs.bodyId]) {
        const res = await call(base, `/v1/generation?id=${encodeURIComponent(id)}`, { key: acct.key });
        assertEnvelope(res, 404, 'not_found', 'id');
        assert.equal(res.json.error.type, 'invalid_request_error', 'the error type is invalid_request_error');
      }
      // The owner sees it.
      const own = await call(base, `/v1/generation?id=${theirs.requestId}`, { key: other.key });
      assert.equal(own.status, 200, 'the owner sees its request');
      assert.equal(own.json.data.id, theirs.requestId, 'the owner gets the record');
    });

    it('an unknown id answers 404', async function () {
      const res = await call(base, '/v1/generation?id=00000000-0000-4000-8000-000000000000', { key: acct.key });
      assertEnvelope(res, 404, 'not_found', 'id');
    });

    it('a missing id answers 400 missing_required_parameter', async function () {
      const res = await call(base, '/v1/generation', { key: acct.key });
      assertEnvelope(res, 400, 'missing_required_parameter', 'id');
      assert.equal(res.json.error.type, 'invalid_request_error', 'the error type is invalid_request_error');
    });

    it('an unknown query parameter answers 400 unsupported_parameter naming it', async function () {
      const res = await call(base, `/v1/generation?id=${g.requestId}&verbose=1`, { key: acct.key });
      assertEnvelope(res, 400, 'unsupported_parameter', 'verbose');
      assert.match(res.json.error.message, /verbose/, 'the message names the parameter');
    });

    it('needs a key', async function () {
      const res = await call(base, `/v1/generation?id=${g.requestId}`);
      assertEnvelope(res, 401, 'missing_api_key', null);
    });
  });

  describe('GET /v1/usage', function () {
    let acct: TestAccount;
    let key2: { id: string; key: string };
    let k1: Settled[];
    let k2: Settled[];
    let day: string;
    let stranger: TestAccount;

    before(async function () {
      acct = await newAccount({ credits: '0.2', tier: 'pro' });
      key2 = await createKey(env.db, { accountId: acct.accountId, label: 'second' });
      stranger = await newAccount({ credits: '5', tier: 'pro' });
      k1 = [await chat(acct.key), await chat(acct.key)];
      k2 = [await chat(key2.key, 'sim-gpt-mini')];
      await chat(stranger.key); // another account: never in these numbers

      // Not counted: an upstream failure (released), a 402 before the hold, a 400 before the hold.
      const failed = await call(base, '/v1/chat/completions', { key: acct.key, body: { model: 'sim-gpt', messages: [{ role: 'user', content: 'hi [sim status=500]' }] } });
      assert.equal(failed.status, 502, failed.text);
      const poor = await call(base, '/v1/chat/completions', {
        key: acct.key,
        body: { model: 'sim-reasoner', max_completion_tokens: 16384, messages: [{ role: 'user', content: PROMPT }] },
      });
      assert.equal(poor.status, 402, poor.text);
      const bad = await call(base, '/v1/chat/completions', { key: acct.key, body: { model: 'sim-gpt' } });
      assert.equal(bad.status, 400, bad.text);
      await quiet(acct.accountId);
      const released = await env.db('reservations').where({ account_id: acct.accountId, status: 'released' });
      assert.equal(released.length, 1, 'the 502 request was held and released');
      const days = new Set([...k1, ...k2].map((s) => utcDay(s.settledAt)));
      assert.equal(days.size, 1, 'test requests straddle midnight UTC; rerun');
      day = [...days][0];
    });

    const all = () => [...k1, ...k2];

    it('totals and breaks down by model, provider, day and key; failed and rejected requests are not counted', async function () {
      const res = await call(base, '/v1/usage', { key: acct.key });
      assert.equal(res.status, 200, res.text);
      const d = res.json.data;
      const total = sumOf(all().map((s) => s.cost)).toNumber();
      assert.deepEqual(d.total, { requests: 3, credits: total, prompt_tokens: 27, completion_tokens: 15 }, 'the totals count only the three settled requests');
      assert.deepEqual(d.by_model, [
        { model: 'sim-gpt', requests: 2, credits: sumOf(k1.map((s) => s.cost)).toNumber(), prompt_tokens: 18, completion_tokens: 10 },
        { model: 'sim-gpt-mini', requests: 1, credits: Number(SIM_GPT_MINI_COST), prompt_tokens: 9, completion_tokens: 5 },
      ], 'by model: sim-gpt twice, sim-gpt-mini once');
      assert.deepEqual(d.by_provider, [{ provider: 'simulator', requests: 3, credits: total, prompt_tokens: 27, completion_tokens: 15 }], 'by provider: all three on the simulator');
      assert.deepEqual(d.by_day, [{ day, requests: 3, credits: total, prompt_tokens: 27, completion_tokens: 15 }], 'by day: all three on the one day');
      const byKey = [...d.by_key].sort((x: { requests: number }, y: { requests: number }) => y.requests - x.requests);
      assert.deepEqual(byKey, [
        { api_key: acct.keyId, requests: 2, credits: sumOf(k1.map((s) => s.cost)).toNumber(), prompt_tokens: 18, completion_tokens: 10 },
        { api_key: key2.id, requests: 1, credits: Number(SIM_GPT_MINI_COST), prompt_tokens: 9, completion_tokens: 5 },
      ], 'by key: two on the first key, one on the second');
      // Default range: the last 30 days up to now.
      const span = Date.parse(d.to) - Date.parse(d.from);
      assert.equal(span, 30 * DAY_MS, 'the default range is 30 days');
      assert.ok(Math.abs(Date.parse(d.to) - Date.now()) < 60_000, `the default range ends now: ${d.to}`);
      // The usage total agrees with the balance: only settled charges were taken.
      const credits = await call(base, '/v1/credits', { key: acct.key });
      assert.equal(credits.json.data.total_usage, total, 'the usage total is the account total usage');
    });

    it('the same numbers from either key of the account', async function () {
      const a = await call(base, '/v1/usage', { key: acct.key });
      const b = await call(base, '/v1/usage', { key: key2.key });
      assert.equal(b.status, 200, 'the second key reads the usage too');
      assert.deepEqual(b.json.data.total, a.json.data.total, 'both keys see the same totals');
    });

    it('model= filters to one model', async function () {
      const res = await call(base, '/v1/usage?model=sim-gpt-mini', { key: acct.key });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.json.data.total, { requests: 1, credits: Number(SIM_GPT_MINI_COST), prompt_tokens: 9, completion_tokens: 5 }, 'only the sim-gpt-mini request');
      assert.deepEqual(
        res.json.data.by_model.map((m: { model: string }) => m.model),
        ['sim-gpt-mini'],
        'by model lists only sim-gpt-mini',
      );
      const none = await call(base, '/v1/usage?model=sim-claude', { key: acct.key });
      assert.equal(none.json.data.total.requests, 0, 'no requests for another model');
      assert.equal(none.json.data.total.credits, 0, 'no credits for another model');
      assert.deepEqual(none.json.data.by_model, [], 'no model breakdown for another model');
    });

    it('provider= filters to one provider', async function () {
      const res = await call(base, '/v1/usage?provider=simulator', { key: acct.key });
      assert.equal(res.json.data.total.requests, 3, 'all three requests on the simulator');
      const none = await call(base, '/v1/usage?provider=elsewhere', { key: acct.key });
      assert.equal(none.json.data.total.requests, 0, 'no requests for another provider');
    });

    it('date= is one UTC day: the day of the requests counts them, another day is zero', async function () {
      const res = await call(base, `/v1/usage?date=${day}`, { key: acct.key });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.data.total.requests, 3, 'the three requests on their day');
      assert.equal(res.json.data.from, `${day}T00:00:00.000Z`, 'the range starts at midnight UTC');
      assert.equal(res.json.data.to, `${shiftDay(day, 1)}T00:00:00.000Z`, 'the range ends at the next midnight UTC');
      for (const other of [shiftDay(day, -1), shiftDay(day, 1)]) {
        const r = await call(base, `/v1/usage?date=${other}`, { key: acct.key });
        assert.equal(r.status, 200, r.text);
        assert.deepEqual(r.json.data.total, { requests: 0, credits: 0, prompt_tokens: 0, completion_tokens: 0 }, `nothing on ${other}`);
        assert.deepEqual(r.json.data.by_day, [], `no day breakdown for ${other}`);
      }
    });

    it('date= overrides from and to', async function () {
      const res = await call(base, `/v1/usage?date=${day}&from=${shiftDay(day, -5)}&to=${shiftDay(day, -3)}`, { key: acct.key });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.data.total.requests, 3, 'date= wins over from and to');
    });

    it('to=YYYY-MM-DD includes that whole day', async function () {
      const res = await call(base, `/v1/usage?from=${day}&to=${day}`, { key: acct.key });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.data.total.requests, 3, 'the three requests counted');
      assert.equal(res.json.data.to, `${shiftDay(day, 1)}T00:00:00.000Z`, 'the range ends at the next midnight');
      const before = await call(base, `/v1/usage?to=${shiftDay(day, -1)}`, { key: acct.key });
      assert.equal(before.status, 200, before.text);
      assert.equal(before.json.data.total.requests, 0, 'nothing before the day');
      // An instant as `to` is exclusive and exact.
      const earliest = all().map((s) => s.settledAt.getTime()).sort((x, y) => x - y)[0];
      const cut = await call(base, `/v1/usage?from=${day}&to=${encodeURIComponent(new Date(earliest).toISOString())}`, { key: acct.key });
      assert.equal(cut.status, 200, cut.text);
      assert.equal(cut.json.data.total.requests, 0, 'to is exclusive: the earliest settlement is not counted');
    });

    it('an ISO 8601 instant without a zone is UTC', async function () {
      const bare = await call(base, `/v1/usage?from=${day}T00:00:00&to=${day}T23:59:59.999`, { key: acct.key });
      assert.equal(bare.status, 200, bare.text);
      assert.equal(bare.json.data.from, `${day}T00:00:00.000Z`, 'from without a zone is UTC');
      assert.equal(bare.json.data.to, `${day}T23:59:59.999Z`, 'to without a zone is UTC');
      assert.equal(bare.json.data.total.requests, 3, 'the three requests counted');
      const offset = await call(base, `/v1/usage?from=${encodeURIComponent(`${day}T00:00:00+01:00`)}&to=${day}`, { key: acct.key });
      assert.equal(offset.json.data.from, new Date(`${day}T00:00:00+01:00`).toISOString(), 'an explicit offset is kept');
    });

    it('a range of 93 days is accepted, over 93 days is 400 invalid_parameter', async function () {
      const ok = await call(base, `/v1/usage?from=${shiftDay(day, -92)}&to=${day}`, { key: acct.key });
      assert.equal(ok.status, 200, ok.text);
      assert.equal(Date.parse(ok.json.data.to) - Date.parse(ok.json.data.from), 93 * DAY_MS, 'the range is 93 days');
      assert.equal(ok.json.data.total.requests, 3, 'the three requests counted');
      const res = await call(base, `/v1/usage?from=${shiftDay(day, -93)}&to=${day}`, { key: acct.key });
      assertEnvelope(res, 400, 'invalid_parameter', 'to');
      assert.equal(res.json.error.type, 'invalid_request_error', 'the error type is invalid_request_error');
      const longAgo = await call(base, `/v1/usage?from=${shiftDay(day, -200)}`, { key: acct.key });
      assertEnvelope(longAgo, 400, 'invalid_parameter', 'to');
    });

    it('from after to is 400 invalid_parameter', async function () {
      const res = await call(base, `/v1/usage?from=${day}&to=${shiftDay(day, -2)}`, { key: acct.key });
      assertEnvelope(res, 400, 'invalid_parameter', 'from');
    });

    it('malformed dates are 400 invalid_parameter naming the parameter', async function () {
      for (const [q, param] of [
        ['date=yesterday', 'date'],
        ['date=2026-13-01', 'date'],
        ['date=20260101', 'date'],
        ['from=not-a-date', 'from'],
        ['to=2026-99-99', 'to'],
        ['date=2026-02-30', 'date'],
        ['to=March 7', 'to'],
        ['from=2026-11-01T25:00:00&to=2026-11-02', 'from'],
      ]) {
        const res = await call(base, `/v1/usage?${q}`, { key: acct.key });
        assertEnvelope(res, 400, 'invalid_parameter', param);
      }
    });

    it('an unknown query parameter is 400 unsupported_parameter', async function () {
      const res = await call(base, '/v1/usage?key=abc', { key: acct.key });
      assertEnvelope(res, 400, 'unsupported_parameter', 'key');
    });

    it('api_key=<own key id> filters to that key', async function () {
      const one = await call(base, `/v1/usage?api_key=${key2.id}`, { key: acct.key });
      assert.equal(one.status, 200, one.text);
      assert.deepEqual(one.json.data.total, { requests: 1, credits: Number(SIM_GPT_MINI_COST), prompt_tokens: 9, completion_tokens: 5 }, 'only the second key request');
      assert.deepEqual(one.json.data.by_key.map((k: { api_key: string }) => k.api_key), [key2.id], 'by key lists only the second key');
      const first = await call(base, `/v1/usage?api_key=${acct.keyId}`, { key: key2.key });
      assert.equal(first.json.data.total.requests, 2, 'the first key filtered from the second key');
      assert.equal(first.json.data.total.credits, sumOf(k1.map((s) => s.cost)).toNumber(), "the first key's charges");
    });

    it("api_key=<another account's key id> is 404, like an unknown key; a non-UUID is 400", async function () {
      const res = await call(base, `/v1/usage?api_key=${stranger.keyId}`, { key: acct.key });
      assertEnvelope(res, 404, 'not_found', 'api_key');
      const unknown = await call(base, '/v1/usage?api_key=00000000-0000-4000-8000-000000000000', { key: acct.key });
      assertEnvelope(unknown, 404, 'not_found', 'api_key');
      const bad = await call(base, '/v1/usage?api_key=gw_ai_abc', { key: acct.key });
      assertEnvelope(bad, 400, 'invalid_parameter', 'api_key');
    });

    it("the stranger's usage holds only the stranger's request", async function () {
      const res = await call(base, '/v1/usage', { key: stranger.key });
      assert.equal(res.json.data.total.requests, 1, "the stranger's one request");
      assert.deepEqual(res.json.data.by_key.map((k: { api_key: string }) => k.api_key), [stranger.keyId], "only the stranger's key");
    });
  });

  describe('reads never change the balance', function () {
    it('calling every read endpoint repeatedly leaves credits, ledger and reservations untouched', async function () {
      const a = await newAccount({ credits: '4', tier: 'pro' });
      const g = await chat(a.key);
      const snapshot = async () => ({
        credits: (await call(base, '/v1/credits', { key: a.key })).json.data,
        ledger: await env.db('ledger').where({ account_id: a.accountId }).orderBy('id').select('id', 'kind', 'amount'),
        reservations: (await env.db('reservations').where({ account_id: a.accountId }).select('id', 'status', 'charge')).length,
        account: await env.db('accounts').where({ id: a.accountId }).first('total_credits', 'total_usage', 'reserved_credits', 'pending_requests'),
      });
      const before = await snapshot();
      assert.equal(before.credits.remaining_credits, new Decimal(4).sub(g.cost).toNumber(), 'remaining is the grant minus the one charge');
      const paths = ['/v1/credits', '/v1/key', `/v1/generation?id=${g.requestId}`, `/v1/generation?id=${g.bodyId}`, '/v1/usage', `/v1/usage?date=${utcDay(g.settledAt)}`, '/v1/models'];
      for (let i = 0; i < 3; i++) {
        for (const p of paths) {
          const res = await call(base, p, { key: a.key });
          assert.equal(res.status, 200, `${p}: ${res.text}`);
          assert.equal(res.headers.get('x-gateway-cost'), null, `${p} carries no cost`);
        }
        // Failing reads do not cost either.
        assert.equal((await call(base, '/v1/generation', { key: a.key })).status, 400, 'a failing generation read is 400');
        assert.equal((await call(base, '/v1/usage?date=bad', { key: a.key })).status, 400, 'a failing usage read is 400');
      }
      const after = await snapshot();
      assert.deepEqual(after, before, 'credits, ledger and reservations unchanged by the reads');
    });
  });
});
