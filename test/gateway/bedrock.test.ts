import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import Anthropic from '@anthropic-ai/sdk';
import Decimal from 'decimal.js';
import OpenAI from 'openai';
import { setModel, setProvider } from '../../services/catalog/entries';
import { startSimulator, type SimulatorHandle } from '../../simulator/server';
import { simSecretFor } from '../../simulator/bedrock';
import { env } from '../setup/env';
import { call, checkInvariants, newAccount, settled, useStack, type TestAccount } from '../helpers/stack';
import { cli } from '../helpers/admin-cli';

// The `bedrock` upstream kind (issue 36 part 1): the official OpenAI (chat, responses) and
// Anthropic (messages) clients reach a model routed to Bedrock's Converse API on the simulator,
// which checks every call's SigV4 signature; charges equal the reported tokens × prices.

const ADMIN_TOKEN = 'issue-36-bedrock-admin';
const PRICES = { input: '0.000001', output: '0.000002', cache: '0', 'cache-write': '0' };
const UPSTREAM = 'anthropic.claude-3-haiku-20240307-v1:0';
const STREAM_ROUTE = '/model/{modelId}/converse-stream';
const uid = () => randomUUID().slice(0, 8);
const keyOf = (id: string, secret = simSecretFor(id)) => `${id}:${secret}`;
const KEY_A = 'AKIASIMBEDROCK00001';
const KEY_B = 'AKIASIMBEDROCK00002';
const TOOL = { type: 'function' as const, function: { name: 'get_weather', description: 'weather of a city', parameters: { type: 'object', properties: { input: { type: 'string' } } } } };

