import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { listKeyRequests, updateKey } from '../../services/keys/keys';
import { ResponseCache } from '../../services/cache/responses';
import { env } from '../setup/env';
import { cli } from '../helpers/admin-cli';
import { call, checkInvariants, newAccount, settled, useStack, type Stack, type TestAccount } from '../helpers/stack';

// The opt-in response cache (issue 36 part 4) through the official SDKs over real HTTP: a miss
// stores, a hit answers the stored body (a stream replayed as a stream) through one hold charged at
// the model's cache-hit price (billing_source cache); per-key and per-request opt-in, no-store, TTL,
// the temperature rule, tenant isolation, size bounds, and no error or cut stream ever stored.

const simRequests = async (): Promise<number> => (await call(env.simulator.url, '/_sim/stats')).json.requests;
const cacheRows = async (accountId: string): Promise<number> => Number((await env.db('response_cache').where({ account_id: accountId }).count({ n: '*' }))[0].n);
const TTL = { headers: { 'x-gateway-cache': 'ttl=60' } };
const prompt = (extra = '') => `cache me ${randomUUID()} ${extra}`;

function clients(stack: Stack, acct: TestAccount) {
  return {
    openai: new OpenAI({ apiKey: acct.key, baseURL: `${stack.gateway.url}/v1`, maxRetries: 0 }),
    anthropic: new Anthropic({ apiKey: acct.key, baseURL: stack.gateway.url, maxRetries: 0 }),
  };
}

/** Polls GET /v1/generation until the request is settled. */
async function generation(stack: Stack, acct: TestAccount, id: string) {
  await settled(id);
  return (await call(stack.gateway.url, `/v1/generation?id=${id}`, { key: acct.key })).json.data;
}

async function assertBalanced(accountId: string) {
  let inv = await checkInvariants(accountId);
  // failed and cut requests settle through their reservation workflow after a short grace
  for (const end = Date.now() + 15_000; inv.account.pending_requests > 0 && Date.now() < end; inv = await checkInvariants(accountId)) await new Promise((r) => setTimeout(r, 100));
  assert.equal(Number(inv.account.reserved_credits), 0, 'no credits left held');
  assert.equal(inv.account.pending_requests, 0, 'no request left pending');
  assert.equal(Number(inv.ledger.usage), Number(inv.account.total_usage), 'the ledger gives the usage');
  assert.equal(Number(inv.reservations.charged), Number(inv.account.total_usage), 'the usage is the sum of the charges');
}

