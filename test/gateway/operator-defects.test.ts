import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { loadConfig } from '../../platform/config';
import { setModel, setProvider } from '../../services/catalog/entries';
import { createKey } from '../../services/keys/keys';
import { hashKey } from '../../services/keys/key-format';
import { env } from '../setup/env';
import { call, checkInvariants, newAccount, settled, useStack } from '../helpers/stack';
import { cliWith, oneObject } from '../helpers/admin-cli';

// Defects of issue 23, each reproduced over real HTTP against a running gateway.

const ADMIN_TOKEN = 'issue-23-admin-token';
const admin = (base: string, p: string, body?: unknown, method?: string) =>
  call(base, p, { body, method, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });

const user = (content: string) => [{ role: 'user', content }];

/** Polls until fn() is true or the time is up; returns the last value of fn(). */
async function eventually(fn: () => Promise<boolean>, ms = 5000): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 100))) if (await fn()) return true;
  return fn();
}

describe('issue 23 defects (credits variant)', function () {
  this.timeout(60_000);
  const stack = useStack();

  it('defect 1: a model and a provider added while the gateway runs are served without a restart', async () => {
    const acct = await newAccount();
    const chat = (model: string) => call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model, messages: user('hi [sim tokens=2]') } });
    // The catalog is loaded (a known model answers) before the new rows exist.
    assert.equal((await chat('sim-gpt')).status, 200, 'a known model answers before the new rows exist');
    const provider = `p-${randomUUID().slice(0, 8)}`;
    const model = `m-${randomUUID().slice(0, 8)}`;
    await setProvider(env.db, { id: provider, kind: 'openai', 'base-url': env.simulator.url, 'api-keys': 'sim-upstream-key' });
    await setModel(env.db, { id: model, provider, upstream: 'sim-gpt-2026-01-15', capabilities: 'text', tiers: 'pro', input: '0.000001', output: '0.000001', cache: '0', 'cache-write': '0' });
    const served = await eventually(async () => (await chat(model)).status === 200);
    assert.ok(served, `new model answered ${JSON.stringify((await chat(model)).json)}`);
  });
});

