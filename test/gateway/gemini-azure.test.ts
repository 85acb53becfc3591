import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { SIMULATOR_MODELS } from '../../simulator/catalog';
import { cliWith, oneObject } from '../helpers/admin-cli';
import { call, checkInvariants, newAccount, settled, useStack, type TestAccount } from '../helpers/stack';
import { env } from '../setup/env';

// Issue 36 part 1: the `gemini` and `azure-openai` upstream kinds through the official openai
// (chat, responses) and @anthropic-ai/sdk (messages) clients, on the simulator's seeded models:
// text, streams, a tool round trip, stop sequences, usage equal to the charge, upstream errors.

const WEATHER = { name: 'get_weather', description: 'Weather for a city', parameters: { type: 'object', properties: { input: { type: 'string' } }, required: ['input'] } };

/** The catalog's charge for these token counts, in credits (prices of simulator/catalog.ts). */
function priced(model: string, u: { prompt: number; cached: number; completion: number }): number {
  const m = SIMULATOR_MODELS.find((x) => x.id === model)!;
  return (u.prompt - u.cached) * Number(m.input_multiplier) + u.cached * Number(m.cache_multiplier) + u.completion * Number(m.output_multiplier);
}

const close = (a: number, b: number) => Math.abs(a - b) < 1e-12;

