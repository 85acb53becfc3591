import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import Decimal from 'decimal.js';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { setModel, setProvider } from '../../services/catalog/entries';
import { setRoute } from '../../services/catalog/routes';
import { startSimulator, type SimulatorHandle } from '../../simulator/server';
import { env } from '../setup/env';
import { call, newAccount, settled, useStack } from '../helpers/stack';
import { cli } from '../helpers/admin-cli';

// Client-chosen routing and retries (issue 36 parts 2 and 3), through the official SDKs over real
// HTTP, on a simulator of this suite's own: an upstream model name given a failing status there is
// a failing route; three provider ids point at it, so `provider` preferences have routes to choose.

const ADMIN_TOKEN = 'issue-36-routing-admin';
const admin = (p: string, body?: unknown, method?: string) => call(stack.gateway.url, p, { body, method, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
const CHEAP = { input: '0.000001', output: '0.000002', cache: '0', 'cache-write': '0' };
const DEAR = { input: '0.00001', output: '0.00003', cache: '0', 'cache-write': '0' };
const uid = () => randomUUID().slice(0, 8);
type Attempt = { model: string; provider: string; upstream_model: string; result: string; http_status?: number | null; retry?: number; error?: string | null };
let stack: ReturnType<typeof useStack>;

describe('issue 36 parts 2 and 3: models, provider preferences, retries, key cool-downs', function () {
  this.timeout(120_000);
  stack = useStack({ adminToken: ADMIN_TOKEN, routing: { retryBudgetMs: 3000, keyCooldownMs: 60_000 } });
  let sim: SimulatorHandle;
  const [pa, pb, pc] = ['a', 'b', 'c'].map((x) => `cr-${x}-${uid()}`);

  before(async () => {
    sim = await startSimulator({ port: 0 });
    for (const id of [pa, pb, pc]) await setProvider(env.db, { id, kind: 'openai', 'base-url': sim.url, 'api-keys': 'k' });
  });
  after(async () => {
    await sim.close();
  });

  /** A model whose routes are the given [provider, upstream] pairs in priority order. */
  async function routedModel(prices: typeof CHEAP, ...routes: Array<[string, string]>): Promise<string> {
    const id = `cr-${uid()}`;
    await setModel(env.db, { id, provider: routes[0][0], upstream: routes[0][1], capabilities: 'text', tiers: 'pro', ...prices });
    for (const [i, [p, u]] of routes.entries()) await setRoute(env.db, { model: id, provider: p, upstream: u, priority: i });
    return id;
  }
  const behave = async (upstream: string, controls: Record<string, unknown>) => assert.equal((await call(sim.url, '/_sim/behaviour', { body: { model: upstream, ...controls } })).status, 200, 'simulator control set');
  const callsTo = async (upstream: string): Promise<number> => (await call(sim.url, '/_sim/stats')).json.by_model[upstream] ?? 0;
  const openai = (key: string) => new OpenAI({ apiKey: key, baseURL: `${stack.gateway.url}/v1`, maxRetries: 0 });
  /** A chat completion with routing fields (not in the SDK's types: sent in the body as they are). */
  const chat = (key: string, model: string, extra: Record<string, unknown> = {}, text = 'route me [sim tokens=5]') =>
    openai(key).chat.completions.create({ model, messages: [{ role: 'user', content: text }], ...extra } as OpenAI.ChatCompletionCreateParamsNonStreaming).withResponse();
  const raw = (key: string, body: Record<string, unknown>) => call(stack.gateway.url, '/v1/chat/completions', { key, body: { messages: [{ role: 'user', content: 'raw [sim tokens=3]' }], ...body } });
  const generation = async (key: string, id: string) => (await call(stack.gateway.url, `/v1/generation?id=${id}`, { key })).json.data;
  /** The attempts the settled request lists (the route is recorded with its outcome). */
  const attempts = async (key: string, id: string): Promise<Attempt[]> => {
    await settled(id);
    return (await generation(key, id)).route.attempts;
  };

  /** The request's ledger: one hold, one release, and one charge of exactly tokens × the given prices. */
  async function chargedOnce(requestId: string, usage: { prompt_tokens: number; completion_tokens: number }, prices: typeof CHEAP) {
    const row = await settled(requestId);
    const expected = new Decimal(usage.prompt_tokens).mul(prices.input).plus(new Decimal(usage.completion_tokens).mul(prices.output));
    assert.equal(new Decimal(row.charge).toString(), expected.toString(), 'charged at the answering model price');
    const ledger = await env.db('ledger').where({ reservation_id: requestId }).select('kind');
    assert.deepEqual(ledger.map((l) => l.kind).sort(), ['charge', 'hold', 'release'], 'one hold, one release, one charge');
    return { row, expected };
  }

  it('models: the first model failing, the fallback answers, names itself, and is charged at its own price within a hold sized for the dearer', async () => {
    const acct = await newAccount();
    const bad = `bad-${uid()}`;
    await behave(bad, { status: 503 });
    const primary = await routedModel(CHEAP, [pa, bad]);
    const fallback = await routedModel(DEAR, [pb, `ok-${uid()}`]);
    const { data, response } = await chat(acct.key, primary, { models: [fallback], max_tokens: 50 });
    assert.equal(data.model, fallback, 'the answer names the model that answered');
    const id = response.headers.get('x-gateway-request-id')!;
    const { row, expected } = await chargedOnce(id, data.usage!, DEAR);
    assert.equal(response.headers.get('x-gateway-cost'), expected.toString(), 'the answer shows the charge settlement wrote');
    // Held for the dearer (fallback) model: its output price × max_tokens is part of the hold.
    assert.ok(new Decimal(row.held_credits).gte(new Decimal(50).mul(DEAR.output)), `hold ${row.held_credits} covers the dear model`);
    const tried = await attempts(acct.key, id);
    assert.deepEqual(tried.map((a) => [a.model, a.provider, a.result]), [[primary, pa, 'failed'], [fallback, pb, 'ok']], 'every attempt is listed with its model');
    assert.equal((await generation(acct.key, id)).route.model, fallback, 'the generation names the answering model');
  });

  it('models on /v1/messages (Anthropic SDK) and /v1/responses: the fallback answers and is named', async () => {
    const acct = await newAccount();
    const bad = `bad-${uid()}`;
    await behave(bad, { status: 500 });
    const primary = await routedModel(CHEAP, [pa, bad]);
    const fallback = await routedModel(CHEAP, [pb, `ok-${uid()}`]);
    const anthropic = new Anthropic({ apiKey: acct.key, baseURL: stack.gateway.url, maxRetries: 0 });
    const msg = await anthropic.messages.create({ model: primary, max_tokens: 20, messages: [{ role: 'user', content: 'hi [sim tokens=3]' }], models: [fallback] } as Anthropic.MessageCreateParamsNonStreaming);
    assert.equal(msg.model, fallback, 'messages: the fallback model answered');
    const resp = await openai(acct.key).responses.create({ model: primary, input: 'hi [sim tokens=3]', models: [fallback] } as OpenAI.Responses.ResponseCreateParamsNonStreaming);
    assert.equal(resp.model, fallback, 'responses: the fallback model answered');
  });

  it('every candidate failing: an error, the hold released in full, nothing charged', async () => {
    const acct = await newAccount();
    const [b1, b2] = [`bad-${uid()}`, `bad-${uid()}`];
    await behave(b1, { status: 503 });
    await behave(b2, { status: 502 });
    const m1 = await routedModel(CHEAP, [pa, b1]);
    const m2 = await routedModel(DEAR, [pb, b2]);
    const r = await raw(acct.key, { model: m1, models: [m2] });
    assert.ok(r.status >= 500, `every candidate failed: ${r.text}`);
    const id = r.headers.get('x-request-id')!;
    const row = await settled(id);
    assert.equal(row.status, 'released', 'the hold is released');
    assert.equal(new Decimal(row.charge ?? 0).toString(), '0', 'nothing charged');
    const ledger = await env.db('ledger').where({ reservation_id: id }).select('kind', 'amount');
    assert.deepEqual(ledger.map((l) => l.kind).sort(), ['hold', 'release'], 'one hold and its release');
    const balance = await env.db('accounts').where({ id: acct.accountId }).first();
    assert.equal(new Decimal(balance.total_usage).toString(), '0', 'the balance is whole again');
    assert.equal(new Decimal(balance.reserved_credits).toString(), '0', 'nothing stays reserved');
    assert.deepEqual((await attempts(acct.key, id)).map((a) => a.model), [m1, m2], 'both models were tried');
  });

  it('provider: only, ignore, order, allow_fallbacks false, each choosing the routes', async () => {
    const acct = await newAccount();
    const [ua, ub, uc] = [`a-${uid()}`, `b-${uid()}`, `c-${uid()}`];
    const model = await routedModel(CHEAP, [pa, ua], [pb, ub], [pc, uc]);
    const used = async (provider: Record<string, unknown>) => {
      const { response } = await chat(acct.key, model, { provider });
      return (await attempts(acct.key, response.headers.get('x-gateway-request-id')!)).map((a) => a.provider);
    };
    assert.deepEqual(await used({ only: [pb] }), [pb], 'only');
    assert.deepEqual(await used({ ignore: [pa] }), [pb], 'ignore: the next route in catalog order');
    assert.deepEqual(await used({ order: [pc, pb] }), [pc], 'order: its first provider first');
    // order with fallbacks allowed: a failing ordered provider moves on to the next one, then the rest
    await behave(uc, { status: 503 });
    assert.deepEqual(await used({ order: [pc] }), [pc, pa], 'order then the other routes');
    // allow_fallbacks false: the ordered providers only; nothing else is called
    const before = await callsTo(ua);
    const strict = await raw(acct.key, { model, provider: { order: [pc], allow_fallbacks: false } });
    assert.ok(strict.status >= 500, `no route outside order: ${strict.text}`);
    assert.equal(await callsTo(ua), before, 'the route outside provider.order was not called');
  });

  it('provider.sort: price orders the candidates by the catalog price, latency by the measured latency', async () => {
    const acct = await newAccount();
    const dear = await routedModel(DEAR, [pa, `d-${uid()}`]);
    const cheap = await routedModel(CHEAP, [pb, `c-${uid()}`]);
    const { data } = await chat(acct.key, dear, { models: [cheap], provider: { sort: 'price' } });
    assert.equal(data.model, cheap, 'the cheaper candidate answers first');
    const { data: plain } = await chat(acct.key, dear, { models: [cheap] });
    assert.equal(plain.model, dear, 'without sort: the models order');
    // latency: the slow route measured slow, the quick one quick, then sort picks the quick one
    const [slow, quick] = [`slow-${uid()}`, `quick-${uid()}`];
    await behave(slow, { latency: 300 });
    const model = await routedModel(CHEAP, [pa, slow], [pb, quick]);
    await chat(acct.key, model, { provider: { only: [pa] } });
    await chat(acct.key, model, { provider: { only: [pb] } });
    const { response } = await chat(acct.key, model, { provider: { sort: 'latency' } });
    assert.deepEqual((await attempts(acct.key, response.headers.get('x-gateway-request-id')!)).map((a) => a.upstream_model), [quick], 'the quicker route first');
    const health = await admin('/admin/upstream-health');
    const routes = new Map(health.json.routes.map((r: { route: string; latency_ms: number }) => [r.route, r.latency_ms]));
    assert.ok(Number(routes.get(`${pa}/${slow}`)) >= 300, `slow route measured: ${JSON.stringify(health.json.routes)}`);
    const { response: t } = await chat(acct.key, model, { provider: { sort: 'throughput' } });
    assert.equal(t.status, 200, 'throughput sort answers');
  });

  it('unknown or contradictory preferences answer 400 naming the field; preferences leaving no route answer 400 no_route with each reason', async () => {
    const acct = await newAccount();
    const model = await routedModel(CHEAP, [pa, `a-${uid()}`], [pb, `b-${uid()}`]);
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ provider: { colour: 'red' } }, 'provider'],
      [{ provider: { sort: 'cheapest' } }, 'provider.sort'],
      [{ provider: { only: [pa], ignore: [pa] } }, 'provider.ignore'],
      [{ provider: { order: [pb], ignore: [pb] } }, 'provider.order'],
      [{ provider: { order: [pc], only: [pa] } }, 'provider.order'],
      [{ provider: { only: ['no-such-provider'] } }, 'provider.only[0]'],
      [{ models: ['no-such-model'] }, 'models[0]'],
    ];
    for (const [extra, param] of cases) {
      const r = await raw(acct.key, { model, ...extra });
      assert.ok(r.status === 400 || r.status === 403, `${JSON.stringify(extra)}: ${r.text}`);
      assert.ok(String(r.json.error.param).startsWith(param), `${JSON.stringify(extra)} names ${param}: ${r.text}`);
    }
    // one hold is complimentary or billed: a free-trial plan's free model cannot fall back to a billed one
    const trial = await newAccount({ tier: 'free_trial' });
    const free = `cr-free-${uid()}`;
    await setModel(env.db, { id: free, provider: pa, upstream: `f-${uid()}`, capabilities: 'text', tiers: 'pro,free_trial', 'free-trial': 'true', ...CHEAP });
    const billed = `cr-billed-${uid()}`;
    await setModel(env.db, { id: billed, provider: pa, upstream: `g-${uid()}`, capabilities: 'text', tiers: 'pro,free_trial', ...CHEAP });
    await new Promise((r) => setTimeout(r, 200));
    const mixed = await raw(trial.key, { model: free, models: [billed] });
    assert.equal(mixed.status, 400, mixed.text);
    assert.equal(mixed.json.error.param, 'models[0]', 'names the fallback billed otherwise');
    const none = await raw(acct.key, { model, provider: { only: [pc] } });
    assert.equal(none.status, 400, none.text);
    assert.equal(none.json.error.code, 'no_route', 'no_route');
    assert.match(none.json.error.message, new RegExp(`via ${pa} .*not in provider.only.*via ${pb} .*not in provider.only`), 'each route with its reason');
    const held = await env.db('reservations').join('api_keys', 'api_keys.id', 'reservations.key_id').where('reservations.account_id', acct.accountId).count({ n: '*' });
    assert.equal(Number(held[0].n), 0, 'refused before any hold');
  });

  it('retries: set by CLI and admin API (validated); a route failing twice answers on its third attempt, each attempt listed', async () => {
    const acct = await newAccount();
    const [flaky, other] = [`flaky-${uid()}`, `other-${uid()}`];
    const model = await routedModel(CHEAP, [pa, flaky], [pb, other]);
    const bad = await admin(`/admin/models/${model}/routes`, { provider: pa, upstream: flaky, retries: 2, retry_on: ['503', 'teapot'] }, 'PUT');
    assert.equal(bad.status, 400, `invalid retry_on refused: ${bad.text}`);
    assert.equal((await admin(`/admin/models/${model}/routes`, { provider: pa, upstream: flaky, retries: 11 }, 'PUT')).status, 400, 'retries above 10 refused');
    const viaCli = await cli('route', 'set', '--model', model, '--provider', pa, '--upstream', flaky, '--retries', '2', '--retry_backoff_ms', '50', '--retry_on', '503,connect');
    assert.equal(viaCli.code, 0, viaCli.stdout);
    const listed = (await admin(`/admin/models/${model}/routes`)).json.routes.find((r: { upstream_model: string }) => r.upstream_model === flaky);
    assert.deepEqual([listed.retries, listed.retry_backoff_ms, listed.retry_on], [2, 50, ['503', 'connect']], 'the route keeps its retry settings');
    await new Promise((r) => setTimeout(r, 200)); // the catalog reloads on NOTIFY
    await behave(flaky, { status: 503, status_times: 2 });
    const { data, response } = await chat(acct.key, model);
    assert.equal(data.model, model, 'answered');
    assert.equal(await callsTo(flaky), 3, 'two retries on the same route');
    assert.equal(await callsTo(other), 0, 'the next route was not needed');
    const tried = await attempts(acct.key, response.headers.get('x-gateway-request-id')!);
    assert.deepEqual(tried.map((a) => [a.result, a.http_status, a.retry ?? 0]), [['failed', 503, 0], ['failed', 503, 1], ['ok', 200, 2]], 'each attempt visible');
    await chargedOnce(response.headers.get('x-gateway-request-id')!, data.usage!, CHEAP);
    const metrics = await (await fetch(`${stack.gateway.url}/metrics`)).text();
    assert.match(metrics, new RegExp(`gateway_route_retries_total\\{model="${model}",provider="${pa}",reason="http_503"\\} 2`), 'retries counted by reason');
  });

  it('Retry-After: honoured within the request budget, a longer one moves on instead', async () => {
    const acct = await newAccount();
    const [limited, slowLimited, other] = [`lim-${uid()}`, `lim2-${uid()}`, `other-${uid()}`];
    const model = await routedModel(CHEAP, [pa, limited], [pb, other]);
    await setRoute(env.db, { model, provider: pa, upstream: limited, priority: 0, retries: 1, retry_backoff_ms: 10 });
    await new Promise((r) => setTimeout(r, 200));
    await behave(limited, { status: 429, status_times: 1, retry_after: 1 });
    const t0 = Date.now();
    const { response } = await chat(acct.key, model);
    assert.ok(Date.now() - t0 >= 950, 'waited the Retry-After second');
    assert.deepEqual((await attempts(acct.key, response.headers.get('x-gateway-request-id')!)).map((a) => [a.upstream_model, a.result]), [[limited, 'failed'], [limited, 'ok']], 'retried on the same route');
    // 30 s asked, 3 s of budget: no wait, the next route answers
    const model2 = await routedModel(CHEAP, [pa, slowLimited], [pb, other]);
    await setRoute(env.db, { model: model2, provider: pa, upstream: slowLimited, priority: 0, retries: 3 });
    await new Promise((r) => setTimeout(r, 200));
    await behave(slowLimited, { status: 429, retry_after: 30 });
    const t1 = Date.now();
    const { response: r2 } = await chat(acct.key, model2);
    assert.ok(Date.now() - t1 < 2500, 'did not wait beyond the budget');
    const tried = await attempts(acct.key, r2.headers.get('x-gateway-request-id')!);
    assert.deepEqual(tried.map((a) => [a.upstream_model, a.result]), [[slowLimited, 'failed'], [slowLimited, 'skipped'], [other, 'ok']], 'the budget note, then the next route');
    assert.match(tried[1].error ?? '', /retry budget/, 'the reason is the budget');
  });

  it('never retried after the first streamed byte', async () => {
    const acct = await newAccount();
    const dropping = `drop-${uid()}`;
    const model = await routedModel(CHEAP, [pa, dropping], [pb, `other-${uid()}`]);
    await setRoute(env.db, { model, provider: pa, upstream: dropping, priority: 0, retries: 3, retry_backoff_ms: 10, retry_on: 'connect,500,502,503,504,429' });
    await new Promise((r) => setTimeout(r, 200));
    const r = await call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model, stream: true, messages: [{ role: 'user', content: 'break [sim tokens=10 drop_after=3]' }] } });
    assert.equal(r.status, 200, 'the stream began');
    assert.match(r.text, /provider_error/, 'the break is reported in the stream');
    assert.equal(await callsTo(dropping), 1, 'not retried');
    const row = await settled(r.headers.get('x-gateway-request-id')!);
    assert.equal(new Decimal(row.charge).toString(), '0', 'a broken stream is not billed');
  });

  it('money under concurrency: 24 requests at once over retries and fallback models, each held once and charged once at its answering model price', async () => {
    const acct = await newAccount({ credits: '10' });
    const [flaky, down] = [`flaky-${uid()}`, `down-${uid()}`];
    await behave(down, { status: 503 });
    await behave(flaky, { status: 502, status_times: 6 });
    const primary = await routedModel(CHEAP, [pa, down]);
    const fallback = await routedModel(DEAR, [pb, flaky], [pc, `ok-${uid()}`]);
    await setRoute(env.db, { model: fallback, provider: pb, upstream: flaky, priority: 0, retries: 1, retry_backoff_ms: 20 });
    await new Promise((r) => setTimeout(r, 200));
    const answers = await Promise.all(Array.from({ length: 24 }, () => chat(acct.key, primary, { models: [fallback] }, 'busy [sim tokens=4]')));
    let total = new Decimal(0);
    for (const { data, response } of answers) {
      assert.equal(data.model, fallback, 'the fallback model answered');
      const { expected } = await chargedOnce(response.headers.get('x-gateway-request-id')!, data.usage!, DEAR);
      total = total.plus(expected);
    }
    const account = await env.db('accounts').where({ id: acct.accountId }).first();
    assert.equal(new Decimal(account.total_usage).toString(), total.toString(), 'usage is the sum of the charges');
    assert.equal(new Decimal(account.reserved_credits).toString(), '0', 'no hold left');
    const ledger = await env.db('ledger').where({ account_id: acct.accountId }).select('kind', 'amount');
    const sum = (k: string) => ledger.filter((l) => l.kind === k).reduce((s, l) => s.plus(l.amount), new Decimal(0));
    assert.equal(sum('hold').minus(sum('release')).plus(sum('charge')).toString(), total.toString(), 'the balance is derivable from the ledger');
  });

  it('a provider key rejected with 401 cools down: skipped by the next requests, shown in the admin API and /metrics', async () => {
    const acct = await newAccount();
    const pk = `cr-keys-${uid()}`;
    await setProvider(env.db, { id: pk, kind: 'openai', 'base-url': sim.url, 'api-keys': 'rejected-key-1234,good-key-5678' });
    const upstream = `keys-${uid()}`;
    await behave(upstream, { reject_keys: ['rejected-key-1234'] });
    const model = await routedModel(CHEAP, [pk, upstream]);
    await new Promise((r) => setTimeout(r, 200));
    const byKey = async () => (await call(sim.url, '/_sim/stats')).json.by_key as Record<string, number>;
    const before = await byKey();
    for (let i = 0; i < 3; i++) await chat(acct.key, model);
    const after = await byKey();
    assert.equal((after['rejected-key-1234'] ?? 0) - (before['rejected-key-1234'] ?? 0), 1, 'the rejected key was tried once, then skipped');
    assert.equal((after['good-key-5678'] ?? 0) - (before['good-key-5678'] ?? 0), 3, 'the good key answered every request');
    const health = await admin('/admin/upstream-health');
    const cooled = health.json.cooled_keys.find((c: { provider: string }) => c.provider === pk);
    assert.ok(cooled, `listed: ${health.text}`);
    assert.equal(cooled.key, '…1234', 'a fingerprint, never the key');
    assert.equal(cooled.status, 401, 'why');
    assert.ok(Date.parse(cooled.until) > Date.now() + 50_000, 'until when');
    const metrics = await (await fetch(`${stack.gateway.url}/metrics`)).text();
    assert.match(metrics, new RegExp(`gateway_upstream_keys_cooling\\{provider="${pk}"\\} 1`), 'cooling keys gauge');
    assert.match(metrics, new RegExp(`gateway_upstream_key_cooldowns_total\\{provider="${pk}"\\} 1`), 'cool-downs counted');
  });
});