describe('bedrock upstream kind (issue 36 part 1)', function () {
  this.timeout(60_000);
  const stack = useStack({ adminToken: ADMIN_TOKEN });
  let sim: SimulatorHandle;
  let acct: TestAccount;
  const provider = `bedrock-${uid()}`;
  const model = `br-${uid()}`;
  const openai = () => new OpenAI({ apiKey: acct.key, baseURL: `${stack.gateway.url}/v1`, maxRetries: 0 });
  const anthropic = () => new Anthropic({ apiKey: acct.key, baseURL: stack.gateway.url, maxRetries: 0 });
  const stats = async () => (await call(sim.url, '/_sim/stats')).json;
  const lastBody = async () => (await stats()).last_requests.at(-1).body;

  /** The request's one charge equals the tokens × prices exactly, with one hold and one release. */
  async function chargedFor(requestId: string, usage: { input: number; output: number }) {
    const row = await settled(requestId);
    const expected = new Decimal(usage.input).mul(PRICES.input).plus(new Decimal(usage.output).mul(PRICES.output));
    assert.equal(new Decimal(row.charge).toString(), expected.toString(), `charge ${row.charge} = ${usage.input} × ${PRICES.input} + ${usage.output} × ${PRICES.output}`);
    const ledger = await env.db('ledger').where({ reservation_id: requestId }).select('kind', 'amount');
    assert.deepEqual(ledger.map((l) => l.kind).sort(), ['charge', 'hold', 'release'], 'one hold, one release, one charge');
    assert.equal(new Decimal(ledger.find((l) => l.kind === 'charge')!.amount).toString(), expected.toString(), 'the ledger charge is the answer’s usage');
  }

  before(async () => {
    sim = await startSimulator({ port: 0 });
    await setProvider(env.db, { id: provider, kind: 'bedrock', 'base-url': sim.url, 'api-keys': keyOf(KEY_A), region: 'us-east-1' });
    await setModel(env.db, { id: model, provider, upstream: UPSTREAM, capabilities: 'text', tiers: 'pro', ...PRICES });
  });
  after(async () => {
    await sim.close();
  });
  beforeEach(async () => {
    acct = await newAccount({ credits: '10' });
    await call(sim.url, '/_sim/stats', { method: 'DELETE' });
  });

  describe('provider settings', () => {
    const admin = (id: string, body: unknown) => call(stack.gateway.url, `/admin/providers/${id}`, { method: 'PUT', body, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });

    it('the CLI and the admin API take a bedrock provider with its region and credentials, never printing a secret', async () => {
      const id = `bedrock-cli-${uid()}`;
      const ok = await cli('provider', 'set', '--id', id, '--kind', 'bedrock', '--base-url', sim.url, '--region', 'eu-west-3', '--api-keys', `${keyOf(KEY_A)},${keyOf(KEY_B, 'someOtherSecret/1234567:FwoGZXIvYXdzEXAMPLETOKEN')}`);
      assert.equal(ok.code, 0, `provider set: ${ok.stderr}`);
      assert.equal(ok.json.settings?.region, 'eu-west-3', 'the region is kept');
      assert.equal(ok.json.api_keys, 2, 'the key count, not the keys');
      assert.ok(!ok.stdout.includes('simSecret') && !ok.stdout.includes('someOtherSecret'), `no secret printed: ${ok.stdout}`);
      const row = await env.db('providers').where({ id }).first();
      assert.deepEqual(row.api_keys, [keyOf(KEY_A), keyOf(KEY_B, 'someOtherSecret/1234567:FwoGZXIvYXdzEXAMPLETOKEN')], 'stored as the other kinds store keys');

      const put = await admin(id, { kind: 'bedrock', 'base-url': sim.url, region: 'us-west-2', 'api-keys': keyOf(KEY_A) });
      assert.equal(put.status, 200, `admin PUT: ${put.text}`);
      assert.equal(put.json.settings?.region, 'us-west-2', 'the admin API sets the region');
    });

    it('refuses a bedrock provider without a region, with a malformed region or credentials, and a region on another kind', async () => {
      const id = `bedrock-bad-${uid()}`;
      const noRegion = await cli('provider', 'set', '--id', id, '--kind', 'bedrock', '--base-url', sim.url, '--api-keys', keyOf(KEY_A));
      assert.notEqual(noRegion.code, 0, 'no region: refused');
      assert.match(noRegion.stderr + noRegion.stdout, /region/, `the error names the region: ${noRegion.stderr}`);
      const badKey = await admin(id, { kind: 'bedrock', 'base-url': sim.url, region: 'us-east-1', 'api-keys': 'AKIASIMBEDROCK00001-secretwithoutcolon' });
      assert.equal(badKey.status, 400, `malformed credentials: ${badKey.text}`);
      assert.match(badKey.text, /api-keys/, 'the error names the field');
      assert.ok(!badKey.text.includes('secretwithoutcolon'), `the error never quotes the key: ${badKey.text}`);
      const badRegion = await admin(id, { kind: 'bedrock', 'base-url': sim.url, region: 'Mars 1', 'api-keys': keyOf(KEY_A) });
      assert.equal(badRegion.status, 400, `malformed region: ${badRegion.text}`);
      assert.match(badRegion.text, /region/, 'the error names the region');
      const openaiRegion = await admin(id, { kind: 'openai', 'base-url': sim.url, region: 'us-east-1', 'api-keys': 'k' });
      assert.equal(openaiRegion.status, 400, `a region on an openai provider: ${openaiRegion.text}`);
      assert.equal(await env.db('providers').where({ id }).first(), undefined, 'nothing was stored');
    });

    it('a model routed to bedrock shows in GET /v1/models', async () => {
      const list = await call(stack.gateway.url, '/v1/models', { key: acct.key });
      assert.equal(list.status, 200, list.text);
      assert.ok(list.json.data.some((m: { id: string }) => m.id === model), `${model} is listed`);
    });
  });

  describe('chat completions (openai client)', () => {
    it('text: system prompt, messages and inference settings reach Converse; usage is charged exactly', async () => {
      const { data: answer, response } = await openai()
        .chat.completions.create({ model, max_tokens: 40, temperature: 0.5, top_p: 0.9, messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hello bedrock world [sim tokens=6]' }] })
        .withResponse();
      assert.equal(answer.choices[0].message.content, 'Echo: hello bedrock world [sim tokens=6]'.split(' ').slice(0, 6).join(' '), `the answer: ${JSON.stringify(answer)}`);
      assert.equal(answer.choices[0].finish_reason, 'stop', 'end_turn is stop');
      const body = await lastBody();
      assert.deepEqual(body.system, [{ text: 'be brief' }], 'the system prompt as a system block');
      assert.deepEqual(body.messages, [{ role: 'user', content: [{ text: 'hello bedrock world [sim tokens=6]' }] }], 'the user turn as a text block');
      assert.deepEqual(body.inferenceConfig, { maxTokens: 40, temperature: 0.5, topP: 0.9 }, 'inferenceConfig');
      assert.equal((await stats()).by_key[KEY_A], 1, 'signed with the provider’s access key id');
      await chargedFor(response.headers.get('x-gateway-request-id')!, { input: answer.usage!.prompt_tokens, output: answer.usage!.completion_tokens });
    });

    it('streaming: the event-stream frames arrive as chat chunks with usage, charged exactly', async () => {
      const { data: stream, response } = await openai()
        .chat.completions.create({ model, stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'stream me please [sim tokens=5]' }] })
        .withResponse();
      let text = '';
      let usage: OpenAI.CompletionUsage | undefined;
      let finish: string | null = null;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta?.content ?? '';
        finish = chunk.choices[0]?.finish_reason ?? finish;
        if (chunk.usage) usage = chunk.usage;
      }
      assert.equal(text, 'Echo: stream me please [sim', `the streamed text: ${text}`);
      assert.equal(finish, 'stop', 'finish_reason');
      assert.ok(usage && usage.completion_tokens === 5, `usage in the last chunk: ${JSON.stringify(usage)}`);
      assert.equal((await stats()).by_endpoint[STREAM_ROUTE], 1, 'ConverseStream was called');
      await chargedFor(response.headers.get('x-gateway-request-id')!, { input: usage!.prompt_tokens, output: usage!.completion_tokens });
    });

    it('a tool round trip: toolConfig, then toolUse and toolResult blocks', async () => {
      const client = openai();
      const first = await client.chat.completions.create({ model, tools: [TOOL], tool_choice: 'required', messages: [{ role: 'user', content: 'Paris [sim tool_call=get_weather]' }] });
      const callMade = first.choices[0].message.tool_calls?.[0];
      assert.ok(callMade && callMade.type === 'function', `a tool call: ${JSON.stringify(first)}`);
      assert.equal(callMade.function.name, 'get_weather', 'the tool named');
      assert.deepEqual(JSON.parse(callMade.function.arguments), { input: 'Paris' }, 'its arguments');
      assert.equal(first.choices[0].finish_reason, 'tool_calls', 'tool_use is tool_calls');
      const sent = await lastBody();
      assert.deepEqual(sent.toolConfig, { tools: [{ toolSpec: { name: 'get_weather', description: 'weather of a city', inputSchema: { json: TOOL.function.parameters } } }], toolChoice: { any: {} } }, 'toolConfig');

      const second = await client.chat.completions.create({
        model,
        tools: [TOOL],
        messages: [{ role: 'user', content: 'Paris [sim tool_call=get_weather]' }, first.choices[0].message, { role: 'tool', tool_call_id: callMade.id, content: 'sunny and warm' }],
      });
      assert.ok(second.choices[0].message.content?.startsWith('Tool said: sunny and warm'), `the answer from the tool result: ${JSON.stringify(second)}`);
      const turns = (await lastBody()).messages;
      assert.deepEqual(turns[1].content, [{ toolUse: { toolUseId: callMade.id, name: 'get_weather', input: { input: 'Paris' } } }], 'the assistant turn carries the toolUse');
      assert.deepEqual(turns[2].content, [{ toolResult: { toolUseId: callMade.id, content: [{ text: 'sunny and warm' }] } }], 'the tool message is a toolResult');
      // Converse has no tool choice none; with tool turns in the conversation it needs its toolConfig: auto, reported
      const none = await client.chat.completions
        .create({ model, tools: [TOOL], tool_choice: 'none', reasoning_effort: 'low', messages: [{ role: 'user', content: 'Paris [sim tool_call=get_weather]' }, first.choices[0].message, { role: 'tool', tool_call_id: callMade.id, content: 'rain' }] })
        .withResponse();
      assert.ok(none.data.choices[0].message.content?.startsWith('Tool said: rain'), `answered: ${JSON.stringify(none.data)}`);
      assert.deepEqual((await lastBody()).toolConfig.toolChoice, { auto: {} }, 'toolChoice auto');
      assert.equal(none.response.headers.get('x-gateway-ignored-params'), 'tool_choice, reasoning_effort', 'what Converse could not carry is reported');
    });

    it('a stop sequence ends the answer: stopSequences sent, finish_reason stop', async () => {
      const r = await openai().chat.completions.create({ model, stop: ['fox'], messages: [{ role: 'user', content: 'the quick brown fox jumps [sim tokens=10]' }] });
      assert.equal(r.choices[0].message.content, 'Echo: the quick brown', `cut before the sequence: ${JSON.stringify(r)}`);
      assert.equal(r.choices[0].finish_reason, 'stop', 'a stop sequence is stop in chat');
      assert.deepEqual((await lastBody()).inferenceConfig.stopSequences, ['fox'], 'stopSequences');
    });
  });

  describe('responses (openai client) and messages (anthropic client)', () => {
    it('responses: text and a stream, charged exactly', async () => {
      const { data: r, response } = await openai().responses.create({ model, input: 'responses over bedrock [sim tokens=4]' }).withResponse();
      assert.equal(r.output_text, 'Echo: responses over bedrock', `output_text: ${JSON.stringify(r)}`);
      await chargedFor(response.headers.get('x-gateway-request-id')!, { input: r.usage!.input_tokens, output: r.usage!.output_tokens });
      const stream = await openai().responses.create({ model, input: 'streamed responses [sim tokens=3]', stream: true });
      let text = '';
      let done: OpenAI.Responses.Response | undefined;
      for await (const ev of stream) {
        if (ev.type === 'response.output_text.delta') text += ev.delta;
        if (ev.type === 'response.completed') done = ev.response;
      }
      assert.equal(text, 'Echo: streamed responses', `streamed text: ${text}`);
      assert.equal(done?.usage?.output_tokens, 3, 'usage in response.completed');
    });

    it('messages: stop_sequence and the sequence, cache tokens, streaming; charged exactly', async () => {
      const client = anthropic();
      const { data: m, response } = await client.messages
        .create({ model, max_tokens: 50, system: 'terse', stop_sequences: ['fox'], messages: [{ role: 'user', content: 'the quick brown fox jumps [sim tokens=10 cached=3]' }] })
        .withResponse();
      assert.equal(m.stop_reason, 'stop_sequence', `stop_reason: ${JSON.stringify(m)}`);
      assert.equal(m.stop_sequence, 'fox', 'the one sequence asked is the one that matched');
      assert.equal(m.content[0]?.type === 'text' && m.content[0].text, 'Echo: the quick brown', `the text before the sequence: ${JSON.stringify(m.content)}`);
      assert.equal(m.usage.cache_read_input_tokens, 3, 'cacheReadInputTokens reach the client');
      const row = await settled(response.headers.get('x-gateway-request-id')!);
      // input_tokens excludes the cache reads, billed at the cache price (0 here)
      assert.equal(new Decimal(row.charge).toString(), new Decimal(m.usage.input_tokens).mul(PRICES.input).plus(new Decimal(m.usage.output_tokens).mul(PRICES.output)).toString(), 'charge from the usage shown');

      const stream = client.messages.stream({ model, max_tokens: 50, messages: [{ role: 'user', content: 'stream the messages [sim tokens=4]' }] });
      const final = await stream.finalMessage();
      assert.deepEqual(final.content.map((b) => (b.type === 'text' ? b.text : b.type)), ['Echo: stream the messages'], `streamed: ${JSON.stringify(final)}`);
      assert.equal(final.stop_reason, 'end_turn', 'end_turn');
      assert.equal(final.usage.output_tokens, 4, 'output tokens from the metadata event');
    });
  });

  describe('errors and aborts', () => {
    const chat = (content: string, stream = false) => call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model, stream, messages: [{ role: 'user', content }] } });

    it('Bedrock exceptions map to the gateway’s error table, not billed', async () => {
      const cases: Array<[string, number, string]> = [
        ['[sim status=429]', 429, 'provider_rate_limited'], // ThrottlingException
        ['[sim status=400]', 400, 'invalid_request'], // ValidationException
        ['[sim status=408]', 504, 'provider_timeout'], // ModelTimeoutException
        ['[sim status=503]', 502, 'provider_error'], // ServiceUnavailableException
        ['[sim status=403]', 503, 'provider_unavailable'], // AccessDeniedException
        ['[sim status=400 error_code=ServiceQuotaExceededException]', 429, 'provider_rate_limited'],
      ];
      for (const [content, status, code] of cases) {
        const r = await chat(content);
        assert.equal(r.status, status, `${content}: ${r.text}`);
        assert.equal(r.json.error.code, code, `${content}: ${r.text}`);
      }
      const refused = await chat('[sim status=400]');
      assert.match(refused.json.error.message, /Simulated upstream error/, 'the provider’s message is shown');
      for (const r of await env.db('reservations').where({ account_id: acct.accountId }).select('id')) await settled(r.id);
      const inv = await checkInvariants(acct.accountId);
      assert.equal(Number(inv.ledger.usage), 0, 'nothing charged');
      assert.equal(Number(inv.reservations.charged), 0, 'no reservation charged');
    });

    it('a key with the wrong secret is refused by the signature check; the next key answers', async () => {
      const id = `bedrock-keys-${uid()}`;
      const m = `br-keys-${uid()}`;
      await setProvider(env.db, { id, kind: 'bedrock', 'base-url': sim.url, 'api-keys': `${keyOf(KEY_B, 'wrongSecretButWellFormed')},${keyOf(KEY_A)}`, region: 'us-east-1' });
      await setModel(env.db, { id: m, provider: id, upstream: UPSTREAM, capabilities: 'text', tiers: 'pro', ...PRICES });
      let r = await call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model: m, messages: [{ role: 'user', content: 'hi' }] } });
      for (const deadline = Date.now() + 5000; r.status === 404 && Date.now() < deadline; await new Promise((res) => setTimeout(res, 100))) {
        r = await call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model: m, messages: [{ role: 'user', content: 'hi' }] } });
      }
      assert.equal(r.status, 200, `answered with the second key: ${r.text}`);
      const s = await stats();
      assert.equal(s.by_key[KEY_B], 1, 'the first key was tried and refused (InvalidSignatureException)');
      assert.equal(s.by_key[KEY_A], 1, 'the second key answered');
    });

    it('the client signs with the provider’s key and region only, whatever AWS_* variables the process has', async () => {
      const id = `bedrock-env-${uid()}`;
      const m = `br-env-${uid()}`;
      await setProvider(env.db, { id, kind: 'bedrock', 'base-url': sim.url, 'api-keys': keyOf(KEY_A), region: 'ap-southeast-2' });
      await setModel(env.db, { id: m, provider: id, upstream: UPSTREAM, capabilities: 'text', tiers: 'pro', ...PRICES });
      const saved = { ...process.env };
      Object.assign(process.env, { AWS_ACCESS_KEY_ID: 'AKIAENVIRONMENT00001', AWS_SECRET_ACCESS_KEY: 'environmentSecret0000', AWS_REGION: 'us-west-1', AWS_BEARER_TOKEN_BEDROCK: 'bedrock-api-key-from-env', AWS_MAX_ATTEMPTS: '5' });
      try {
        const ask = (content: string) => call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model: m, messages: [{ role: 'user', content }] } });
        let r = await ask('hi');
        for (const deadline = Date.now() + 5000; r.status === 404 && Date.now() < deadline; await new Promise((res) => setTimeout(res, 100))) r = await ask('hi');
        assert.equal(r.status, 200, `answered: ${r.text}`);
        r = await ask('once [sim status=500]');
        assert.equal(r.status, 502, `one attempt at the 500, no SDK retries: ${r.text}`);
      } finally {
        for (const k of ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_REGION', 'AWS_BEARER_TOKEN_BEDROCK', 'AWS_MAX_ATTEMPTS']) if (saved[k] === undefined) delete process.env[k];
      }
      const s = await stats();
      assert.equal(s.by_key.AKIAENVIRONMENT00001, undefined, 'the environment’s key was never used');
      assert.ok(s.by_key[KEY_A] >= 2, `signed with the provider’s key (SigV4, not the bearer token): ${JSON.stringify(s.by_key)}`);
      assert.equal(s.by_model[UPSTREAM], s.by_key[KEY_A], 'each call reached the model once: the 500 was not retried by the SDK');
    });

    it('an in-stream exception ends the stream with an error, not billed', async () => {
      const r = await chat('fail midway [sim tokens=8 drop_after=2 error_code=modelStreamErrorException]', true);
      assert.equal(r.status, 200, 'the stream had started');
      assert.match(r.text, /The model stream failed/, `the provider's message reaches the client: ${r.text}`);
      const row = await settled(r.headers.get('x-gateway-request-id')!);
      assert.equal(Number(row.charge), 0, `not billed: ${JSON.stringify(row)}`);
    });

    it('a client that leaves before a Converse answer aborts the call, not billed', async () => {
      const ctl = new AbortController();
      const timer = setTimeout(() => ctl.abort(), 800);
      const left = await fetch(`${stack.gateway.url}/v1/chat/completions`, {
        method: 'POST',
        signal: ctl.signal,
        headers: { authorization: `Bearer ${acct.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model, messages: [{ role: 'user', content: 'slow [sim latency=4000]' }] }),
      }).then(
        () => 'answered',
        (err: Error) => err.name,
      );
      clearTimeout(timer);
      assert.equal(left, 'AbortError', 'the client gave up before the answer');
      let closed = 0;
      for (const deadline = Date.now() + 5000; closed === 0 && Date.now() < deadline; await new Promise((r) => setTimeout(r, 50))) {
        closed = (await stats()).closed_early?.['/model/{modelId}/converse'] ?? 0;
      }
      assert.equal(closed, 1, 'the simulator saw the Converse call closed during its latency');
      let rows: Array<{ id: string }> = [];
      for (const deadline = Date.now() + 5000; rows.length === 0 && Date.now() < deadline; await new Promise((r) => setTimeout(r, 50))) {
        rows = await env.db('reservations').where({ account_id: acct.accountId }).select('id');
      }
      assert.equal(rows.length, 1, 'one hold was taken');
      const done = await settled(rows[0].id);
      assert.equal(done.outcome, 'cancelled', `cancelled: ${JSON.stringify(done)}`);
      assert.equal(Number(done.charge), 0, 'nothing charged');
    });

    it('a client that leaves mid-stream aborts the ConverseStream call', async () => {
      const ctl = new AbortController();
      const res = await fetch(`${stack.gateway.url}/v1/chat/completions`, {
        method: 'POST',
        signal: ctl.signal,
        headers: { authorization: `Bearer ${acct.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model, stream: true, messages: [{ role: 'user', content: 'slow words [sim tokens=40 chunk_delay=200]' }] }),
      });
      assert.equal(res.status, 200, 'the stream started');
      const reader = res.body!.getReader();
      const first = await reader.read();
      assert.ok(!first.done && first.value.length > 0, 'a first chunk arrived');
      ctl.abort();
      await reader.cancel().catch(() => undefined);
      let closed = 0;
      for (const deadline = Date.now() + 5000; closed === 0 && Date.now() < deadline; await new Promise((r) => setTimeout(r, 50))) {
        closed = (await stats()).closed_early?.[STREAM_ROUTE] ?? 0;
      }
      assert.equal(closed, 1, 'the simulator saw the ConverseStream connection closed before its end');
      const row = await settled(res.headers.get('x-gateway-request-id')!);
      assert.equal(row.outcome, 'cancelled', `the client cancelled: ${JSON.stringify(row)}`);
    });
  });
});
