import assert from 'node:assert/strict';
import { call, newAccount, settled, useStack, type TestAccount } from '../helpers/stack';
import { env } from '../setup/env';

// What Codex CLI sends on /v1/responses (namespace, custom and hosted tools, encrypted reasoning
// asked for, client_metadata, store false, streaming), over real HTTP to both upstream kinds: the
// turn completes, the tool round trip comes back as Codex's own items, what no route carries is
// listed in x-gateway-ignored-params, and each request is charged once. Chat completions with the
// newer vendor fields passes natively; an unknown name is still refused.


let stack: ReturnType<typeof useStack>;

const CODEX_TOOLS = [
  { type: 'function', name: 'exec_command', description: 'Runs a command', strict: false, parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] } },
  { type: 'custom', name: 'apply_patch', description: 'Applies a patch', format: { type: 'grammar', syntax: 'lark', definition: 'start: /(.|\\n)+/' } },
  { type: 'namespace', name: 'mcp__docs__', description: 'Docs server', tools: [{ type: 'function', name: 'search', description: 'Searches', strict: false, parameters: { type: 'object', properties: { input: { type: 'string' } } } }] },
  { type: 'web_search', external_web_access: false },
];

/** A Codex-shaped request body (ResponsesApiRequest of codex-rs, plus client_metadata). */
const codexBody = (model: string, input: unknown[], stream = true) => ({
  model,
  instructions: 'You are Codex, a coding agent.',
  input,
  tools: CODEX_TOOLS,
  tool_choice: 'auto',
  parallel_tool_calls: false,
  reasoning: { effort: 'medium', summary: 'auto' },
  store: false,
  stream,
  include: ['reasoning.encrypted_content'],
  prompt_cache_key: '019a-session',
  text: { verbosity: 'low' },
  client_metadata: { 'x-codex-turn': '1' },
});

const user = (text: string) => ({ type: 'message', role: 'user', content: [{ type: 'input_text', text }] });
/** What the gateway lists for this body on a route that carries everything canonical (the OpenAI-kind one). */
const CODEX_IGNORED = ['tools;type=web_search', 'text.verbosity', 'parallel_tool_calls', 'client_metadata', 'prompt_cache_key'];

interface SseEvent {
  type: string;
  [k: string]: unknown;
}