for (const [kind, model] of [['gemini', 'sim-gemini'], ['azure-openai', 'sim-azure-gpt']] as const) {
  describe(`${kind} upstream through the official SDKs (${model})`, function () {
    this.timeout(60_000);
    const stack = useStack();
    let acct: TestAccount;
    let openai: OpenAI;
    let anthropic: Anthropic;
    before(async () => {
      acct = await newAccount({ credits: '10' });
      openai = new OpenAI({ apiKey: acct.key, baseURL: `${stack.gateway.url}/v1`, maxRetries: 0 });
      anthropic = new Anthropic({ apiKey: acct.key, baseURL: stack.gateway.url, maxRetries: 0 });
    });

    /** The settled reservation: its token counts are the answer's, its charge the catalog's price of them. */
    async function charged(requestId: string | null, u: { prompt: number; cached: number; completion: number }, headerCost?: string | null) {
      assert.ok(requestId, 'x-gateway-request-id');
      const row = await settled(requestId);
      assert.equal(row.status, 'settled', `settled: ${JSON.stringify(row)}`);
      assert.deepEqual([row.prompt_tokens, row.cached_tokens, row.completion_tokens], [u.prompt, u.cached, u.completion], 'the ledger counts the answer’s tokens');
      assert.ok(close(Number(row.charge), priced(model, u)), `charge ${row.charge} = catalog price of ${JSON.stringify(u)} (${priced(model, u)})`);
      if (headerCost !== undefined) assert.equal(Number(headerCost), Number(row.charge), 'x-gateway-cost is the charge');
      return row;
    }

    it('GET /v1/models lists the model', async () => {
      const ids = (await openai.models.list()).data.map((m) => m.id);
      assert.ok(ids.includes(model), `${model} in ${ids.join(', ')}`);
    });

    it('chat completions: text with cached and reasoning tokens, usage equal to the charge', async () => {
      const { data, response } = await openai.chat.completions
        .create({ model, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'hello there [sim tokens=5 cached=3 reasoning=2]' }], max_tokens: 100 })
        .withResponse();
      assert.equal(data.choices[0]?.message.content, 'Echo: hello there [sim tokens=5', 'five tokens of echo (directives are words too)');
      assert.equal(data.choices[0]?.finish_reason, 'stop', 'a natural stop');
      const u = data.usage!;
      assert.equal(u.completion_tokens, 7, 'visible and reasoning tokens are output');
      assert.equal(u.completion_tokens_details?.reasoning_tokens, 2, 'reasoning tokens apart');
      assert.equal(u.prompt_tokens_details?.cached_tokens, 3, 'cached tokens apart');
      assert.equal(data.model, model, 'the public model id');
      await charged(response.headers.get('x-gateway-request-id'), { prompt: u.prompt_tokens, cached: 3, completion: 7 }, response.headers.get('x-gateway-cost'));
    });

    it('chat completions stream: text and the usage chunk', async () => {
      const { data: stream, response } = await openai.chat.completions.create({ model, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'stream me now [sim tokens=4]' }] }).withResponse();
      let text = '';
      let finish: string | null = null;
      let usage: OpenAI.CompletionUsage | undefined;
      for await (const c of stream) {
        text += c.choices[0]?.delta.content ?? '';
        finish = c.choices[0]?.finish_reason ?? finish;
        usage = c.usage ?? usage;
      }
      assert.equal(text, 'Echo: stream me now', 'the streamed text');
      assert.equal(finish, 'stop', 'the finish reason');
      assert.equal(usage?.completion_tokens, 4, 'the usage chunk');
      await charged(response.headers.get('x-gateway-request-id'), { prompt: usage!.prompt_tokens, cached: 0, completion: 4 });
    });

    it('chat completions: a tool call round trip, and stop sequences', async () => {
      const ask = { role: 'user' as const, content: 'Paris weather [sim tool_call=get_weather]' };
      const first = await openai.chat.completions.create({ model, messages: [ask], tools: [{ type: 'function', function: WEATHER }] });
      const call0 = first.choices[0]?.message.tool_calls?.[0];
      assert.equal(first.choices[0]?.finish_reason, 'tool_calls', 'the answer is a call');
      assert.ok(call0?.type === 'function' && call0.function.name === 'get_weather', `the call: ${JSON.stringify(call0)}`);
      assert.deepEqual(JSON.parse(call0.function.arguments), { input: 'Paris weather' }, 'its arguments');
      const back = await openai.chat.completions.create({
        model,
        tools: [{ type: 'function', function: WEATHER }],
        messages: [ask, { role: 'assistant', content: null, tool_calls: [call0] }, { role: 'tool', tool_call_id: call0.id, content: 'sunny' }],
      });
      assert.match(back.choices[0]?.message.content ?? '', /^Tool said: sunny/, 'the tool result answered');
      const stopped = await openai.chat.completions.create({ model, stop: ['three'], messages: [{ role: 'user', content: 'one two three four [sim tokens=10]' }] });
      assert.equal(stopped.choices[0]?.message.content, 'Echo: one two', 'cut before the stop sequence');
      assert.equal(stopped.choices[0]?.finish_reason, 'stop', 'a stop');
    });

    it('messages: text, a stream, stop_sequence named, a tool round trip; usage equal to the charge', async () => {
      const { data, response } = await anthropic.messages.create({ model, max_tokens: 100, system: 'Be brief.', messages: [{ role: 'user', content: 'hi claude client [sim tokens=3]' }] }).withResponse();
      assert.equal(data.content[0]?.type === 'text' && data.content[0].text, 'Echo: hi claude', 'the text');
      assert.equal(data.stop_reason, 'end_turn', 'a natural end');
      await charged(response.headers.get('x-gateway-request-id'), { prompt: data.usage.input_tokens + (data.usage.cache_read_input_tokens ?? 0), cached: data.usage.cache_read_input_tokens ?? 0, completion: 3 }, response.headers.get('x-gateway-cost'));

      const s = anthropic.messages.stream({ model, max_tokens: 100, stop_sequences: ['three'], messages: [{ role: 'user', content: 'one two three four [sim tokens=10]' }] });
      const m = await s.finalMessage();
      assert.equal(m.content[0]?.type === 'text' && m.content[0].text, 'Echo: one two', 'the streamed text, cut');
      assert.deepEqual([m.stop_reason, m.stop_sequence], ['stop_sequence', 'three'], 'the stop sequence named');

      const tools = [{ name: WEATHER.name, description: WEATHER.description, input_schema: WEATHER.parameters as Anthropic.Tool.InputSchema }];
      const ask = { role: 'user' as const, content: 'Rome weather [sim tool_call=get_weather]' };
      const first = await anthropic.messages.create({ model, max_tokens: 100, tools, messages: [ask] });
      const use = first.content.find((b): b is Anthropic.ToolUseBlock => b.type === 'tool_use');
      assert.equal(first.stop_reason, 'tool_use', 'the answer is a call');
      assert.deepEqual(use?.input, { input: 'Rome weather' }, 'its input');
      const back = await anthropic.messages.create({ model, max_tokens: 100, tools, messages: [ask, { role: 'assistant', content: first.content }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: use!.id, content: 'rainy' }] }] });
      assert.match(back.content[0]?.type === 'text' ? back.content[0].text : '', /^Tool said: rainy/, 'the tool result answered');
    });

    it('responses: text, a stream, a function call round trip; usage equal to the charge', async () => {
      const { data, response } = await openai.responses.create({ model, instructions: 'Be brief.', input: 'respond please [sim tokens=2]' }).withResponse();
      assert.equal(data.output_text, 'Echo: respond', 'the text');
      await charged(response.headers.get('x-gateway-request-id'), { prompt: data.usage!.input_tokens, cached: 0, completion: 2 }, response.headers.get('x-gateway-cost'));
      let done: OpenAI.Responses.Response | undefined;
      for await (const ev of await openai.responses.create({ model, input: 'stream response [sim tokens=3]', stream: true })) if (ev.type === 'response.completed') done = ev.response;
      const streamed = done?.output.flatMap((o) => (o.type === 'message' ? o.content.map((c) => (c.type === 'output_text' ? c.text : '')) : [])).join('');
      assert.equal(streamed, 'Echo: stream response', 'the streamed text');
      assert.equal(done?.usage?.output_tokens, 3, 'the usage');
      const tools = [{ type: 'function' as const, strict: false, ...WEATHER }];
      const first = await openai.responses.create({ model, tools, input: 'Oslo weather [sim tool_call=get_weather]' });
      const fc = first.output.find((o): o is OpenAI.Responses.ResponseFunctionToolCall => o.type === 'function_call');
      assert.deepEqual([fc?.name, fc && JSON.parse(fc.arguments)], ['get_weather', { input: 'Oslo weather' }], 'the function call');
      const back = await openai.responses.create({ model, tools, input: [{ role: 'user', content: 'Oslo weather [sim tool_call=get_weather]' }, fc!, { type: 'function_call_output', call_id: fc!.call_id, output: 'snowing' }] });
      assert.match(back.output_text, /^Tool said: snowing/, 'the function output answered');
    });

    it('upstream errors map to the gateway’s table, not billed', async () => {
      const failed = async (content: string) => {
        try {
          await openai.chat.completions.create({ model, messages: [{ role: 'user', content }] });
        } catch (err) {
          assert.ok(err instanceof OpenAI.APIError, `an API error: ${String(err)}`);
          return { status: err.status, code: err.code };
        }
        throw new Error('the call succeeded');
      };
      assert.deepEqual(await failed('hi [sim status=429]'), { status: 429, code: 'provider_rate_limited' }, 'a rate limit');
      assert.deepEqual(await failed('hi [sim status=400]'), { status: 400, code: 'invalid_request' }, 'a refused request');
      await checkInvariants(acct.accountId);
    });
  });
}