describe('response cache (issue 36 part 4)', function () {
  const stack = useStack();

  it('a miss then a hit: same body, header hit, charged the cache-hit price, billing_source cache', async () => {
    const acct = await newAccount({ credits: '10' });
    const { openai } = clients(stack, acct);
    const params = { model: 'sim-gpt', messages: [{ role: 'user' as const, content: prompt() }], max_tokens: 50 };
    const before = await simRequests();
    const first = await openai.chat.completions.create(params, TTL).withResponse();
    assert.equal(first.response.headers.get('x-gateway-cache'), 'miss', 'the first answer is stored');
    const second = await openai.chat.completions.create(params, TTL).withResponse();
    assert.equal(second.response.headers.get('x-gateway-cache'), 'hit', 'the second is answered from the cache');
    assert.equal(await simRequests(), before + 1, 'the provider was called once');
    assert.equal(second.data.id, first.data.id, 'the stored body');
    assert.deepEqual(second.data.choices, first.data.choices, 'the same answer');
    assert.equal(second.data.usage?.prompt_tokens, first.data.usage?.prompt_tokens, 'the stored usage');
    const cost = (u: unknown) => (u as { cost: number; cost_details: { billing_source: string } });
    assert.equal(cost(second.data.usage).cost, 0, 'a hit costs the default cache-hit price, 0');
    assert.equal(cost(second.data.usage).cost_details.billing_source, 'cache', 'the body says where the answer came from');
    assert.equal(second.response.headers.get('x-gateway-cost'), '0', 'the cost header');
    const hitId = second.response.headers.get('x-gateway-request-id')!;
    assert.notEqual(hitId, first.response.headers.get('x-gateway-request-id'), 'the hit is a request of its own');
    const g = await generation(stack, acct, hitId);
    assert.equal(g.billing_source, 'cache', `GET /v1/generation: ${JSON.stringify(g)}`);
    assert.equal(g.cost, 0, 'charged nothing');
    assert.equal(g.status, 'settled', 'one hold, settled');
    await settled(first.response.headers.get('x-gateway-request-id')!);
    await assertBalanced(acct.accountId);
    // the request log lists the hit with its billing source (GET /admin/keys/:id/requests)
    let logged = (await listKeyRequests(env.db, acct.keyId)).data.find((e) => e.id === hitId);
    for (const end = Date.now() + 5000; !logged && Date.now() < end; logged = (await listKeyRequests(env.db, acct.keyId)).data.find((e) => e.id === hitId)) await new Promise((r) => setTimeout(r, 100));
    assert.equal(logged?.billing_source, 'cache', `the request log entry: ${JSON.stringify(logged)}`);
    const ledger = await env.db('ledger').where({ reservation_id: hitId }).orderBy('id').select('kind', 'amount');
    assert.deepEqual(ledger.map((l) => l.kind), ['hold', 'release'], 'the hit: one hold, released (nothing to charge)');
  });

  it("charges the model's cache-hit price when the catalog sets one", async () => {
    await env.db('models').where({ id: 'sim-claude' }).update({ cache_hit_credits: '0.25' });
    try {
      const acct = await newAccount({ credits: '10' });
      const { anthropic } = clients(stack, acct);
      const params = { model: 'sim-claude', max_tokens: 40, messages: [{ role: 'user' as const, content: prompt() }] };
      const miss = await anthropic.messages.create(params, TTL).withResponse();
      const hit = await anthropic.messages.create(params, TTL).withResponse();
      assert.equal(hit.response.headers.get('x-gateway-cache'), 'hit', `after ${miss.response.headers.get('x-gateway-cache')}`);
      assert.deepEqual(hit.data, miss.data, 'the messages answer, stored');
      assert.equal(hit.response.headers.get('x-gateway-cost'), '0.25', 'the cache-hit price');
      const g = await generation(stack, acct, hit.response.headers.get('x-gateway-request-id')!);
      assert.equal(g.billing_source, 'cache', 'billed from the cache');
      assert.equal(g.cost, 0.25, 'charged the cache-hit price');
      await settled(miss.response.headers.get('x-gateway-request-id')!);
      await assertBalanced(acct.accountId);
    } finally {
      await env.db('models').where({ id: 'sim-claude' }).update({ cache_hit_credits: '0' });
    }
  });

  it('replays a stream as a stream, in the dialect of the client (chat, messages, responses)', async () => {
    const acct = await newAccount({ credits: '10' });
    const { openai, anthropic } = clients(stack, acct);
    const before = await simRequests();

    const chat = { model: 'sim-gpt', messages: [{ role: 'user' as const, content: prompt('[sim tokens=12]') }], max_tokens: 50, stream: true as const, stream_options: { include_usage: true } };
    const readChat = async () => {
      const { data, response } = await openai.chat.completions.create(chat, TTL).withResponse();
      let text = '';
      let usage: OpenAI.CompletionUsage | undefined;
      for await (const c of data) {
        text += c.choices[0]?.delta?.content ?? '';
        if (c.usage) usage = c.usage;
      }
      return { text, usage, header: response.headers.get('x-gateway-cache'), type: response.headers.get('content-type') };
    };
    const c1 = await readChat();
    const c2 = await readChat();
    assert.equal(c1.header, 'miss', 'the stream is stored');
    assert.equal(c2.header, 'hit', 'and replayed');
    assert.match(c2.type ?? '', /text\/event-stream/, 'as an event stream');
    assert.ok(c2.text.length > 0 && c2.text === c1.text, `the same text: ${c1.text} / ${c2.text}`);
    assert.equal(c2.usage?.completion_tokens, c1.usage?.completion_tokens, 'the same usage');
    assert.equal((c2.usage as unknown as { cost: number }).cost, 0, 'the replay shows its own charge');

    const msg = { model: 'sim-claude', max_tokens: 40, messages: [{ role: 'user' as const, content: prompt() }] };
    const readMessages = async () => {
      const s = anthropic.messages.stream(msg, TTL);
      const { response } = await s.withResponse();
      return { m: await s.finalMessage(), header: response.headers.get('x-gateway-cache') };
    };
    const m1 = await readMessages();
    const m2 = await readMessages();
    assert.equal(m2.header, 'hit', `messages stream replayed (first: ${m1.header})`);
    assert.deepEqual(m2.m, m1.m, 'the same message');

    const resp = { model: 'sim-gpt', input: prompt(), max_output_tokens: 40 };
    const readResponses = async () => {
      const { data, response } = await openai.responses.create({ ...resp, stream: true }, TTL).withResponse();
      let text = '';
      for await (const e of data) if (e.type === 'response.output_text.delta') text += e.delta;
      return { text, header: response.headers.get('x-gateway-cache') };
    };
    const r1 = await readResponses();
    const r2 = await readResponses();
    assert.equal(r2.header, 'hit', `responses stream replayed (first: ${r1.header})`);
    assert.equal(r2.text, r1.text, 'the same text');
    assert.equal(await simRequests(), before + 3, 'one provider call per dialect');
  });

  it('a streamed answer is not a non-streamed one: the two are stored apart', async () => {
    const acct = await newAccount({ credits: '10' });
    const { openai } = clients(stack, acct);
    const content = prompt();
    await openai.chat.completions.create({ model: 'sim-gpt', messages: [{ role: 'user', content }] }, TTL);
    const { response, data } = await openai.chat.completions.create({ model: 'sim-gpt', messages: [{ role: 'user', content }], stream: true }, TTL).withResponse();
    for await (const c of data) void c;
    assert.equal(response.headers.get('x-gateway-cache'), 'miss', 'a different request');
  });

  it('per-key opt-in caches temperature-0 requests; other temperatures only with the per-request opt-in', async () => {
    const acct = await newAccount({ credits: '10' });
    const view = await updateKey(env.db, acct.keyId, { cache_ttl: 60 });
    assert.equal(view.cache_ttl, 60, 'the key setting is shown');
    const { openai } = clients(stack, acct);
    const cold = { model: 'sim-gpt', messages: [{ role: 'user' as const, content: prompt() }], temperature: 0 };
    // the key change reaches the process by NOTIFY: the first request may still see the old key
    let a = await openai.chat.completions.create(cold).withResponse();
    for (let i = 0; i < 40 && a.response.headers.get('x-gateway-cache') !== 'miss'; i++) {
      await new Promise((r) => setTimeout(r, 50));
      a = await openai.chat.completions.create(cold).withResponse();
    }
    assert.equal(a.response.headers.get('x-gateway-cache'), 'miss', 'stored under the key setting');
    const b = await openai.chat.completions.create(cold).withResponse();
    assert.equal(b.response.headers.get('x-gateway-cache'), 'hit', 'answered from the cache without a header');
    assert.equal(b.data.id, a.data.id, 'the stored body');

    const warm = { model: 'sim-gpt', messages: [{ role: 'user' as const, content: prompt() }], temperature: 0.7 };
    const w1 = await openai.chat.completions.create(warm).withResponse();
    const w2 = await openai.chat.completions.create(warm).withResponse();
    assert.equal(w1.response.headers.get('x-gateway-cache'), null, 'temperature > 0: not cached by the key setting');
    assert.equal(w2.response.headers.get('x-gateway-cache'), null, 'nor read');
    const unset = { model: 'sim-gpt', messages: [{ role: 'user' as const, content: prompt() }] };
    const u = await openai.chat.completions.create(unset).withResponse();
    assert.equal(u.response.headers.get('x-gateway-cache'), null, "an absent temperature is the provider's default (above 0): not cached");
    const o1 = await openai.chat.completions.create(warm, TTL).withResponse();
    const o2 = await openai.chat.completions.create(warm, TTL).withResponse();
    assert.equal(o1.response.headers.get('x-gateway-cache'), 'miss', 'the per-request opt-in stores temperature > 0');
    assert.equal(o2.response.headers.get('x-gateway-cache'), 'hit', 'and reads it');

    const before = await simRequests();
    const n = await openai.chat.completions.create(cold, { headers: { 'x-gateway-cache': 'no-store' } }).withResponse();
    assert.equal(n.response.headers.get('x-gateway-cache'), null, 'no-store bypasses the cache');
    assert.equal(await simRequests(), before + 1, 'no-store reaches the provider');
    await updateKey(env.db, acct.keyId, { cache_ttl: null });
  });

  it('the operator CLI sets the key opt-in and the cache-hit price, and refuses bad values', async () => {
    const acct = await newAccount({ credits: '1' });
    const on = await cli('key', 'update', '--id', acct.keyId, '--cache-ttl', '120');
    assert.equal(on.code, 0, on.stderr);
    assert.equal(on.json.cache_ttl, 120, 'the key shows its cache TTL');
    const bad = await cli('key', 'update', '--id', acct.keyId, '--cache-ttl', '0');
    assert.notEqual(bad.code, 0, 'a TTL of 0 is refused');
    assert.match(bad.stdout + bad.stderr, /cache_ttl/, `the error names the setting: ${bad.stdout}${bad.stderr}`);
    const off = await cli('key', 'update', '--id', acct.keyId, '--cache-ttl', 'none');
    assert.equal(off.json.cache_ttl, null, 'none removes it');
    const model = await env.db('models').where({ id: 'sim-gpt-mini' }).first();
    const set = await cli('model', 'set', '--id', 'sim-gpt-mini', '--provider', model.provider_id, '--upstream', model.upstream_model, '--capabilities', model.capabilities.join(','), '--tiers', model.tiers.join(','), '--input', model.input_multiplier, '--output', model.output_multiplier, '--cache', model.cache_multiplier, '--cache-write', model.cache_creation_multiplier, '--cache-hit', '0.01');
    assert.equal(set.code, 0, set.stdout + set.stderr);
    assert.equal(Number((await env.db('models').where({ id: 'sim-gpt-mini' }).first()).cache_hit_credits), 0.01, 'the cache-hit price is set');
    const again = await cli('model', 'set', '--id', 'sim-gpt-mini', '--provider', model.provider_id, '--upstream', model.upstream_model, '--capabilities', model.capabilities.join(','), '--tiers', model.tiers.join(','), '--input', model.input_multiplier, '--output', model.output_multiplier, '--cache', model.cache_multiplier, '--cache-write', model.cache_creation_multiplier);
    assert.equal(again.code, 0, again.stdout + again.stderr);
    assert.equal(Number((await env.db('models').where({ id: 'sim-gpt-mini' }).first()).cache_hit_credits), 0.01, 'left out, the price is kept');
    await env.db('models').where({ id: 'sim-gpt-mini' }).update({ cache_hit_credits: '0' });
  });

  it('expires by TTL, and the periodic pass removes expired rows', async () => {
    const acct = await newAccount({ credits: '10' });
    const { openai } = clients(stack, acct);
    const params = { model: 'sim-gpt', messages: [{ role: 'user' as const, content: prompt() }] };
    const short = { headers: { 'x-gateway-cache': 'ttl=1' } };
    await openai.chat.completions.create(params, short);
    const hit = await openai.chat.completions.create(params, short).withResponse();
    assert.equal(hit.response.headers.get('x-gateway-cache'), 'hit', 'live within its TTL');
    await new Promise((r) => setTimeout(r, 1100));
    const before = await simRequests();
    const again = await openai.chat.completions.create(params, short).withResponse();
    assert.equal(again.response.headers.get('x-gateway-cache'), 'miss', 'expired: asked again and stored again');
    assert.equal(await simRequests(), before + 1, 'the provider answered');
    await new Promise((r) => setTimeout(r, 1100));
    const removed = await new ResponseCache(env.db, env.logger, { maxRows: 1000, maxBytes: 1e9 }).prune();
    assert.ok(removed >= 1, `the expired row went (${removed})`);
    assert.equal(await cacheRows(acct.accountId), 0, 'no row of the account left');
  });

  it('another account never hits (tenant isolation)', async () => {
    const a = await newAccount({ credits: '10' });
    const b = await newAccount({ credits: '10' });
    const params = { model: 'sim-gpt', messages: [{ role: 'user' as const, content: prompt() }] };
    await clients(stack, a).openai.chat.completions.create(params, TTL);
    const other = await clients(stack, b).openai.chat.completions.create(params, TTL).withResponse();
    assert.equal(other.response.headers.get('x-gateway-cache'), 'miss', "another account's request is a miss");
    assert.equal(await cacheRows(a.accountId), 1, 'one row per account');
    assert.equal(await cacheRows(b.accountId), 1, 'one row per account');
  });

  it('never stores an error or a stream cut short', async () => {
    const acct = await newAccount({ credits: '10' });
    const { openai } = clients(stack, acct);
    const failing = { model: 'sim-gpt', messages: [{ role: 'user' as const, content: prompt('[sim status=500]') }] };
    for (let i = 0; i < 2; i++) {
      await assert.rejects(openai.chat.completions.create(failing, TTL), (e: InstanceType<typeof OpenAI.APIError>) => e.status !== undefined && e.status >= 500, 'the provider error is answered');
    }
    const cut = { model: 'sim-gpt', messages: [{ role: 'user' as const, content: prompt('[sim drop_after=2 tokens=20]') }], stream: true as const };
    const s = await openai.chat.completions.create(cut, TTL);
    await assert.rejects(
      (async () => {
        for await (const c of s) void c;
      })(),
      'the cut stream ends in an error',
    );
    assert.equal(await cacheRows(acct.accountId), 0, 'nothing stored');
    const r = await call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, headers: { 'x-gateway-cache': 'ttl=forever' }, body: { model: 'sim-gpt', messages: [{ role: 'user', content: 'x' }] } });
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.error.param, 'x-gateway-cache', 'the bad header is named');
    await assertBalanced(acct.accountId);
  });

  it('counts hits, misses, tokens and credits in /metrics', async () => {
    const text = await (await fetch(`${stack.gateway.url}/metrics`)).text();
    assert.match(text, /gateway_cache_lookups_total\{model="sim-gpt",result="hit"\} [1-9]/, 'cache hits');
    assert.match(text, /gateway_cache_lookups_total\{model="sim-gpt",result="miss"\} [1-9]/, 'cache misses');
    assert.match(text, /gateway_tokens_total\{model="sim-gpt",provider="simulator",type="input"\} [1-9]/, 'input tokens');
    assert.match(text, /gateway_tokens_total\{model="sim-gpt",provider="simulator",type="output"\} [1-9]/, 'output tokens');
    assert.match(text, /gateway_credits_charged_total\{model="sim-gpt",provider="simulator"\} [0-9.e-]+/, 'credits charged');
    assert.match(text, /gateway_credits_charged_total\{model="sim-claude",provider="cache"\} 0\.25/, 'the cache-hit charge');
  });
});