describe('issue 23 defect 6: provider and model set for every adapter and media model', function () {
  this.timeout(90_000);
  const stack = useStack();

  it('provider set --kind anthropic, and model set --details with media prices, make models that answer', async () => {
    const acct = await newAccount();
    const provider = `anth-${randomUUID().slice(0, 8)}`;
    const p = await cliWith({}, 'provider', 'set', '--id', provider, '--kind', 'anthropic', '--base-url', env.simulator.url, '--api-keys', 'sim-upstream-key');
    assert.equal(p.code, 0, p.stdout);
    assert.equal(oneObject(p).kind, 'anthropic', 'the CLI made an anthropic provider');
    const claude = `claude-${randomUUID().slice(0, 8)}`;
    const tokens = ['--input', '0.000001', '--output', '0.000002', '--cache', '0', '--cache-write', '0'];
    const m = await cliWith({}, 'model', 'set', '--id', claude, '--provider', provider, '--upstream', 'sim-claude-2026-01-15', '--capabilities', 'text', '--tiers', 'pro', ...tokens);
    assert.equal(m.code, 0, m.stdout);
    const chat = await call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model: claude, messages: user('hello [sim tokens=3]') } });
    assert.equal(chat.status, 200, chat.text);
    assert.equal(chat.json.usage.completion_tokens, 3, 'the model on the new anthropic provider answers with the simulated tokens');

    const image = `img-${randomUUID().slice(0, 8)}`;
    const details = JSON.stringify({ max_images: 2, supported_parameters: ['n', 'size'], pricing: { per_image: '0.05' } });
    const noTokens = ['--input', '0', '--output', '0', '--cache', '0', '--cache-write', '0'];
    const im = await cliWith({}, 'model', 'set', '--id', image, '--provider', 'simulator', '--upstream', 'sim-image-1-2026-01-15', '--capabilities', 'image_generation', '--tiers', 'pro', ...noTokens, '--details', details);
    assert.equal(im.code, 0, im.stdout);
    assert.deepEqual(oneObject(im).details.pricing, { per_image: '0.05' }, 'the media prices given with --details are stored');
    const gen = await call(stack.gateway.url, '/v1/images/generations', { key: acct.key, body: { model: image, prompt: 'a red square' } });
    assert.equal(gen.status, 200, gen.text);
    assert.equal(gen.headers.get('x-gateway-cost'), '0.05', 'the image is charged its per-image price');

    // Bad details are refused and change nothing.
    for (const bad of ['{"pricing":{"per_image":"cheap"}}', 'not json', '{"supported_durations":[0]}']) {
      const r = await cliWith({}, 'model', 'set', '--id', image, '--provider', 'simulator', '--upstream', 'x', '--capabilities', 'image_generation', '--tiers', 'pro', ...noTokens, '--details', bad);
      assert.equal(r.code, 2, `${bad}: ${r.stdout}`);
    }
    assert.equal((await env.db('models').where({ id: image }).first()).upstream_model, 'sim-image-1-2026-01-15', "refused details leave the model's upstream unchanged");
  });

  it('a provider kind that lacks an endpoint (anthropic: no embeddings, no videos) answers provider_unavailable and holds nothing', async () => {
    const acct = await newAccount({ credits: '5' });
    const suffix = randomUUID().slice(0, 8);
    const [embed, video] = await Promise.all([env.db('models').where({ id: 'sim-embed' }).first(), env.db('models').where({ id: 'sim-video-1' }).first()]);
    await env.db('models').insert([
      { ...embed, id: `embed-${suffix}`, provider_id: 'simulator-anthropic' },
      { ...video, id: `video-${suffix}`, provider_id: 'simulator-anthropic' },
    ]);
    const embedCall = () => call(stack.gateway.url, '/v1/embeddings', { key: acct.key, body: { model: `embed-${suffix}`, input: 'hello' } });
    const videoCall = () => call(stack.gateway.url, '/v1/videos', { key: acct.key, body: { model: `video-${suffix}`, prompt: 'a fox', duration: 4 } });
    const seen = await eventually(async () => (await embedCall()).status !== 404 && (await videoCall()).status !== 404);
    assert.ok(seen, 'the catalog reloaded the two models');
    for (const r of [await embedCall(), await videoCall()]) {
      assert.equal(r.status, 503, r.text);
      assert.equal(r.json.error.code, 'provider_unavailable', r.text);
    }
    const row = await env.db('accounts').where({ id: acct.accountId }).first();
    assert.deepEqual([Number(row.total_usage), Number(row.reserved_credits)], [0, 0], 'nothing held or charged');
    assert.equal(Number((await env.db('reservations').where({ account_id: acct.accountId }).count('* as n'))[0].n), 0, 'no reservation row');
  });
});

describe('issue 23 defect 3: a provider cost above the hold', function () {
  this.timeout(60_000);
  const stack = useStack();

  it('is charged up to the hold, labelled provider_cost_capped, and the rest is reported to the operator', async () => {
    const acct = await newAccount({ credits: '10' });
    const r = await call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model: 'sim-gpt', messages: user('dear [sim tokens=5 cost=0.5]'), max_tokens: 20 } });
    assert.equal(r.status, 200, r.text);
    const id = r.headers.get('x-gateway-request-id')!;
    const d = r.json.usage.cost_details;
    const held = r.json.usage.balance.reserved_credits;
    assert.ok(held < 0.5, `the hold ${held} is below the provider cost`);
    assert.equal(r.json.usage.cost, held, 'the cost charged is the hold, not the provider cost above it');
    assert.equal(d.billing_source, 'provider_cost_capped', 'the answer is labelled provider_cost_capped');
    assert.equal(d.is_estimate, false, 'a capped provider cost is not an estimate');
    assert.ok(Math.abs(d.uncovered_credits - (0.5 - held)) < 1e-12, JSON.stringify(d));
    const row = await settled(id);
    assert.equal(row.billing_source, 'provider_cost_capped', 'the settled row is labelled provider_cost_capped');
    assert.equal(Number(row.charge), held, 'the settled charge is the hold');
    assert.equal(Number(row.uncovered_credits) + Number(row.charge), 0.5, 'charge plus uncovered is the whole provider cost');
    const gen = await call(stack.gateway.url, `/v1/generation?id=${id}`, { key: acct.key });
    assert.equal(gen.json.data.billing_source, 'provider_cost_capped', 'the generation lookup says provider_cost_capped');
    assert.equal(gen.json.data.cost_details.uncovered_credits, Number(row.uncovered_credits), 'the generation lookup shows the uncovered amount settled');
    const report = await cliWith({}, 'report', 'uncovered', '--limit', '1000');
    assert.equal(report.code, 0, report.stdout);
    const line = oneObject(report).data.find((l: { request_id: string }) => l.request_id === id);
    assert.deepEqual(line && [line.provider_cost_credits, line.charge, line.uncovered_credits, line.account_id], ['0.5', String(Number(row.charge)), String(Number(row.uncovered_credits)), acct.accountId], 'the uncovered report lists the request with its provider cost, charge, uncovered part and account');
    // A cost within the hold stays provider_cost with nothing uncovered.
    const fits = await call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model: 'sim-gpt', messages: user('cheap [sim tokens=5 cost=0.00001]'), max_tokens: 20 } });
    assert.equal(fits.json.usage.cost_details.billing_source, 'provider_cost', 'a cost within the hold is billed as provider_cost');
    assert.equal(fits.json.usage.cost_details.uncovered_credits, undefined, 'a cost within the hold leaves nothing uncovered');
  });
});

