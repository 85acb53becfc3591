import assert from 'node:assert/strict';
import { deactivateAccount } from '../../services/accounts/accounts';
import { createKey, revokeKey } from '../../services/keys/keys';
import { env } from '../setup/env';
import { call, checkInvariants, newAccount, settled, useStack, type TestAccount } from '../helpers/stack';

const user = (content: string) => [{ role: 'user', content }];
const simStats = async () => (await call(env.simulator.url, '/_sim/stats')).json;

/** Reads an SSE answer into its data payloads. */
async function readStream(res: Response): Promise<string[]> {
  const text = await res.text();
  return text
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice(6));
}

describe('chat completions', function () {
  const stack = useStack({ upstreamTimeoutMs: 1500, uncertainGraceMs: 300 });
  let acct: TestAccount;
  let base: string;

  before(async () => {
    base = stack.gateway.url;
  });
  beforeEach(async () => {
    acct = await newAccount({ credits: '100' });
  });

  const chat = (body: Record<string, unknown>, key = acct.key) => call(base, '/v1/chat/completions', { key, body });

  it('answers with usage in credits, then settles exactly that charge through the reservation workflow', async () => {
    const r = await chat({ model: 'sim-gpt', messages: user('hello world [sim tokens=7]') });
    assert.equal(r.status, 200, `a plain chat request is answered: ${r.text.slice(0, 300)}`);
    const id = r.headers.get('x-gateway-request-id')!;
    assert.match(id, /^[0-9a-f-]{36}$/, 'the answer carries a request id that is a UUID');
    const u = r.json.usage;
    assert.equal(u.completion_tokens, 7, 'completion tokens are the 7 the simulator was told to produce');
    assert.equal(u.total_tokens, u.prompt_tokens + u.completion_tokens, 'total tokens are prompt plus completion tokens');
    assert.equal(u.cost_details.billing_source, 'token_fallback', 'without a provider cost the charge comes from the token price table');
    assert.equal(u.cost_details.is_estimate, true, 'a table-price charge is flagged as an estimate');
    // table price: prompt × 0.000002 + 7 × 0.000008
    const expected = u.prompt_tokens * 0.000002 + 7 * 0.000008;
    assert.ok(Math.abs(u.cost - expected) < 1e-12, `cost ${u.cost} != ${expected}`);
    assert.equal(r.headers.get('x-gateway-cost'), String(u.cost), 'the x-gateway-cost header equals the usage cost');
    assert.equal(u.balance.before, 100, 'the balance before the request is the 100 credits granted');
    assert.ok(Math.abs(u.balance.after - (100 - u.cost)) < 1e-9, `balance after ${u.balance.after} = 100 - cost ${u.cost}`);
    assert.ok(u.balance.reserved_credits > u.cost, `the hold ${u.balance.reserved_credits} still covers more than the cost ${u.cost}`);

    const row = await settled(id);
    assert.equal(row.status, 'settled', 'the reservation ends settled');
    assert.equal(Number(row.charge), u.cost, 'the settled charge equals the cost the answer reported');
    assert.equal(row.body_id, r.json.id, "the reservation records the answer's body id");
    // Settled by a batch settlement workflow, recorded on the row and findable by the request id.
    assert.match(row.settlement_workflow_id, /^settlement-/, 'the reservation names the settlement workflow that settled it');
    const handle = stack.temporal.workflow.getHandle(row.settlement_workflow_id);
    const result = await handle.result();
    assert.ok(result.settled >= 1, `settled requests: ${result.settled}`);
    const desc = await handle.describe();
    assert.ok((desc.searchAttributes.RequestIds as string[]).includes(id), `the RequestIds search attribute names ${id}: ${JSON.stringify(desc.searchAttributes.RequestIds)}`);
    assert.ok((desc.searchAttributes.AccountIds as string[]).includes(acct.accountId), `the AccountIds search attribute names the account: ${JSON.stringify(desc.searchAttributes.AccountIds)}`);
    assert.ok(Number(desc.memo?.requests) >= 1, `the memo counts the requests: ${JSON.stringify(desc.memo)}`);
    let found: string[] = [];
    for (const deadline = Date.now() + 10_000; found.length === 0 && Date.now() < deadline; await new Promise((res) => setTimeout(res, 200))) {
      found = [];
      for await (const w of stack.temporal.workflow.list({ query: `RequestIds = "${id}"` })) found.push(w.workflowId);
    }
    assert.deepEqual(found, [row.settlement_workflow_id], 'a visibility query by request id finds exactly the settling workflow');

    const inv = await checkInvariants(acct.accountId);
    assert.equal(Number(inv.account.total_usage), u.cost, "the account's total usage is the one charge");
    assert.equal(Number(inv.account.reserved_credits), 0, 'no credits remain reserved after settlement');
    assert.equal(inv.account.pending_requests, 0, 'no request is pending after settlement');
    assert.equal(Number(inv.ledger.usage), Number(inv.account.total_usage), "ledger usage matches the account's total usage");
    assert.equal(Number(inv.ledger.grants), Number(inv.account.total_credits), "ledger grants match the account's total credits");
  });

  it('forwards the upstream model id and turns on streaming usage itself', async () => {
    await call(env.simulator.url, '/_sim/stats', { method: 'DELETE' });
    const r = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${acct.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sim-gpt', stream: true, messages: user('x [sim tokens=2]') }),
    });
    await readStream(r);
    const s = await simStats();
    assert.equal(s.last_requests.at(-1).model, 'sim-gpt-2026-01-15', 'the provider is sent the upstream model id, not the alias');
    assert.equal(s.last_requests.at(-1).include_usage, true, 'the gateway asks the provider for streaming usage itself');
  });

  it('bills a provider-reported cost and records the difference to the table price', async () => {
    const r = await chat({ model: 'sim-gpt', messages: user('priced [sim tokens=10 cost=0.00005]') });
    assert.equal(r.status, 200, `a request with a provider cost is answered: ${r.text.slice(0, 300)}`);
    const d = r.json.usage.cost_details;
    assert.equal(d.billing_source, 'provider_cost', 'a provider-reported cost is billed as provider_cost');
    assert.equal(d.is_estimate, false, 'a provider-reported cost is not an estimate');
    assert.equal(r.json.usage.cost, 0.00005, "the charged cost is the provider's cost");
    const table = d.input_credits + d.output_credits;
    assert.ok(Math.abs(d.pricing_adjustment_credits - (0.00005 - table)) < 1e-12, `pricing adjustment ${d.pricing_adjustment_credits} = 0.00005 - table ${table}`);
    const row = await settled(r.headers.get('x-gateway-request-id')!);
    assert.equal(row.charge, '0.000050000000', "the reservation is charged the provider's cost exactly");
    assert.equal(row.billing_source, 'provider_cost', 'the reservation records provider_cost as the billing source');
  });

  it('bills cache reads, cache writes and reasoning as spec 2.1 says', async () => {
    const r = await chat({ model: 'sim-reasoner', messages: user('think [sim tokens=4 cached=3 cache_write=2 reasoning=5]') });
    assert.equal(r.status, 200, `a reasoning request is answered: ${r.text.slice(0, 300)}`);
    const u = r.json.usage;
    assert.equal(u.completion_tokens, 9, 'completion tokens count the 4 answer and 5 reasoning tokens');
    assert.equal(u.completion_tokens_details.reasoning_tokens, 5, 'reasoning tokens are reported separately');
    const d = u.cost_details;
    assert.ok(Math.abs(d.cache_read_credits - 3 * 0.000001) < 1e-15, `cache read credits ${d.cache_read_credits}`);
    assert.ok(Math.abs(d.cache_write_credits - 2 * 0.000005) < 1e-15, `cache write credits ${d.cache_write_credits}`);
    assert.ok(Math.abs(d.input_credits - (u.prompt_tokens - 5) * 0.000004) < 1e-15, `input credits ${d.input_credits} for ${u.prompt_tokens - 5} uncached tokens`);
    assert.ok(Math.abs(d.output_credits - 9 * 0.000016) < 1e-15, `output credits ${d.output_credits}`);
  });

  it('streams chunks and sends usage once, in the finish chunk before [DONE], equal to non-streaming usage', async () => {
    const messages = user('same answer please [sim tokens=6]');
    const plain = await chat({ model: 'sim-gpt', messages });
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${acct.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sim-gpt', messages, stream: true }),
    });
    assert.equal(res.status, 200, 'a streamed request is answered 200');
    assert.match(res.headers.get('content-type')!, /text\/event-stream/, 'a streamed answer is an event stream');
    assert.equal(res.headers.get('x-gateway-cost'), null, 'a streamed answer has no cost header, the cost is not known yet');
    const id = res.headers.get('x-gateway-request-id')!;
    assert.ok(id, 'a streamed answer carries x-gateway-request-id');
    const events = await readStream(res);
    assert.equal(events.at(-1), '[DONE]', 'the stream ends with [DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
    const withUsage = chunks.filter((c) => c.usage);
    assert.equal(withUsage.length, 1, 'exactly one chunk carries usage');
    const last = chunks.at(-1);
    assert.equal(last, withUsage[0], 'the usage chunk is the last chunk');
    assert.ok(last.choices[0].finish_reason, `the last chunk has a finish reason: ${JSON.stringify(last)}`);
    assert.deepEqual(last.choices[0].delta, {}, 'the finish chunk has an empty delta');
    const text = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
    assert.equal(text, plain.json.choices[0].message.content, 'the streamed text equals the non-streamed answer');
    const strip = (u: Record<string, unknown>) => ({ ...u, balance: undefined });
    assert.deepEqual(strip(last.usage), strip(plain.json.usage), 'streamed usage equals non-streamed usage apart from the balance');
    const row = await settled(id);
    assert.equal(Number(row.charge), last.usage.cost, 'the settled charge equals the streamed usage cost');
  });

  it('answers without usage and bills the reservation estimate when the provider reports none', async () => {
    const r = await chat({ model: 'sim-gpt', max_tokens: 50, messages: user('quiet [sim no_usage]') });
    assert.equal(r.status, 200, `a request without provider usage is answered: ${r.text.slice(0, 300)}`);
    assert.equal(r.json.usage, undefined, 'the answer has no usage when the provider reported none');
    const id = r.headers.get('x-gateway-request-id')!;
    const row = await settled(id);
    assert.equal(row.billing_source, 'token_fallback', 'without usage the charge comes from the token price table');
    assert.equal(row.is_estimate, true, 'a charge without usage is an estimate');
    assert.equal(row.charge, row.held_credits, 'without usage the whole hold is charged');
    assert.equal(row.prompt_tokens, null, 'no prompt tokens are recorded when the provider reported none');
    const g = await call(base, `/v1/generation?id=${id}`, { key: acct.key });
    assert.equal(g.json.data.billing_source, 'token_fallback', 'the generation lookup shows the token_fallback billing source');
    assert.equal(g.json.data.is_estimate, true, 'the generation lookup shows the charge is an estimate');
  });

  it('settles a stream the client closed early from what was sent, with outcome cancelled and no usage chunk', async () => {
    const ctl = new AbortController();
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      signal: ctl.signal,
      headers: { authorization: `Bearer ${acct.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sim-gpt', stream: true, messages: user('long story [sim tokens=200 chunk_delay=20]') }),
    });
    const id = res.headers.get('x-gateway-request-id')!;
    const reader = res.body!.getReader();
    let got = '';
    while (got.split('\n\n').length < 6) got += new TextDecoder().decode((await reader.read()).value);
    assert.ok(!got.includes('"usage":{'), `no usage chunk before the stream ends: ${got}`);
    ctl.abort();
    const row = await settled(id);
    assert.equal(row.status, 'cancelled', 'a stream closed by the client settles as cancelled');
    assert.equal(row.outcome, 'cancelled', 'the recorded outcome is cancelled');
    assert.ok(Number(row.charge) > 0, 'sent tokens are billed');
    assert.ok(Number(row.charge) < Number(row.held_credits), `charge ${row.charge} below the hold ${row.held_credits}`);
    assert.ok(row.completion_tokens < 200, `the cancelled stream stopped early: ${row.completion_tokens} completion tokens`);
    const g = await call(base, `/v1/generation?id=${id}`, { key: acct.key });
    assert.equal(g.json.data.outcome, 'cancelled', 'the generation lookup shows the cancelled outcome');
    const inv = await checkInvariants(acct.accountId);
    assert.equal(inv.account.pending_requests, 0, 'no request is pending after the cancelled stream settled');
    assert.equal(Number(inv.account.total_usage), Number(row.charge), "the account's total usage is the cancelled stream's charge");
  });

  it('maps provider 5xx to 502 and returns the whole hold', async () => {
    const r = await chat({ model: 'sim-gpt', messages: user('[sim status=500]') });
    assert.equal(r.status, 502, 'a provider 500 is answered 502');
    assert.equal(r.json.error.code, 'provider_error', 'a provider 500 is reported as provider_error');
    const [row] = await env.db('reservations').where({ account_id: acct.accountId });
    const done = await settled(row.id);
    assert.equal(done.status, 'released', 'the reservation of a failed request is released');
    assert.equal(done.billing_source, 'not_billed', 'a failed request is not billed');
    assert.equal(done.charge, '0.000000000000', 'a failed request is charged nothing');
    const inv = await checkInvariants(acct.accountId);
    assert.equal(Number(inv.account.total_usage), 0, "the account's total usage stays zero after a provider error");
  });

  it('maps provider 429 to provider_rate_limited with retry-after and no deduction', async () => {
    const r = await chat({ model: 'sim-gpt', messages: user('[sim status=429]') });
    assert.equal(r.status, 429, 'a provider 429 is answered 429');
    assert.equal(r.json.error.code, 'provider_rate_limited', 'a provider 429 is reported as provider_rate_limited');
    assert.ok(r.headers.get('retry-after'), 'a provider 429 passes its retry-after on');
    const [row] = await env.db('reservations').where({ account_id: acct.accountId });
    assert.equal((await settled(row.id)).charge, '0.000000000000', 'a provider-rate-limited request is charged nothing');
  });

  it('answers 504 on a provider timeout and keeps the hold until the grace period ends', async () => {
    const r = await chat({ model: 'sim-gpt', messages: user('[sim latency=4000]') });
    assert.equal(r.status, 504, 'a provider timeout is answered 504');
    assert.equal(r.json.error.code, 'provider_timeout', 'a provider timeout is reported as provider_timeout');
    const [row] = await env.db('reservations').where({ account_id: acct.accountId });
    assert.equal(row.status, 'held', 'the provider may still be working');
    const done = await settled(row.id);
    assert.equal(done.status, 'released', "the timed-out request's hold is released after the grace period");
    assert.equal(done.http_status, 504, 'the released reservation records the 504');
  });

  it('never retries a request whose connection dropped, streaming or not', async () => {
    await call(env.simulator.url, '/_sim/stats', { method: 'DELETE' });
    const plain = await chat({ model: 'sim-gpt', messages: user('drop plain [sim drop_after=0]') });
    assert.equal(plain.status, 502, 'a dropped non-streaming request is answered 502');
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${acct.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sim-gpt', stream: true, messages: user('drop stream [sim drop_after=2 tokens=10]') }),
    });
    assert.equal(res.status, 200, 'a streamed request starts with 200 before the drop');
    const events = await readStream(res);
    assert.notEqual(events.at(-1), '[DONE]', 'a dropped stream does not end with [DONE]');
    assert.equal(JSON.parse(events.at(-1)!).error.code, 'provider_error', 'a dropped stream ends with a provider_error event');
    const s = await simStats();
    assert.equal(s.requests, 2, 'each request reached the provider exactly once');
    for (const row of await env.db('reservations').where({ account_id: acct.accountId })) {
      assert.equal((await settled(row.id)).billing_source, 'not_billed', 'a dropped request is not billed');
    }
  });

  it('switches upstream keys only when the provider rejected the key', async () => {
    await env.db('providers').where({ id: 'simulator' }).update({ api_keys: ['bad-upstream-key', 'sim-upstream-key'] });
    try {
      await call(env.simulator.url, '/_sim/stats', { method: 'DELETE' });
      await new Promise((r) => setTimeout(r, 100)); // the catalog reloads on NOTIFY
      const r = await chat({ model: 'sim-gpt', messages: user('failover [sim reject_keys=bad-upstream-key]') });
      assert.equal(r.status, 200, `the request is answered after switching keys: ${r.text.slice(0, 300)}`);
      const s = await simStats();
      assert.equal(s.by_key['bad-upstream-key'], 1, 'the rejected upstream key was tried once');
      assert.equal(s.by_key['sim-upstream-key'], 1, 'the next upstream key was tried once');
    } finally {
      await env.db('providers').where({ id: 'simulator' }).update({ api_keys: ['sim-upstream-key'] });
    }
  });

  it('marks the free-trial plan on free-trial models complimentary: zero credits, tokens recorded', async () => {
    const trial = await newAccount({ tier: 'free_trial', credits: '0' });
    const r = await chat({ model: 'sim-gpt-mini', messages: user('free [sim tokens=3]') }, trial.key);
    assert.equal(r.status, 200, `a free-trial request is answered: ${r.text.slice(0, 300)}`);
    assert.equal(r.json.usage.cost, 0, 'a complimentary request costs nothing');
    assert.equal(r.json.usage.cost_details.billing_source, 'complimentary', 'the answer is billed as complimentary');
    const row = await settled(r.headers.get('x-gateway-request-id')!);
    assert.equal(row.billing_source, 'complimentary', 'the reservation records complimentary as the billing source');
    assert.equal(row.completion_tokens, 3, 'the tokens of a complimentary request are still recorded');
    assert.equal(Number(row.charge), 0, 'a complimentary request is charged nothing');
  });

  describe('rejections deduct nothing', () => {
    const rejected = async (r: Awaited<ReturnType<typeof call>>, status: number, code: string, param?: string) => {
      assert.equal(r.status, status, JSON.stringify(r.json));
      assert.equal(r.json.error.code, code, 'the rejection carries the expected error code');
      assert.equal(typeof r.json.error.message, 'string', 'the rejection has an error message');
      assert.equal(typeof r.json.error.type, 'string', 'the rejection has an error type');
      if (param) assert.equal(r.json.error.param, param, 'the rejection names the offending parameter');
      assert.equal((await env.db('reservations').where({ account_id: acct.accountId })).length, 0, 'a rejected request holds nothing');
      const a = await env.db('accounts').where({ id: acct.accountId }).first();
      assert.equal(Number(a.total_usage), 0, 'a rejected request adds no usage');
    };

    it('unknown parameters, wrong types, missing fields and bad JSON get 400 naming the parameter', async () => {
      await rejected(await chat({ model: 'sim-gpt', messages: user('x'), frobnicate: 1 }), 400, 'unsupported_parameter', 'frobnicate');
      await rejected(await chat({ model: 'sim-gpt', messages: user('x'), temperature: 'hot' }), 400, 'invalid_parameter', 'temperature');
      await rejected(await chat({ messages: user('x') }), 400, 'missing_required_parameter', 'model');
      await rejected(await chat({ model: 'sim-gpt', messages: [{ role: 'wizard', content: 'x' }] }), 400, 'invalid_parameter', 'messages.0.role');
      await rejected(await call(base, '/v1/chat/completions', { key: acct.key, body: '{"model":' }), 400, 'invalid_json');
      await rejected(await call(base, '/v1/chat/completions', { key: acct.key, body: '[1,2]' }), 400, 'invalid_request');
      // (a limit above the model's is clamped, not refused: test/gateway/claude-code.test.ts)
      await rejected(await chat({ model: 'sim-gpt', messages: user('x'), max_tokens: 0 }), 400, 'invalid_parameter', 'max_tokens');
    });

    it('audio output needs an audio model and stream: true', async () => {
      await rejected(await chat({ model: 'sim-gpt', messages: user('x'), modalities: ['text', 'audio'], audio: { voice: 'a', format: 'mp3' } }), 400, 'unsupported_capability', 'modalities');
    });

    it('unknown, inactive, out-of-tier and wrong-endpoint models', async () => {
      await rejected(await chat({ model: 'no-such-model', messages: user('x') }), 403, 'model_not_found');
      const starter = await newAccount({ tier: 'starter' });
      const r = await chat({ model: 'sim-reasoner', messages: user('x') }, starter.key);
      assert.equal(r.status, 403, `a starter account asking for a higher-tier model is refused 403: ${r.text.slice(0, 300)}`);
      assert.equal(r.json.error.code, 'model_not_permitted', 'a model above the tier is model_not_permitted');
      const img = await chat({ model: 'sim-image-1', messages: user('x') });
      await rejected(img, 400, 'unsupported_capability');
      assert.match(img.json.error.message, /\/v1\/images/, 'the error points image models to /v1/images');
      await env.db('models').where({ id: 'sim-gpt-mini' }).update({ active: false });
      try {
        await new Promise((res) => setTimeout(res, 100));
        await rejected(await chat({ model: 'sim-gpt-mini', messages: user('x') }), 403, 'model_not_found');
      } finally {
        await env.db('models').where({ id: 'sim-gpt-mini' }).update({ active: true });
      }
    });

    it('a balance too small for the hold gets 402 insufficient_quota before anything is held', async () => {
      const poor = await newAccount({ credits: '0.00001' });
      const r = await chat({ model: 'sim-gpt', messages: user('x') }, poor.key);
      assert.equal(r.status, 402, `a balance below the hold is refused 402: ${r.text.slice(0, 300)}`);
      assert.equal(r.json.error.code, 'insufficient_quota', 'a balance below the hold is insufficient_quota');
      assert.equal((await env.db('reservations').where({ account_id: poor.accountId })).length, 0, 'a refused request creates no reservation');
      assert.equal((await env.db('ledger').where({ account_id: poor.accountId, kind: 'hold' })).length, 0, 'a refused request writes no hold to the ledger');
    });
  });

  describe('authentication', () => {
    it('accepts Bearer, x-api-key and api-key, and legacy rk_live_ keys', async () => {
      const variants: Array<Record<string, string>> = [{ authorization: `Bearer ${acct.key}` }, { 'x-api-key': acct.key }, { 'api-key': acct.key }];
      for (const headers of variants) {
        assert.equal((await call(base, '/v1/credits', { headers })).status, 200, `the key is accepted through ${Object.keys(headers)[0]}`);
      }
      const legacy = await createKey(env.db, { accountId: acct.accountId, format: 'rk_live' });
      assert.match(legacy.key, /^rk_live_/, 'a legacy key has the rk_live_ prefix');
      assert.equal((await chat({ model: 'sim-gpt', messages: user('legacy') }, legacy.key)).status, 200, 'a legacy rk_live_ key is accepted for chat');
    });

    it('a known path with another method is 405 in the envelope, with Allow', async () => {
      const r = await call(base, '/v1/credits', { key: acct.key, body: {} });
      assert.equal(r.status, 405, 'a POST to a GET-only path is answered 405');
      assert.equal(r.json.error.code, 'method_not_allowed', 'a wrong method is method_not_allowed');
      assert.match(r.headers.get('allow') ?? '', /GET/, 'the Allow header names GET');
    });

    it('rejects missing, unknown and malformed keys with 401', async () => {
      assert.equal((await call(base, '/v1/credits')).status, 401, 'a request without a key is refused 401');
      const unknown = await call(base, '/v1/credits', { key: 'gw_ai_' + 'x'.repeat(43) });
      assert.equal(unknown.status, 401, 'an unknown key is refused 401');
      assert.equal(unknown.json.error.type, 'authentication_error', 'an unknown key is an authentication_error');
      assert.equal((await call(base, '/v1/credits', { key: 'sk-something' })).status, 401, 'a key in a foreign format is refused 401');
    });

    it('an Authorization of another scheme is no key (missing_api_key), unless a key header comes with it', async () => {
      const basic = await call(base, '/v1/credits', { headers: { authorization: 'Basic Zm9vOmJhcg==' } });
      assert.deepEqual([basic.status, basic.json.error.code], [401, 'missing_api_key'], basic.text);
      const both = await call(base, '/v1/credits', { headers: { authorization: 'Basic Zm9vOmJhcg==', 'x-api-key': acct.key } });
      assert.equal(both.status, 200, both.text);
    });

    it('a revoked key is refused at once, even when it was cached', async () => {
      assert.equal((await call(base, '/v1/credits', { key: acct.key })).status, 200, 'the key answers before it is revoked');
      await revokeKey(env.db, acct.keyId);
      const deadline = Date.now() + 1000;
      let status = 200;
      while (status === 200 && Date.now() < deadline) status = (await call(base, '/v1/credits', { key: acct.key })).status;
      assert.equal(status, 401, 'a revoked key is refused 401 within a second');
      assert.equal((await chat({ model: 'sim-gpt', messages: user('x') })).status, 401, 'a revoked key is refused for chat');
    });

    it('a deactivated account gets 401', async () => {
      assert.equal((await call(base, '/v1/key', { key: acct.key })).status, 200, 'the key answers before the account is deactivated');
      await deactivateAccount(env.db, acct.accountId);
      await new Promise((r) => setTimeout(r, 100));
      const r = await call(base, '/v1/key', { key: acct.key });
      assert.equal(r.status, 401, "a deactivated account's key is refused 401");
    });

    it('an expired plan is refused on inference with 403 while credits and key still answer', async () => {
      const old = await newAccount({ planExpiresAt: '2020-01-01T00:00:00Z' });
      const r = await chat({ model: 'sim-gpt', messages: user('x') }, old.key);
      assert.equal(r.status, 403, `an expired plan is refused inference with 403: ${r.text.slice(0, 300)}`);
      assert.equal(r.json.error.code, 'plan_expired', 'an expired plan is reported as plan_expired');
      const c = await call(base, '/v1/credits', { key: old.key });
      assert.equal(c.status, 200, 'credits still answer on an expired plan');
      assert.equal(c.json.data.is_expired, true, 'the credits show the plan is expired');
      const k = await call(base, '/v1/key', { key: old.key });
      assert.equal(k.status, 200, 'the key still answers on an expired plan');
      assert.equal(k.json.data.limit_remaining, 0, 'an expired plan has no limit remaining');
    });
  });
});