describe('response cache bounds (issue 36 part 4)', function () {
  const stack = useStack({ responseCache: { maxRows: 2, maxBytes: 1_000_000 } });

  it('evicts the oldest answers past the byte bound, and never stores one above it', async () => {
    const acct = await newAccount({ credits: '1' });
    const cache = new ResponseCache(env.db, env.logger, { maxRows: 1000, maxBytes: 2500 });
    const answer = (n: number) => ({ body: JSON.stringify({ n, pad: 'x'.repeat(990) }), stream: false, usage: null });
    const hashes = [1, 2, 3].map((n) => Buffer.alloc(32, n));
    for (const [i, h] of hashes.entries()) {
      await cache.store(acct.accountId, h, 'sim-gpt', answer(i), 60);
      await new Promise((r) => setTimeout(r, 20));
    }
    await cache.evict();
    assert.equal(await cache.lookup(acct.accountId, hashes[0]), null, 'the oldest went: 3 × 1 KB is above 2,500 bytes');
    assert.ok(await cache.lookup(acct.accountId, hashes[1]), 'the second stays');
    assert.ok(await cache.lookup(acct.accountId, hashes[2]), 'the newest stays');
    await cache.store(acct.accountId, Buffer.alloc(32, 9), 'sim-gpt', { body: 'y'.repeat(3000), stream: false, usage: null }, 60);
    assert.equal(await cache.lookup(acct.accountId, Buffer.alloc(32, 9)), null, 'an answer above the byte bound is not stored');
    cache.close();
  });

  it('lookups arriving together share a statement, each with its own answer', async () => {
    const a = await newAccount({ credits: '1' });
    const b = await newAccount({ credits: '1' });
    const cache = new ResponseCache(env.db, env.logger, { maxRows: 1000, maxBytes: 1_000_000 });
    const stored = [1, 2, 3, 4, 5].map((n) => Buffer.alloc(32, 100 + n));
    for (const [i, h] of stored.entries()) await cache.store(a.accountId, h, 'sim-gpt', { body: `{"n":${i}}`, stream: i % 2 === 1, usage: null }, 60);
    const asked = Array.from({ length: 40 }, (_, i) => ({ account: i % 3 === 0 ? b.accountId : a.accountId, hash: i % 4 === 0 ? Buffer.alloc(32, 7) : stored[i % 5], i }));
    const got = await Promise.all(asked.map((q) => cache.lookup(q.account, q.hash)));
    asked.forEach((q, k) => {
      const expected = q.account === a.accountId && q.i % 4 !== 0 ? `{"n":${q.i % 5}}` : null;
      assert.equal(got[k]?.body ?? null, expected, `lookup ${q.i}: its own answer, or none (another account, or not stored)`);
      if (expected) assert.equal(got[k]!.stream, (q.i % 5) % 2 === 1, `lookup ${q.i}: its stream flag`);
    });
    cache.close();
  });

  it('stores arriving together are written together; a key stored twice among them keeps the last answer', async () => {
    const a = await newAccount({ credits: '1' });
    const b = await newAccount({ credits: '1' });
    const cache = new ResponseCache(env.db, env.logger, { maxRows: 1000, maxBytes: 1_000_000 });
    const twice = Buffer.alloc(32, 9);
    const stores = Array.from({ length: 30 }, (_, i) => ({ account: i % 2 ? b.accountId : a.accountId, hash: i % 10 === 0 ? twice : Buffer.alloc(32, 20 + i), body: `{"i":${i}}` }));
    await Promise.all(stores.map((s) => cache.store(s.account, s.hash, 'sim-gpt', { body: s.body, stream: false, usage: null }, 60)));
    for (const [i, s] of stores.entries()) {
      const last = [...stores].reverse().find((o) => o.account === s.account && o.hash.equals(s.hash))!;
      assert.equal((await cache.lookup(s.account, s.hash))?.body, last.body, `store ${i}: its account's last answer for its key`);
    }
    cache.close();
  });

  it('evicts the oldest answers past the row bound', async () => {
    const acct = await newAccount({ credits: '10' });
    const { openai } = clients(stack, acct);
    const ask = (content: string) => openai.chat.completions.create({ model: 'sim-gpt', messages: [{ role: 'user', content }] }, TTL).withResponse();
    const [p1, p2, p3] = [prompt(), prompt(), prompt()];
    for (const p of [p1, p2, p3]) {
      await ask(p);
      await new Promise((r) => setTimeout(r, 100)); // stored after the answer: each its own created_at
    }
    // evicted within a second of the last store
    let rows = await cacheRows(acct.accountId);
    for (const end = Date.now() + 5000; rows > 2 && Date.now() < end; rows = await cacheRows(acct.accountId)) await new Promise((r) => setTimeout(r, 100));
    assert.equal(rows, 2, 'two rows kept');
    assert.equal((await ask(p3)).response.headers.get('x-gateway-cache'), 'hit', 'the newest stays');
    assert.equal((await ask(p1)).response.headers.get('x-gateway-cache'), 'miss', 'the oldest was evicted');
  });
});