describe('issue 23 defect 8: what answers show', function () {
  this.timeout(60_000);
  const stack = useStack();
  const sse = async (path: string, key: string, body: unknown) => {
    const res = await fetch(stack.gateway.url + path, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return (await res.text()).split('\n').filter((l) => l.startsWith('data: ') && l !== 'data: [DONE]').map((l) => JSON.parse(l.slice(6)));
  };

  it('passed-through answers name the public model id, streamed or not, as translated ones do', async () => {
    const acct = await newAccount();
    const native = await call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model: 'sim-gpt', messages: user('hi [sim tokens=2]') } });
    assert.equal(native.json.model, 'sim-gpt', 'a passed-through answer names the public model id');
    const translated = await call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model: 'sim-claude', messages: user('hi [sim tokens=2]') } });
    assert.equal(translated.json.model, 'sim-claude', 'a translated answer names the public model id');
    const chunks = await sse('/v1/chat/completions', acct.key, { model: 'sim-gpt', stream: true, messages: user('hi [sim tokens=2]') });
    assert.ok(chunks.length > 1, `the stream has several chunks: ${chunks.length}`);
    for (const c of chunks) assert.equal(c.model, 'sim-gpt', JSON.stringify(c));
    const messages = await call(stack.gateway.url, '/v1/messages', { key: acct.key, body: { model: 'sim-claude', max_tokens: 20, messages: user('hi [sim tokens=2]') } });
    assert.equal(messages.json.model, 'sim-claude', messages.text);
    const events = await sse('/v1/messages', acct.key, { model: 'sim-claude', max_tokens: 20, stream: true, messages: user('hi [sim tokens=2]') });
    assert.equal(events.find((e) => e.type === 'message_start').message.model, 'sim-claude', 'the streamed message_start names the public model id');
  });

  it('a body over the limit is refused in MB, as the media limits are', async () => {
    const acct = await newAccount();
    const r = await call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model: 'sim-gpt', messages: user('x'.repeat(5 * 1024 * 1024)) } });
    assert.equal(r.status, 413, 'a body over 4 MB is refused with 413');
    assert.equal(r.json.error.message, 'The request body is larger than 4 MB.', 'the refusal gives the limit in MB');
  });
});