describe('gemini: what the format cannot carry is reported', function () {
  const stack = useStack();
  it('user and reasoning_effort listed in x-gateway-ignored-params; the provider key in x-goog-api-key', async () => {
    const acct = await newAccount({ credits: '10' });
    const r = await call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model: 'sim-gemini', user: 'u-1', reasoning_effort: 'low', messages: [{ role: 'user', content: 'hi [sim tokens=1]' }] } });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.headers.get('x-gateway-ignored-params'), 'reasoning_effort, user', 'the fields Gemini has no place for');
    const sent = (await (await fetch(`${env.simulator.url}/_sim/stats`)).json()) as { last_requests: Array<{ endpoint: string; key: string; body: Record<string, unknown> }> };
    const last = sent.last_requests.filter((x) => x.endpoint.startsWith('/v1beta/')).at(-1);
    assert.equal(last?.key, 'sim-upstream-key', 'x-goog-api-key carries the provider key');
    assert.deepEqual(last?.body.contents, [{ role: 'user', parts: [{ text: 'hi [sim tokens=1]' }] }], 'the contents');
  });
});

describe('gemini: a key the provider refuses is the gateway’s problem, not the client’s', function () {
  const stack = useStack();
  it('Gemini’s 400 API_KEY_INVALID answers 503 provider_unavailable, not billed', async () => {
    const acct = await newAccount({ credits: '10' });
    const r = await call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model: 'sim-gemini', messages: [{ role: 'user', content: 'hi [sim reject_keys=sim-upstream-key]' }] } });
    assert.equal(r.status, 503, r.text);
    assert.equal(r.json.error.code, 'provider_unavailable', 'the model is unavailable, the request is fine');
    const row = await settled(r.headers.get('x-gateway-request-id') ?? (await env.db('reservations').where({ account_id: acct.accountId }).first('id')).id);
    assert.deepEqual([row.http_status, row.charge === null || Number(row.charge) === 0], [400, true], 'the provider’s status recorded, nothing charged');
    await checkInvariants(acct.accountId);
  });
});

