import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import Decimal from 'decimal.js';
import OpenAI from 'openai';
import { setModel, setProvider } from '../../services/catalog/entries';
import { setRoute } from '../../services/catalog/routes';
import { startSimulator, type SimulatorHandle } from '../../simulator/server';
import { env } from '../setup/env';
import { call, newAccount, settled, useStack } from '../helpers/stack';
import { cli, oneObject } from '../helpers/admin-cli';

// Routing with fallback and per-route circuit breaking (issue 23, feature 1), over a simulator of
// this suite's own: an upstream model name given a failing status there is a failing route.

const ADMIN_TOKEN = 'issue-23-routing-admin';
const admin = (base: string, p: string, body?: unknown, method?: string) => call(base, p, { body, method, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
const PRICES = { input: '0.000001', output: '0.000002', cache: '0', 'cache-write': '0' };
const uid = () => randomUUID().slice(0, 8);

describe('issue 23 feature 1: routes, fallback and circuit breaking', function () {
  this.timeout(90_000);
  // Two consecutive failures open a route's circuit for 1.5 s.
  const stack = useStack({ adminToken: ADMIN_TOKEN, routeBreaker: { failures: 2, windowMs: 60_000, cooldownMs: 1500 } });
  let sim: SimulatorHandle;
  const provider = `route-sim-${uid()}`;
  // Refuses connections: nothing listens on port 1.
  const down = `route-down-${uid()}`;

  before(async () => {
    sim = await startSimulator({ port: 0 });
    await setProvider(env.db, { id: provider, kind: 'openai', 'base-url': sim.url, 'api-keys': 'k' });
    await setProvider(env.db, { id: down, kind: 'openai', 'base-url': 'http://127.0.0.1:1/', 'api-keys': 'k' });
  });
  after(async () => {
    await sim.close();
  });

  /** A model whose routes are the given [provider, upstream] pairs in priority order. */
  async function routedModel(...routes: Array<[string, string]>): Promise<string> {
    const id = `routed-${uid()}`;
    await setModel(env.db, { id, provider: routes[0][0], upstream: routes[0][1], capabilities: 'text', tiers: 'pro', ...PRICES });
    for (const [i, [p, u]] of routes.entries()) await setRoute(env.db, { model: id, provider: p, upstream: u, priority: i });
    return id;
  }
  const failing = async (upstream: string, status: number | null) => (await call(sim.url, '/_sim/behaviour', { body: { model: upstream, status } })).status;
  /** A new account, and a model whose first route answers `status` and whose second works. */
  async function failingThenGood(name: string, status: number) {
    const acct = await newAccount();
    const bad = `${name}-${uid()}`;
    const good = `ok-${uid()}`;
    assert.equal(await failing(bad, status), 200, 'the simulator takes the failing behaviour');
    return { acct, bad, good, model: await routedModel([provider, bad], [provider, good]) };
  }
  const callsTo = async (upstream: string): Promise<number> => (await call(sim.url, '/_sim/stats')).json.by_model[upstream] ?? 0;
  const chat = (key: string, model: string, extra: Record<string, unknown> = {}) =>
    call(stack.gateway.url, '/v1/chat/completions', { key, body: { model, messages: [{ role: 'user', content: 'route me please [sim tokens=5]' }], ...extra } });
  const generation = async (key: string, id: string) => (await call(stack.gateway.url, `/v1/generation?id=${id}`, { key })).json.data;

  /** One hold, one release and at most one charge for the request, the charge being tokens × prices exactly. */
  async function chargedOnce(accountId: string, requestId: string, usage: { prompt_tokens: number; completion_tokens: number }) {
    const row = await settled(requestId);
    const expected = new Decimal(usage.prompt_tokens).mul(PRICES.input).plus(new Decimal(usage.completion_tokens).mul(PRICES.output));
    assert.equal(new Decimal(row.charge).toString(), expected.toString(), 'the charge is the tokens times the prices, exactly');
    const ledger = await env.db('ledger').where({ reservation_id: requestId }).select('kind', 'amount');
    assert.deepEqual(ledger.map((l) => l.kind).sort(), ['charge', 'hold', 'release'], 'one hold, one release and one charge for the request');
    const all = await env.db('ledger').where({ account_id: accountId, kind: 'charge' }).select('amount');
    return { row, expected, charges: all.length };
  }

  it('route set / list / remove by CLI and admin API, with the same validation', async () => {
    const model = await routedModel([provider, `a-${uid()}`]);
    const up = `b-${uid()}`;
    const set = await cli('route', 'set', '--model', model, '--provider', provider, '--upstream', up, '--priority', '1', '--weight', '3');
    assert.equal(set.code, 0, set.stdout);
    assert.deepEqual(oneObject(set).routes.map((r: { upstream_model: string; priority: number; weight: number }) => [r.priority, r.weight]), [[0, 1], [1, 3]], 'the routes after set: priority 0 weight 1, then priority 1 weight 3');
    const unknown = await cli('route', 'set', '--model', model, '--provider', 'no-such-provider', '--upstream', 'x');
    assert.equal(unknown.code, 2, unknown.stdout);
    assert.match(unknown.json.error.message, /unknown provider 'no-such-provider'/, 'the CLI names the unknown provider');
    assert.equal((await cli('route', 'set', '--model', model, '--provider', provider, '--upstream', 'x', '--weight', '0')).code, 2, 'a weight of 0 is refused by the CLI as invalid input');
    assert.equal((await cli('route', 'set', '--model', 'no-such-model', '--provider', provider, '--upstream', 'x')).code, 1, 'an unknown model is a not-found exit code from the CLI');

    const base = stack.gateway.url;
    const bad = await admin(base, `/admin/models/${model}/routes`, { provider: 'no-such-provider', upstream: 'x' }, 'PUT');
    assert.equal(bad.status, 400, bad.text);
    assert.equal(bad.json.error.param, 'provider', 'the admin API error names the provider field');
    assert.equal((await admin(base, `/admin/models/${model}/routes`, { provider, upstream: 'x', priority: -1 }, 'PUT')).status, 400, 'a negative priority is refused by the admin API');
    assert.equal((await admin(base, `/admin/models/${model}/routes`, { provider, upstream: 'x', colour: 'red' }, 'PUT')).status, 400, 'an unknown field is refused by the admin API');
    const put = await admin(base, `/admin/models/${model}/routes`, { provider: down, upstream: 'c', priority: 0, weight: 2 }, 'PUT');
    assert.equal(put.status, 200, put.text);
    assert.equal(put.json.routes.length, 3, 'the model now has three routes');
    // The model row mirrors the top route (priority 0, heaviest first) for the one-route endpoints.
    assert.equal((await env.db('models').where({ id: model }).first()).provider_id, down, 'the model row mirrors the top route, the heaviest at priority 0');
    const removed = await admin(base, `/admin/models/${model}/routes`, { provider: down, upstream: 'c' }, 'DELETE');
    assert.equal(removed.status, 200, removed.text);
    assert.deepEqual((await admin(base, `/admin/models/${model}/routes`)).json.routes.map((r: { upstream_model: string }) => r.upstream_model).sort(), [up, (await env.db('models').where({ id: model }).first()).upstream_model].sort(), 'after the removal, the two remaining routes are listed');
    assert.equal((await admin(base, `/admin/models/${model}/routes`, { provider: down, upstream: 'c' }, 'DELETE')).status, 404, 'removing a route that is gone answers 404');
    const rm = await cli('route', 'remove', '--model', model, '--provider', provider, '--upstream', up);
    assert.equal(rm.code, 0, rm.stdout);
    // The last route stays: a model needs one.
    const last = oneObject(rm).routes[0];
    const refused = await cli('route', 'remove', '--model', model, '--provider', last.provider_id, '--upstream', last.upstream_model);
    assert.equal(refused.code, 2, refused.stdout);
    assert.equal((await cli('route', 'list', '--model', model)).json.routes.length, 1, 'the last route stays');
  });

  it('non-stream: a 503 of the first route moves the request to the next, within one hold, charged once and exactly', async () => {
    const { acct, bad, good, model } = await failingThenGood('fail', 503);
    const r = await chat(acct.key, model);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.model, model, 'the answer names the gateway model, not the upstream one');
    assert.equal(await callsTo(bad), 1, 'the failing route was called once');
    assert.equal(await callsTo(good), 1, 'the next route was called once');
    const id = r.headers.get('x-gateway-request-id')!;
    const { expected, charges } = await chargedOnce(acct.accountId, id, r.json.usage);
    assert.equal(r.headers.get('x-gateway-cost'), expected.toString(), 'the cost header is the exact charge');
    assert.equal(charges, 1, 'charged exactly once');
    const g = await generation(acct.key, id);
    assert.equal(g.provider, provider, 'the generation names the provider');
    assert.deepEqual(
      g.route.attempts.map((a: { upstream_model: string; result: string; http_status: number }) => [a.upstream_model, a.result, a.http_status]),
      [
        [bad, 'failed', 503],
        [good, 'ok', 200],
      ],
      'the attempts: the 503 route failed, the next answered',
    );
    assert.equal(g.route.upstream_model, good, 'the generation names the route that answered');
    const balance = await env.db('accounts').where({ id: acct.accountId }).first();
    assert.equal(new Decimal(balance.total_usage).toString(), expected.toString(), "the account's usage is the exact charge");
    assert.equal(new Decimal(balance.reserved_credits).toString(), '0', 'nothing stays reserved');
  });

  it('stream: a refused connection and a 429 move the stream to the third route; the official SDK sees a normal answer', async () => {
    const acct = await newAccount();
    const limited = `limited-${uid()}`;
    const good = `ok-${uid()}`;
    await failing(limited, 429);
    const model = await routedModel([down, 'nowhere'], [provider, limited], [provider, good]);
    const openai = new OpenAI({ apiKey: acct.key, baseURL: `${stack.gateway.url}/v1`, maxRetries: 0 });
    const { data: stream, response } = await openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'stream me [sim tokens=4]' }], stream: true, stream_options: { include_usage: true } }).withResponse();
    let text = '';
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    assert.ok(text.startsWith('Echo:'), text);
    assert.equal(usage?.completion_tokens, 4, 'the streamed usage counts the 4 completion tokens');
    const id = response.headers.get('x-gateway-request-id')!;
    const { charges } = await chargedOnce(acct.accountId, id, usage!);
    assert.equal(charges, 1, 'charged exactly once');
    const g = await generation(acct.key, id);
    assert.deepEqual(
      g.route.attempts.map((a: { provider: string; result: string }) => [a.provider, a.result]),
      [
        [down, 'failed'],
        [provider, 'failed'],
        [provider, 'ok'],
      ],
      'the attempts: the refused connection and the 429 failed, the third route answered',
    );
    const plain = await openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'plain [sim tokens=2]' }] });
    assert.equal(plain.usage?.completion_tokens, 2, 'a non-stream call through the SDK is answered too');
  });

  it('no fallback once the stream started: a stream that breaks after its first bytes is not retried elsewhere', async () => {
    const acct = await newAccount();
    const dropping = `drop-${uid()}`;
    const good = `ok-${uid()}`;
    const model = await routedModel([provider, dropping], [provider, good]);
    const r = await chat(acct.key, model, { stream: true, messages: [{ role: 'user', content: 'break [sim tokens=10 drop_after=3]' }] });
    assert.equal(r.status, 200, r.text);
    assert.match(r.text, /Echo/, 'the first bytes reached the client');
    assert.match(r.text, /provider_error/, 'the broken stream ends with a provider error');
    assert.equal(await callsTo(dropping), 1, 'the dropping route was called once');
    assert.equal(await callsTo(good), 0, 'the next route was never called once the stream started');
    const id = r.headers.get('x-gateway-request-id')!;
    const row = await settled(id);
    assert.equal(new Decimal(row.charge).toString(), '0', 'nothing is charged for the broken stream');
    const g = await generation(acct.key, id);
    assert.deepEqual(g.route.attempts.map((a: { upstream_model: string }) => a.upstream_model), [dropping], 'the broken stream has the one attempt only');
  });

  it('a 400 of the provider is the answer (the next route would refuse it too)', async () => {
    const { acct, good, model } = await failingThenGood('refuse', 400);
    const r = await chat(acct.key, model);
    assert.equal(r.status, 400, r.text);
    assert.equal(await callsTo(good), 0, 'a provider 400 does not fall back to the next route');
  });

  it('the circuit opens after repeated failures, half-opens after the cool-down with one trial, and closes when it works', async () => {
    const { acct, bad: flaky, model } = await failingThenGood('flaky', 500);
    const results = async (r: { headers: Headers }) => (await generation(acct.key, (await settled(r.headers.get('x-gateway-request-id')!)).id)).route.attempts.map((a: { result: string }) => a.result);
    for (let i = 0; i < 2; i++) assert.equal((await chat(acct.key, model)).status, 200, `request ${i + 1} falls back and is answered`);
    assert.equal(await callsTo(flaky), 2, 'the flaky route failed twice');
    // Open: the failing route is skipped, not called.
    const skipped = await chat(acct.key, model);
    assert.equal(skipped.status, 200, 'with the circuit open the request is still answered');
    assert.equal(await callsTo(flaky), 2, 'the open route is not called');
    assert.deepEqual(await results(skipped), ['skipped', 'ok'], 'the open route is skipped, the next answers');
    // Half-open after the cool-down: one trial, which fails and opens the circuit again.
    await new Promise((r) => setTimeout(r, 1600));
    const trial = await chat(acct.key, model);
    assert.deepEqual(await results(trial), ['failed', 'ok'], 'the half-open trial fails, the next route answers');
    assert.equal(await callsTo(flaky), 3, 'the trial reached the flaky route once');
    assert.deepEqual(await results(await chat(acct.key, model)), ['skipped', 'ok'], 'the circuit opened again: the route is skipped');
    // The route recovers: the next trial succeeds and the circuit closes.
    await failing(flaky, null);
    await new Promise((r) => setTimeout(r, 1600));
    assert.deepEqual(await results(await chat(acct.key, model)), ['ok'], "the recovered route's trial closes the circuit");
    assert.deepEqual(await results(await chat(acct.key, model)), ['ok'], 'the closed route keeps answering');
    assert.equal(await callsTo(flaky), 5, 'the recovered route was called for the trial and the next request');
  });

  describe('issue 33 item 4: a breaker never keeps a recovered route refused for its cool-down', function () {
    // The default cool-down (30 s): without the early trial, every request below would be a 503.
    const long = useStack({ adminToken: ADMIN_TOKEN, routeBreaker: { failures: 2, windowMs: 60_000, cooldownMs: 30_000 } });
    const early = (key: string, model: string) =>
      call(long.gateway.url, '/v1/chat/completions', { key, body: { model, messages: [{ role: 'user', content: 'route me please [sim tokens=5]' }] } });

    /** A model of one route whose circuit was opened by two 500s (cool-down 30 s from now). */
    async function openedModel(acct: { key: string }) {
      const upstream = `open-${uid()}`;
      assert.equal(await failing(upstream, 500), 200, 'the simulator takes the failing behaviour');
      const model = await routedModel([provider, upstream]);
      for (let i = 0; i < 2; i++) assert.equal((await early(acct.key, model)).status, 502, 'a 500 of the only route is a provider error');
      return { upstream, model };
    }
    const reservations = async (accountId: string) => Number((await env.db('reservations').where({ account_id: accountId }).count<{ count: string }[]>('* as count'))[0].count);

    it('every route open and the provider back: the request goes to it at once (an early trial), not a 503 for the cool-down', async () => {
      const acct = await newAccount();
      const { upstream, model } = await openedModel(acct);
      await failing(upstream, null); // the provider is back, well within the 30 s cool-down
      const r = await early(acct.key, model);
      assert.equal(r.status, 200, `the early trial reaches the recovered provider: ${r.text}`);
      assert.equal(await callsTo(upstream), 3, 'two failures and the trial reached the provider');
      const g = await generation(acct.key, (await settled(r.headers.get('x-gateway-request-id')!)).id);
      assert.deepEqual(g.route.attempts.map((a: { result: string }) => a.result), ['skipped', 'ok'], 'the open route is noted, then its trial answered');
      const next = await early(acct.key, model);
      assert.equal(next.status, 200, `the trial closed the circuit: ${next.text}`);
      assert.equal(await callsTo(upstream), 4, 'the next request goes straight to the route');
    });

    it('every route open, still failing: one early trial at a time; a request meanwhile is refused before anything is held', async () => {
      const acct = await newAccount();
      const { upstream, model } = await openedModel(acct);
      const failed = await early(acct.key, model);
      assert.equal(failed.status, 502, `the early trial fails as the provider still does: ${failed.text}`);
      assert.equal(await callsTo(upstream), 3, 'one trial went out');
      // A slow trial is out: a request meanwhile finds every trial taken and holds nothing.
      await failing(upstream, null);
      const slow = call(long.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model, messages: [{ role: 'user', content: 'slow trial [sim tokens=5 latency=1200]' }] } });
      await new Promise((r) => setTimeout(r, 400));
      const before = await reservations(acct.accountId);
      const shed = await early(acct.key, model);
      assert.equal(shed.status, 503, `a request while the trial is out is shed: ${shed.text}`);
      assert.equal(shed.json.error.code, 'provider_unavailable', 'the usual provider error');
      assert.equal(await reservations(acct.accountId), before, 'nothing was held for the shed request');
      assert.equal((await slow).status, 200, 'the slow trial answered');
      assert.equal((await early(acct.key, model)).status, 200, 'the circuit closed after the trial');
    });

    it('with two open routes, the one whose cool-down ends first takes the trial', async () => {
      const acct = await newAccount();
      const first = `first-${uid()}`, second = `second-${uid()}`;
      for (const u of [first, second]) assert.equal(await failing(u, 500), 200, 'the simulator takes the failing behaviour');
      const model = await routedModel([provider, first], [provider, second]);
      // Two requests open both routes (each fails over to the other): first's cool-down starts earlier.
      for (let i = 0; i < 2; i++) assert.equal((await early(acct.key, model)).status, 502, 'both routes fail');
      assert.deepEqual([await callsTo(first), await callsTo(second)], [2, 2], 'each route was tried twice');
      for (const u of [first, second]) await failing(u, null);
      const r = await early(acct.key, model);
      assert.equal(r.status, 200, r.text);
      assert.deepEqual([await callsTo(first), await callsTo(second)], [3, 2], 'the trial went to the route that cooled down first');
    });
  });

  it('the fallback counter counts moves to the next route', async () => {
    const metrics = await fetch(`${stack.gateway.url}/metrics`);
    const text = await metrics.text();
    assert.match(text, /gateway_route_fallbacks_total\{model="routed-[0-9a-f]{8}",provider="route-sim-[0-9a-f]{8}",reason="http_503"\} [1-9]/, text.slice(0, 300));
  });
});