describe('issue 23 feature 3: a request id on every answer of the credits variant, in the request log', function () {
  this.timeout(60_000);
  const stack = useStack({ adminToken: ADMIN_TOKEN });
  const logged = async (id: string) => {
    let row;
    for (const end = Date.now() + 5000; !row && Date.now() < end; await new Promise((r) => setTimeout(r, 100))) row = await env.db('request_log').where({ id }).first();
    return row;
  };

  it('answers, errors included, carry x-request-id (equal to x-gateway-request-id when billed), each recorded', async () => {
    const acct = await newAccount();
    const ok = await call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model: 'sim-gpt', messages: user('hi [sim tokens=2]') } });
    assert.equal(ok.status, 200, 'the chat call is answered');
    const id = ok.headers.get('x-request-id')!;
    assert.match(id, /^[0-9a-f-]{36}$/, 'x-request-id is a UUID');
    assert.equal(ok.headers.get('x-gateway-request-id'), id, "a billed answer's x-request-id is its x-gateway-request-id");
    const row = await logged(id);
    assert.ok(row, 'the answered request is in the request log');
    assert.deepEqual([row.key_id, row.model, row.status, row.path, row.error_code], [acct.keyId, 'sim-gpt', 200, '/v1/chat/completions', null], 'the request log row has the key, model, status, path and no error');

    const errors = [
      await call(stack.gateway.url, '/v1/models', { key: `gw_ai_${'x'.repeat(40)}` }),
      await call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model: 'no-such-model', messages: user('x') } }),
      await call(stack.gateway.url, '/v1/nowhere', { key: acct.key }),
    ];
    const ids = errors.map((r) => r.headers.get('x-request-id'));
    for (const [i, r] of errors.entries()) assert.match(ids[i] ?? '', /^[0-9a-f-]{36}$/, `${r.status} ${r.text}`);
    assert.equal(new Set([id, ...ids]).size, 4, 'one id per request');
    const rows = await Promise.all(ids.map((i) => logged(i!)));
    assert.deepEqual(rows.map((r) => [r.status, r.error_code, r.key_id]), [
      [401, 'invalid_api_key', null],
      [403, 'model_not_found', acct.keyId],
      // an unrouted path is answered before any key is looked at in this variant
      [404, 'route_not_found', null],
    ], `each error is logged with its status, code and key: ${JSON.stringify(rows)}`);
    // The key's requests page (admin API) lists them, newest first.
    const page = await admin(stack.gateway.url, `/admin/keys/${acct.keyId}/requests`);
    assert.deepEqual(page.json.data.map((r: { id: string }) => r.id), [ids[1], id], "the key's requests page lists its logged requests, newest first");
  });
});