describe('gemini and azure-openai: fault injection through the gateway', function () {
  const stack = useStack();
  const stats = async () => (await (await fetch(`${env.simulator.url}/_sim/stats`)).json()) as { requests: number; by_key: Record<string, number> };

  it('a Gemini stream the provider cuts ends with provider_error, not billed, sent once', async () => {
    const acct = await newAccount({ credits: '10' });
    await fetch(`${env.simulator.url}/_sim/stats`, { method: 'DELETE' });
    const res = await fetch(`${stack.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${acct.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sim-gemini', stream: true, messages: [{ role: 'user', content: 'cut me [sim drop_after=2 tokens=10]' }] }),
    });
    assert.equal(res.status, 200, 'the stream had begun');
    const events = (await res.text()).split('\n\n').filter((e) => e.startsWith('data: ')).map((e) => e.slice(6));
    assert.equal(JSON.parse(events.at(-1)!).error.code, 'provider_error', `the last event is the error: ${events.at(-1)}`);
    assert.equal((await stats()).requests, 1, 'sent once');
    const [row] = await env.db('reservations').where({ account_id: acct.accountId });
    assert.equal((await settled(row.id)).billing_source, 'not_billed', 'not billed');
  });

  it('a Gemini key the provider refuses (400 API_KEY_INVALID) is skipped for the next key and cools down', async () => {
    const acct = await newAccount({ credits: '10' });
    const provider = (await env.db('models').where({ id: 'sim-gemini' }).first('provider_id')).provider_id;
    await env.db('providers').where({ id: provider }).update({ api_keys: ['bad-gemini-key', 'sim-upstream-key'] });
    try {
      await new Promise((r) => setTimeout(r, 200)); // the catalog reloads on NOTIFY
      await fetch(`${env.simulator.url}/_sim/stats`, { method: 'DELETE' });
      const ask = () => call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model: 'sim-gemini', messages: [{ role: 'user', content: 'failover [sim reject_keys=bad-gemini-key tokens=2]' }] } });
      const r = await ask();
      assert.equal(r.status, 200, `answered with the next key: ${r.text}`);
      assert.deepEqual([(await stats()).by_key['bad-gemini-key'], (await stats()).by_key['sim-upstream-key']], [1, 1], 'the bad key once, then the good one');
      assert.equal((await ask()).status, 200, 'the next request is answered too');
      assert.deepEqual([(await stats()).by_key['bad-gemini-key'], (await stats()).by_key['sim-upstream-key']], [1, 2], 'the refused key cools down: the next request goes to the good key first');
    } finally {
      await env.db('providers').where({ id: provider }).update({ api_keys: ['sim-upstream-key'] });
    }
  });

  it('an Azure key the provider rejects (401) is skipped for the next key', async () => {
    const acct = await newAccount({ credits: '10' });
    await env.db('providers').where({ id: 'simulator-azure' }).update({ api_keys: ['bad-azure-key', 'sim-upstream-key'] });
    try {
      await new Promise((r) => setTimeout(r, 200)); // the catalog reloads on NOTIFY
      await fetch(`${env.simulator.url}/_sim/stats`, { method: 'DELETE' });
      const r = await call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model: 'sim-azure-gpt', messages: [{ role: 'user', content: 'failover [sim reject_keys=bad-azure-key tokens=2]' }] } });
      assert.equal(r.status, 200, r.text);
      const s = await stats();
      assert.deepEqual([s.by_key['bad-azure-key'], s.by_key['sim-upstream-key']], [1, 1], 'the bad key once, then the good one');
    } finally {
      await env.db('providers').where({ id: 'simulator-azure' }).update({ api_keys: ['sim-upstream-key'] });
    }
  });
});

describe('provider set --kind gemini|azure-openai: settings validated', function () {
  this.timeout(60_000);
  const ADMIN_TOKEN = 'issue-36-admin-token';
  const stack = useStack({ adminToken: ADMIN_TOKEN });
  const admin = (p: string, body: unknown) => call(stack.gateway.url, p, { body, method: 'PUT', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });

  it('admin API: an azure-openai provider needs api_version; its models answer from the named deployment', async () => {
    const provider = { kind: 'azure-openai', base_url: env.simulator.url, api_keys: ['az-key'] };
    const refused = await admin('/admin/providers/az-api', provider);
    assert.equal(refused.status, 400, refused.text);
    assert.match(refused.text, /api-version/, 'names the missing setting');
    const saved = await admin('/admin/providers/az-api', { ...provider, api_version: '2024-06-01' });
    assert.equal(saved.status, 200, saved.text);
    assert.deepEqual(saved.json.settings, { api_version: '2024-06-01' }, 'stored');
    const prices = { input: '0.000001', output: '0.000001', cache: '0', cache_write: '0' };
    const m = await admin('/admin/models/az-model', { provider: 'az-api', upstream: 'my-deployment', capabilities: ['text'], tiers: ['pro'], ...prices });
    assert.equal(m.status, 200, m.text);
    const acct = await newAccount({ credits: '10' });
    let r = await call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model: 'az-model', messages: [{ role: 'user', content: 'hi [sim tokens=2]' }] } });
    for (const end = Date.now() + 5000; r.status !== 200 && Date.now() < end; await new Promise((res) => setTimeout(res, 100))) {
      r = await call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model: 'az-model', messages: [{ role: 'user', content: 'hi [sim tokens=2]' }] } });
    }
    assert.equal(r.status, 200, r.text);
    const stats = (await (await fetch(`${env.simulator.url}/_sim/stats`)).json()) as { last_requests: Array<{ endpoint: string; model: string; key: string }> };
    const last = stats.last_requests.filter((x) => x.endpoint.startsWith('/openai/deployments/')).at(-1);
    assert.deepEqual([last?.model, last?.key], ['my-deployment', 'az-key'], 'the deployment and the api-key');
  });

  it('azure-openai needs an API version of the right form; other kinds take none; a good one is stored', async () => {
    const base = ['provider', 'set', '--base-url', env.simulator.url, '--api-keys', 'k'];
    const missing = await cliWith({}, ...base, '--id', 'az-missing', '--kind', 'azure-openai');
    assert.equal(missing.code, 2, missing.stdout);
    assert.match(missing.stdout + missing.stderr, /api-version/, 'names the flag');
    const bad = await cliWith({}, ...base, '--id', 'az-bad', '--kind', 'azure-openai', '--api-version', 'latest');
    assert.equal(bad.code, 2, bad.stdout);
    const other = await cliWith({}, ...base, '--id', 'gem-bad', '--kind', 'gemini', '--api-version', '2024-10-21');
    assert.equal(other.code, 2, other.stdout);
    assert.equal(await env.db('providers').whereIn('id', ['az-missing', 'az-bad', 'gem-bad']).first(), undefined, 'nothing stored');
    const ok = await cliWith({}, ...base, '--id', 'az-ok', '--kind', 'azure-openai', '--api-version', '2025-04-01-preview');
    assert.equal(ok.code, 0, ok.stdout);
    assert.deepEqual(oneObject(ok).settings, { api_version: '2025-04-01-preview' }, 'the settings');
    const gem = await cliWith({}, ...base, '--id', 'gem-ok', '--kind', 'gemini');
    assert.equal(gem.code, 0, gem.stdout);
    assert.equal(oneObject(gem).kind, 'gemini', 'the kind');
  });
});