async function stream(acct: TestAccount, body: unknown) {
  const res = await fetch(`${stack.gateway.url}/v1/responses`, { method: 'POST', headers: { authorization: `Bearer ${acct.key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  const events: SseEvent[] = text
    .split('\n\n')
    .map((block) => block.split('\n').find((l) => l.startsWith('data: ')))
    .filter((l): l is string => !!l)
    .map((l) => JSON.parse(l.slice(6)));
  return { headers: res.headers, events };
}

async function chargedOnce(requestId: string) {
  const row = await settled(requestId);
  assert.equal(row.status, 'settled', `request ${requestId} settled`);
  const charges = await env.db('ledger').where({ reservation_id: requestId, kind: 'charge' });
  assert.equal(charges.length, 1, `request ${requestId} has exactly one charge in the ledger`);
  assert.ok(Number(charges[0].amount) !== 0, `the charge of ${requestId} is not zero`);
}

describe('Codex and the newer vendor fields', () => {
  stack = useStack(); // inside a suite: its hooks run after the file's own database is set up

describe('Codex on /v1/responses', () => {
  for (const model of ['sim-gpt', 'sim-claude']) {
    it(`${model}: a Codex first turn streams to response.completed with usage, listing what it ignored`, async () => {
      const acct = await newAccount();
      const { headers, events } = await stream(acct, codexBody(model, [{ type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'sandbox: workspace-write' }] }, user('Say hello [sim tokens=4]')]));
      assert.equal(events[0].type, 'response.created', 'the first event is response.created');
      assert.deepEqual(events.map((e) => e.sequence_number), events.map((_, i) => i), 'sequence numbers count from 0');
      const text = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
      assert.match(text, /^Echo: Say hello/, `the text deltas: ${text}`);
      const done = events.find((e) => e.type === 'response.output_item.done' && (e.item as { type: string }).type === 'message');
      assert.ok(done, 'the message item is done');
      const added = events.find((e) => e.type === 'response.output_item.added' && (e.item as { type: string }).type === 'message');
      assert.equal((added!.item as { id: string }).id, (done.item as { id: string }).id, 'added and done name the same item');
      const last = events.at(-1)!;
      assert.equal(last.type, 'response.completed', 'the stream ends with response.completed');
      const usage = (last.response as { usage: { input_tokens: number; output_tokens: number; total_tokens: number } }).usage;
      assert.ok(usage.input_tokens > 0 && usage.output_tokens >= 4, `usage is reported: ${JSON.stringify(usage)}`);
      const ignored = (headers.get('x-gateway-ignored-params') ?? '').split(', ');
      if (model === 'sim-gpt') assert.deepEqual(ignored, CODEX_IGNORED, 'the OpenAI-kind route lists exactly what the canonical form cannot carry');
      else for (const name of CODEX_IGNORED) assert.ok(ignored.includes(name), `${model}: x-gateway-ignored-params lists ${name}: ${ignored.join(', ')}`);
      await chargedOnce(headers.get('x-gateway-request-id')!);
    });

    it(`${model}: a namespaced tool call comes back with its namespace, and its output goes back as a tool result`, async () => {
      const acct = await newAccount();
      const first = await stream(acct, codexBody(model, [user('find the docs [sim tool_call=mcp__docs__search]')]));
      const added = first.events.find((e) => e.type === 'response.output_item.added' && (e.item as { type: string }).type === 'function_call');
      const done = first.events.find((e) => e.type === 'response.output_item.done' && (e.item as { type: string }).type === 'function_call');
      assert.ok(added && done, 'the function call item is added and done');
      const call = done.item as { id: string; call_id: string; name: string; namespace?: string; arguments: string };
      assert.equal(call.name, 'search', 'the member name, as Codex declared it');
      assert.equal(call.namespace, 'mcp__docs__', 'the namespace it was declared in');
      assert.equal((added.item as { id: string }).id, call.id, 'added and done name the same item');
      const deltas = first.events.filter((e) => e.type === 'response.function_call_arguments.delta');
      assert.ok(deltas.every((e) => e.item_id === call.id), 'argument deltas name the call item');
      assert.equal(deltas.map((e) => e.delta).join(''), call.arguments, 'the deltas make the arguments');
      assert.deepEqual(JSON.parse(call.arguments), { input: 'find the docs' }, 'the arguments the simulator chose');
      await chargedOnce(first.headers.get('x-gateway-request-id')!);

      const history = [user('find the docs [sim tool_call=mcp__docs__search]'), ...first.events.filter((e) => e.type === 'response.output_item.done').map((e) => e.item), { type: 'function_call_output', call_id: call.call_id, output: 'three pages found' }];
      const second = await stream(acct, codexBody(model, history));
      const text = second.events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
      assert.match(text, /^Tool said: three pages found/, `the tool result reached the model: ${text}`);
      await chargedOnce(second.headers.get('x-gateway-request-id')!);
    });

    it(`${model}: a custom (free-form) tool call comes back as custom_tool_call with its raw input`, async () => {
      const acct = await newAccount();
      const first = await call(stack.gateway.url, '/v1/responses', { key: acct.key, body: codexBody(model, [user('*** Begin Patch [sim tool_call=apply_patch]')], false) });
      assert.equal(first.status, 200, first.text);
      const item = first.json.output.find((o: { type: string }) => o.type === 'custom_tool_call');
      assert.ok(item, `a custom_tool_call item: ${JSON.stringify(first.json.output)}`);
      assert.equal(item.name, 'apply_patch', 'the custom tool name');
      assert.equal(item.input, '*** Begin Patch', 'the raw input, not JSON');
      await chargedOnce(first.headers.get('x-gateway-request-id')!);

      const second = await call(stack.gateway.url, '/v1/responses', { key: acct.key, body: codexBody(model, [user('*** Begin Patch [sim tool_call=apply_patch]'), item, { type: 'custom_tool_call_output', call_id: item.call_id, output: 'Done! patch applied' }], false) });
      assert.equal(second.status, 200, second.text);
      const message = second.json.output.find((o: { type: string }) => o.type === 'message');
      assert.match(message.content[0].text, /^Tool said: Done! patch applied/, 'the custom tool output reached the model');
      await chargedOnce(second.headers.get('x-gateway-request-id')!);
    });
  }

  it('an unknown top-level name is still 400 unsupported_parameter naming it, on responses and chat', async () => {
    const acct = await newAccount();
    const r = await call(stack.gateway.url, '/v1/responses', { key: acct.key, body: { ...codexBody('sim-gpt', [user('hi')], false), frobnicate: true } });
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.error.code, 'unsupported_parameter', r.text);
    assert.equal(r.json.error.param, 'frobnicate', r.text);
    const c = await call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model: 'sim-gpt', messages: [{ role: 'user', content: 'hi' }], frobnicate: true } });
    assert.equal(c.status, 400, c.text);
    assert.equal(c.json.error.code, 'unsupported_parameter', c.text);
    assert.equal(c.json.error.param, 'frobnicate', c.text);
    assert.equal((await env.db('reservations').where({ account_id: acct.accountId })).length, 0, 'nothing was held');
  });

  it('a tool type in no vendor schema is refused naming the accepted ones', async () => {
    const acct = await newAccount();
    const r = await call(stack.gateway.url, '/v1/responses', { key: acct.key, body: { model: 'sim-gpt', input: 'hi', tools: [{ type: 'teleport' }] } });
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.error.param, 'tools.0.type', r.text);
    assert.match(r.json.error.message, /namespace/, 'the message names the accepted types');
  });
});

describe('chat completions with the newer vendor fields', () => {
  const NEW_FIELDS = {
    reasoning_effort: 'xhigh',
    verbosity: 'low',
    web_search_options: { search_context_size: 'low' },
    prediction: { type: 'content', content: 'Echo: hi' },
    prompt_cache_retention: '24h',
    prompt_cache_key: 'k',
    safety_identifier: 'user-1',
    service_tier: 'flex',
    store: false,
    n: 1,
  };

  it('passes natively to the OpenAI-kind upstream, nothing ignored', async () => {
    const acct = await newAccount();
    const r = await call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model: 'sim-gpt', messages: [{ role: 'developer', content: 'Be brief.' }, { role: 'user', content: 'hi [sim tokens=3]' }], ...NEW_FIELDS } });
    assert.equal(r.status, 200, r.text);
    assert.match(r.json.choices[0].message.content, /^Echo: hi/, r.text);
    assert.equal(r.headers.get('x-gateway-ignored-params'), null, 'a native route carries every field');
    await chargedOnce(r.headers.get('x-gateway-request-id')!);
  });

  it('translated to the Anthropic-kind upstream, lists what the canonical form cannot carry', async () => {
    const acct = await newAccount();
    const r = await call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model: 'sim-claude', messages: [{ role: 'user', content: 'hi [sim tokens=3]' }], ...NEW_FIELDS, tools: [{ type: 'custom', custom: { name: 'patch' } }] } });
    assert.equal(r.status, 200, r.text);
    const ignored = (r.headers.get('x-gateway-ignored-params') ?? '').split(', ');
    for (const name of ['tools;type=custom', 'prompt_cache_key', 'prompt_cache_retention', 'safety_identifier', 'verbosity', 'prediction', 'web_search_options', 'service_tier']) {
      assert.ok(ignored.includes(name), `x-gateway-ignored-params lists ${name}: ${ignored.join(', ')}`);
    }
    await chargedOnce(r.headers.get('x-gateway-request-id')!);
  });
});
});