describe('issue 23 feature 2: the endpoints coding tools call, and CORS', function () {
  this.timeout(60_000);
  const stack = useStack({ corsOrigins: ['https://app.example.com'] });

  it('POST /v1/messages/count_tokens answers input_tokens through the Anthropic SDK, free of charge', async () => {
    const acct = await newAccount({ credits: '5' });
    const anthropic = new Anthropic({ apiKey: acct.key, baseURL: stack.gateway.url });
    const messages = [{ role: 'user' as const, content: 'x'.repeat(400) }];
    const small = await anthropic.messages.countTokens({ model: 'sim-claude', messages });
    assert.ok(small.input_tokens >= 100 && small.input_tokens < 120, JSON.stringify(small));
    const withSystem = await anthropic.messages.countTokens({ model: 'sim-claude', system: 'y'.repeat(400), messages });
    assert.ok(withSystem.input_tokens >= small.input_tokens + 100, `a 400-character system prompt adds tokens: ${withSystem.input_tokens} vs ${small.input_tokens}`);
    const row = await env.db('accounts').where({ id: acct.accountId }).first();
    assert.equal(Number(row.total_usage), 0, 'nothing held or charged');
    await assert.rejects(anthropic.messages.countTokens({ model: 'no-such', messages }), (e: { status: number; error: { type: string; error: { type: string } } }) => e.status === 403 && e.error.type === 'error');
  });

  it('POST /v1/embeddings through the OpenAI SDK, billed per input token as chat is, settled to the same charge', async () => {
    const acct = await newAccount({ credits: '5' });
    const openai = new OpenAI({ apiKey: acct.key, baseURL: `${stack.gateway.url}/v1` });
    const { data, response } = await openai.embeddings.create({ model: 'sim-embed', input: ['hello world', 'a second input of some length'] }).withResponse();
    assert.equal(data.data.length, 2, 'one embedding per input');
    assert.equal(data.data[0].embedding.length, 8, 'the simulated embeddings have 8 dimensions');
    assert.ok(Math.abs(Math.hypot(...data.data[0].embedding) - 1) < 1e-5, 'a unit vector');
    assert.equal(data.model, 'sim-embed', 'the answer names the public model id');
    const u = data.usage as typeof data.usage & { cost: number; cost_details: { billing_source: string; is_estimate: boolean } };
    assert.equal(u.prompt_tokens, 3 + 8, 'the input tokens of both inputs are counted');
    assert.equal(u.cost, 11 * 0.0000001, "billed per input token at the model's input price");
    assert.deepEqual([u.cost_details.billing_source, u.cost_details.is_estimate], ['token_fallback', true], 'without a provider cost the token price is billed as an estimate');
    const id = response.headers.get('x-gateway-request-id')!;
    assert.equal(response.headers.get('x-request-id'), id, 'x-request-id equals x-gateway-request-id');
    const row = await settled(id);
    assert.deepEqual([row.endpoint, Number(row.charge), row.prompt_tokens], ['/v1/embeddings', u.cost, 11], 'the settled row is an embeddings call charged what the answer said for its 11 tokens');
    // A provider cost is billed as chat bills it.
    const priced = await openai.embeddings.create({ model: 'sim-embed', input: 'priced [sim cost=0.0000005]', encoding_format: 'float' });
    const pu = priced.usage as typeof u;
    assert.deepEqual([pu.cost, pu.cost_details.billing_source, pu.cost_details.is_estimate], [0.0000005, 'provider_cost', false], 'the provider cost is billed as provider_cost, not an estimate');
    // A provider error before the answer bills nothing; a chat model is refused before any hold.
    await assert.rejects(openai.embeddings.create({ model: 'sim-embed', input: 'boom [sim status=503]' }), (e: { status: number }) => e.status >= 500);
    await assert.rejects(openai.embeddings.create({ model: 'sim-gpt', input: 'x' }), (e: { status: number; message: string }) => e.status === 400 && /does not serve \/v1\/embeddings/.test(e.message));
    // The failed request's hold is released once settled: nothing stays reserved, nothing more charged.
    const free = await eventually(async () => Number((await checkInvariants(acct.accountId)).account.reserved_credits) === 0, 15_000);
    assert.ok(free, 'every hold resolved');
    const inv = await checkInvariants(acct.accountId);
    assert.equal(Number(inv.account.total_usage), u.cost + 0.0000005, 'the failed embedding adds no charge to the two billed ones');
  });

  it('GET /v1/models/{id} through the OpenAI SDK; a model the key cannot see is 404', async () => {
    const acct = await newAccount({ tier: 'free_trial' });
    const openai = new OpenAI({ apiKey: acct.key, baseURL: `${stack.gateway.url}/v1` });
    const m = await openai.models.retrieve('sim-gpt-mini');
    assert.equal(m.id, 'sim-gpt-mini', 'the SDK retrieves the model by its id');
    assert.equal(m.object, 'model', 'the retrieved object is a model');
    await assert.rejects(openai.models.retrieve('sim-gpt'), (e: { status: number }) => e.status === 404, 'a paid model is not visible on free_trial');
    await assert.rejects(openai.models.retrieve('nope'), (e: { status: number }) => e.status === 404);
  });

  it('CORS: preflights answered for configured origins only, answers carry the headers a browser needs', async () => {
    const acct = await newAccount();
    const pre = await fetch(`${stack.gateway.url}/v1/chat/completions`, { method: 'OPTIONS', headers: { origin: 'https://app.example.com', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' } });
    assert.equal(pre.status, 204, 'the preflight from a configured origin is answered 204');
    assert.equal(pre.headers.get('access-control-allow-origin'), 'https://app.example.com', 'the preflight allows the configured origin');
    assert.match(pre.headers.get('access-control-allow-headers') ?? '', /authorization/, 'the preflight allows the authorization header');
    const other = await fetch(`${stack.gateway.url}/v1/chat/completions`, { method: 'OPTIONS', headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' } });
    assert.equal(other.headers.get('access-control-allow-origin'), null, 'a preflight from another origin gets no allow-origin');
    const r = await call(stack.gateway.url, '/v1/models', { key: acct.key, headers: { origin: 'https://app.example.com' } });
    assert.equal(r.status, 200, 'a call from a configured origin is answered');
    assert.equal(r.headers.get('access-control-allow-origin'), 'https://app.example.com', 'the answer allows the configured origin');
    assert.match(r.headers.get('access-control-expose-headers') ?? '', /x-request-id/, 'the answer exposes x-request-id to the browser');
    // Off by default (the other suites' gateways), and never on the admin API.
    const admin = await call(stack.gateway.url, '/admin/keys/x', { headers: { origin: 'https://app.example.com' } });
    assert.equal(admin.headers.get('access-control-allow-origin'), null, 'the admin API never sends CORS headers');
    assert.equal(loadConfig({}).CORS_ORIGINS, undefined, 'CORS is off by default');
    assert.equal(loadConfig({ CORS_ORIGINS: '*' }).CORS_ORIGINS, '*', 'CORS_ORIGINS=* is kept as the wildcard');
    assert.deepEqual(loadConfig({ CORS_ORIGINS: 'https://a.example, http://localhost:3000' }).CORS_ORIGINS, ['https://a.example', 'http://localhost:3000'], 'CORS_ORIGINS is split on commas and trimmed');
    assert.throws(() => loadConfig({ CORS_ORIGINS: 'a.example/path' }), /CORS_ORIGINS/);
  });
});

describe('issue 23 feature 4: the admin API and CLI for accounts, models and providers', function () {
  this.timeout(90_000);
  const stack = useStack({ adminToken: ADMIN_TOKEN });
  const chat = (key: string, model = 'sim-gpt') => call(stack.gateway.url, '/v1/chat/completions', { key, body: { model, messages: user('hi [sim tokens=2]') } });

  it('accounts: create, credits, tier and plan, deactivate and reactivate, over HTTP, with the validation of the CLI', async () => {
    const made = await admin(stack.gateway.url, '/admin/accounts', { name: `api-${randomUUID()}`, tier: 'free_trial', credits: '1.5' });
    assert.equal(made.status, 201, made.text);
    const id = made.json.id;
    assert.deepEqual([made.json.tier, made.json.total_credits, made.json.active], ['free_trial', '1.500000000000', true], 'the account is created with its tier, credits and active');
    const key = (await createKey(env.db, { accountId: id })).key;
    assert.equal((await chat(key)).status, 403, 'sim-gpt is not a free-trial model');
    const up = await admin(stack.gateway.url, `/admin/accounts/${id}`, { tier: 'pro' }, 'PATCH');
    assert.equal(up.json.tier, 'pro', 'the PATCH sets the tier to pro');
    assert.ok(await eventually(async () => (await chat(key)).status === 200), 'the new tier reaches the running gateway');
    const granted = await admin(stack.gateway.url, `/admin/accounts/${id}/credits`, { credits: '2' });
    assert.equal(Number(granted.json.total_credits), 3.5, 'the granted credits are added to the 1.5');
    const expired = await admin(stack.gateway.url, `/admin/accounts/${id}`, { plan_expires_at: '2001-01-01T00:00:00Z' }, 'PATCH');
    assert.equal(expired.status, 200, expired.text);
    assert.ok(await eventually(async () => (await chat(key)).status === 403), 'an expired plan is refused (403)');
    await admin(stack.gateway.url, `/admin/accounts/${id}`, { plan_expires_at: null }, 'PATCH');
    assert.equal((await admin(stack.gateway.url, `/admin/accounts/${id}/deactivate`, {})).json.active, false, 'deactivate turns the account off');
    assert.ok(await eventually(async () => (await chat(key)).status === 401), 'a deactivated account is refused (401)');
    assert.equal((await admin(stack.gateway.url, `/admin/accounts/${id}/reactivate`, {})).json.active, true, 'reactivate turns the account on');
    assert.ok(await eventually(async () => (await chat(key)).status === 200), 'a reactivated account is served again');
    // Bad input is refused naming the field, and changes nothing.
    for (const [p, body, method, status] of [
      [`/admin/accounts/${id}`, { tier: 'platinum' }, 'PATCH', 400],
      [`/admin/accounts/${id}/credits`, { credits: '-1' }, 'POST', 400],
      [`/admin/accounts/${randomUUID()}/credits`, { credits: '1' }, 'POST', 404],
      [`/admin/accounts/not-a-uuid`, undefined, 'GET', 400],
      ['/admin/accounts', { name: 'x', colour: 'red' }, 'POST', 400],
    ] as const) {
      const r = await admin(stack.gateway.url, p, body, method);
      assert.equal(r.status, status, `${method} ${p}: ${r.text}`);
    }
    const after = (await admin(stack.gateway.url, `/admin/accounts/${id}`)).json;
    assert.deepEqual([after.tier, Number(after.total_credits)], ['pro', 3.5], 'refused changes leave tier and credits as they were');
    assert.equal((await call(stack.gateway.url, `/admin/accounts/${id}`)).status, 401, 'ADMIN_TOKEN required');
  });

  it('models and providers over HTTP, with JSON values and the same checks as the CLI', async () => {
    const provider = `p-${randomUUID().slice(0, 8)}`;
    const p = await admin(stack.gateway.url, `/admin/providers/${provider}`, { kind: 'openai', base_url: env.simulator.url, api_keys: ['sim-upstream-key'] }, 'PUT');
    assert.equal(p.status, 200, p.text);
    const model = `m-${randomUUID().slice(0, 8)}`;
    const m = await admin(stack.gateway.url, `/admin/models/${model}`, { provider, upstream: 'sim-gpt-2026-01-15', capabilities: ['text'], tiers: ['pro'], input: '0.000001', output: '0.000002', cache: '0', cache_write: '0', max_output_tokens: 1000, free_trial: false }, 'PUT');
    assert.equal(m.status, 200, m.text);
    assert.deepEqual([m.json.max_output_tokens, m.json.tiers], [1000, ['pro']], 'the model keeps its max_output_tokens and tiers');
    const acct = await newAccount();
    assert.ok(await eventually(async () => (await chat(acct.key, model)).status === 200), `the new model ${model} serves`);
    assert.ok((await admin(stack.gateway.url, '/admin/models')).json.data.some((x: { id: string }) => x.id === model), `the new model ${model} is listed`);
    const bad = await admin(stack.gateway.url, `/admin/models/${model}`, { provider, upstream: 'x', capabilities: ['text'], tiers: ['gold'], input: '1', output: '1', cache: '0', cache_write: '0' }, 'PUT');
    assert.equal(bad.status, 400, bad.text);
    const unknown = await admin(stack.gateway.url, `/admin/models/${model}`, { provider, colour: 'red' }, 'PUT');
    assert.equal(unknown.status, 400, unknown.text);
    assert.equal((await env.db('models').where({ id: model }).first()).upstream_model, 'sim-gpt-2026-01-15', 'refused model changes leave its upstream unchanged');
  });

  it('CLI: account update (tier, plan expiry), show and reactivate', async () => {
    const acct = await newAccount();
    const u = await cliWith({}, 'account', 'update', '--account', acct.accountId, '--tier', 'starter', '--plan-expires-at', '2030-01-01T00:00:00Z');
    assert.equal(u.code, 0, u.stdout);
    assert.deepEqual([oneObject(u).tier, new Date(oneObject(u).plan_expires_at).toISOString()], ['starter', '2030-01-01T00:00:00.000Z'], 'the CLI sets the tier and the plan expiry');
    const none = await cliWith({}, 'account', 'update', '--account', acct.accountId, '--plan-expires-at', 'none');
    assert.equal(oneObject(none).plan_expires_at, null, '--plan-expires-at none clears the expiry');
    assert.equal((await cliWith({}, 'account', 'deactivate', '--account', acct.accountId)).code, 0, 'the CLI deactivates the account');
    const re = await cliWith({}, 'account', 'reactivate', '--account', acct.accountId);
    assert.deepEqual(oneObject(re), { id: acct.accountId, active: true }, 'reactivate prints the account id, active');
    const shown = oneObject(await cliWith({}, 'account', 'show', '--account', acct.accountId));
    assert.deepEqual([shown.tier, shown.active], ['starter', true], 'account show gives the tier set and active');
    const bad = await cliWith({}, 'account', 'update', '--account', acct.accountId, '--tier', 'gold');
    assert.equal(bad.code, 2, bad.stdout);
  });
});

describe('issue 23 defects (keyed variant)', function () {
  this.timeout(90_000);
  const keyed = useStack({ variant: 'keyed', adminToken: ADMIN_TOKEN });
  const credits = useStack({ adminToken: ADMIN_TOKEN });

  it('CLI key create in the keyed variant makes an mt key the gateway accepts, and refuses gw_ai', async () => {
    const acct = await newAccount();
    const made = await cliWith({ GATEWAY_VARIANT: 'keyed' }, 'key', 'create', '--account', acct.accountId);
    assert.equal(made.code, 0, made.stdout + made.stderr);
    const k = oneObject(made);
    assert.equal(k.format, 'mt', 'a keyed variant key is created in mt format');
    assert.match(k.key, /^mt-/, 'the key has the mt- prefix');
    assert.equal((await call(keyed.gateway.url, '/v1/models', { key: k.key })).status, 200, 'the gateway accepts the new mt key');
    const refused = await cliWith({ GATEWAY_VARIANT: 'keyed' }, 'key', 'create', '--account', acct.accountId, '--format', 'gw_ai');
    assert.equal(refused.code, 2, refused.stdout);
    assert.match(oneObject(refused).error.message, /keyed variant running here accepts only mt keys/, 'the refusal says the keyed variant accepts only mt keys');
    assert.equal((await env.db('api_keys').where({ account_id: acct.accountId }).count({ n: '*' }))[0].n, 2, 'only the test key and the mt key');
  });

  it('admin API refuses formats the running variant rejects and unknown model ids, creating nothing', async () => {
    const acct = await newAccount();
    const before = (await env.db('api_keys').where({ account_id: acct.accountId }).count({ n: '*' }))[0].n;
    const gw = await admin(keyed.gateway.url, '/admin/keys', { account_id: acct.accountId, format: 'gw_ai' });
    assert.equal(gw.status, 400, gw.text);
    assert.match(gw.json.error.message, /accepts only mt keys/, 'the refusal says only mt keys are accepted');
    const mt = await admin(credits.gateway.url, '/admin/keys', { account_id: acct.accountId, format: 'mt' });
    assert.equal(mt.status, 400, mt.text);
    assert.match(mt.json.error.message, /accepts only gw_ai or rk_live keys/, 'the refusal says only gw_ai or rk_live keys are accepted');
    const unknown = await admin(keyed.gateway.url, '/admin/keys', { account_id: acct.accountId, models: ['sim-gpt', 'no-such-model'] });
    assert.equal(unknown.status, 400, unknown.text);
    assert.match(unknown.json.error.message, /unknown model id 'no-such-model'/, 'the refusal names the unknown model id');
    assert.equal((await env.db('api_keys').where({ account_id: acct.accountId }).count({ n: '*' }))[0].n, before, 'refused key creations create nothing');
    const ok = await admin(keyed.gateway.url, '/admin/keys', { account_id: acct.accountId, models: ['sim-gpt'] });
    assert.equal(ok.status, 201, ok.text);
    const patch = await admin(keyed.gateway.url, `/admin/keys/${ok.json.id}`, { models: ['nope'] }, 'PATCH');
    assert.equal(patch.status, 400, patch.text);
    assert.deepEqual((await admin(keyed.gateway.url, `/admin/keys/${ok.json.id}`)).json.models, ['sim-gpt'], "the refused PATCH leaves the key's models unchanged");
  });
});

describe('issue 23 defect 4: spend limit refusals say what happened', function () {
  this.timeout(60_000);
  const keyed = useStack({ variant: 'keyed' });
  const keyWith = async (spendLimit: string, credits = '100') => {
    const acct = await newAccount({ credits });
    return (await createKey(env.db, { accountId: acct.accountId, format: 'mt', settings: { spend_limit: spendLimit } })).key;
  };
  const chat = (key: string, maxTokens: number) => call(keyed.gateway.url, '/v1/chat/completions', { key, body: { model: 'sim-gpt', messages: user('hi'), max_tokens: maxTokens } });

  it('a hold that does not fit in what is left is not called a reached limit, and max_tokens is named as the way out', async () => {
    const key = await keyWith('0.001');
    const r = await chat(key, 1000);
    assert.equal(r.status, 403, r.text);
    assert.equal(r.json.error.code, 'key_spend_limit_exceeded', 'the refusal is key_spend_limit_exceeded');
    assert.doesNotMatch(r.json.error.message, /reached/, 'a hold that does not fit is not called a reached limit');
    assert.match(r.json.error.message, /^This request's hold of 0\.008\d* does not fit in the 0\.001 left of this API key's spend limit of 0\.001\. .*max_tokens/, 'the message gives the hold and what is left, and names max_tokens');
    // A smaller max_tokens makes a hold that fits.
    assert.equal((await chat(key, 50)).status, 200, 'a smaller max_tokens makes a hold that fits');
  });

  it('a used-up limit says it is reached; amounts in messages carry no padding zeros', async () => {
    const key = await keyWith('0.001');
    await env.db('api_keys').where({ key_hash: hashKey(key) }).update({ spend: '0.001' });
    const r = await chat(key, 10);
    assert.equal(r.status, 403, r.text);
    assert.equal(r.json.error.message, 'This API key has reached its spend limit of 0.001.', 'a used-up limit says reached, with no padding zeros');
    const poor = await keyWith('1000', '0.0000001');
    const q = await chat(poor, 10);
    assert.equal(q.status, 402, q.text);
    assert.match(q.json.error.message, /the balance is 0\.0000001\.$/, 'the balance is given without padding zeros');
    assert.doesNotMatch(q.json.error.message, /\d\.\d*0{3,}\b/, 'no amount in the message carries padding zeros');
  });
});
