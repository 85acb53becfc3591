import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { call, newAccount, settled, useStack, type TestAccount } from '../helpers/stack';

// Every client dialect through the official SDKs, against every upstream wire format.

interface Answer {
  text: string;
  toolCalls: Array<{ name: string; args: Record<string, unknown> }>;
  promptTokens: number;
  completionTokens: number;
  requestId: string;
  bodyId: string;
  headerCost: string | null;
}

const WEATHER = { name: 'get_weather', description: 'Weather for a city', parameters: { type: 'object', properties: { input: { type: 'string' } }, required: ['input'] } };

type Client = { openai: OpenAI; anthropic: Anthropic };

const DIALECTS: Record<string, (c: Client, model: string, prompt: string, stream: boolean, tools: boolean) => Promise<Answer>> = {
  async chat({ openai }, model, prompt, stream, tools) {
    const params = { model, messages: [{ role: 'system' as const, content: 'Be brief.' }, { role: 'user' as const, content: prompt }], max_tokens: 200, ...(tools ? { tools: [{ type: 'function' as const, function: WEATHER }] } : {}) };
    if (!stream) {
      const { data, response } = await openai.chat.completions.create(params).withResponse();
      const m = data.choices[0].message;
      return {
        text: m.content ?? '',
        toolCalls: (m.tool_calls ?? []).map((t) => ({ name: (t as { function: { name: string } }).function.name, args: JSON.parse((t as { function: { arguments: string } }).function.arguments) })),
        promptTokens: data.usage!.prompt_tokens,
        completionTokens: data.usage!.completion_tokens,
        requestId: response.headers.get('x-gateway-request-id')!,
        bodyId: data.id,
        headerCost: response.headers.get('x-gateway-cost'),
      };
    }
    const { data: s, response } = await openai.chat.completions.create({ ...params, stream: true }).withResponse();
    let text = '';
    const calls = new Map<number, { name: string; args: string }>();
    let usage: OpenAI.CompletionUsage | undefined;
    let id = '';
    for await (const chunk of s) {
      id = chunk.id;
      const d = chunk.choices[0]?.delta;
      text += d?.content ?? '';
      for (const t of d?.tool_calls ?? []) {
        const c = calls.get(t.index) ?? { name: '', args: '' };
        c.name += t.function?.name ?? '';
        c.args += t.function?.arguments ?? '';
        calls.set(t.index, c);
      }
      if (chunk.usage) usage = chunk.usage;
    }
    return { text, toolCalls: [...calls.values()].map((c) => ({ name: c.name, args: JSON.parse(c.args) })), promptTokens: usage!.prompt_tokens, completionTokens: usage!.completion_tokens, requestId: response.headers.get('x-gateway-request-id')!, bodyId: id, headerCost: response.headers.get('x-gateway-cost') };
  },

  async messages({ anthropic }, model, prompt, stream, tools) {
    const params = { model, max_tokens: 200, system: 'Be brief.', messages: [{ role: 'user' as const, content: prompt }], ...(tools ? { tools: [{ name: WEATHER.name, description: WEATHER.description, input_schema: WEATHER.parameters as Anthropic.Tool.InputSchema }] } : {}) };
    if (!stream) {
      const { data, response } = await anthropic.messages.create(params).withResponse();
      return {
        text: data.content.map((b) => (b.type === 'text' ? b.text : '')).join(''),
        toolCalls: data.content.filter((b) => b.type === 'tool_use').map((b) => ({ name: (b as Anthropic.ToolUseBlock).name, args: (b as Anthropic.ToolUseBlock).input as Record<string, unknown> })),
        promptTokens: data.usage.input_tokens + (data.usage.cache_read_input_tokens ?? 0) + (data.usage.cache_creation_input_tokens ?? 0),
        completionTokens: data.usage.output_tokens,
        requestId: response.headers.get('x-gateway-request-id')!,
        bodyId: data.id,
        headerCost: response.headers.get('x-gateway-cost'),
      };
    }
    const s = anthropic.messages.stream(params);
    const { response } = await s.withResponse();
    const m = await s.finalMessage();
    return {
      text: m.content.map((b) => (b.type === 'text' ? b.text : '')).join(''),
      toolCalls: m.content.filter((b) => b.type === 'tool_use').map((b) => ({ name: (b as Anthropic.ToolUseBlock).name, args: (b as Anthropic.ToolUseBlock).input as Record<string, unknown> })),
      promptTokens: m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0) + (m.usage.cache_creation_input_tokens ?? 0),
      completionTokens: m.usage.output_tokens,
      requestId: response.headers.get('x-gateway-request-id')!,
      bodyId: m.id,
      headerCost: response.headers.get('x-gateway-cost'),
    };
  },

  async responses({ openai }, model, prompt, stream, tools) {
    const params = { model, instructions: 'Be brief.', input: prompt, max_output_tokens: 200, ...(tools ? { tools: [{ type: 'function' as const, strict: false, ...WEATHER }] } : {}) };
    let r: OpenAI.Responses.Response;
    let response: Response;
    if (!stream) {
      ({ data: r, response } = await openai.responses.create(params).withResponse());
    } else {
      const res = await openai.responses.create({ ...params, stream: true }).withResponse();
      response = res.response;
      let done: OpenAI.Responses.Response | undefined;
      const types: string[] = [];
      for await (const ev of res.data) {
        types.push(ev.type);
        if (ev.type === 'response.completed') done = ev.response;
      }
      assert.equal(types[0], 'response.created', 'the stream opens with response.created');
      assert.equal(types.at(-1), 'response.completed', 'the stream ends with response.completed');
      r = done!;
    }
    const calls = r.output.filter((o) => o.type === 'function_call') as OpenAI.Responses.ResponseFunctionToolCall[];
    return {
      text: r.output_text ?? r.output.flatMap((o) => (o.type === 'message' ? o.content.map((c) => (c.type === 'output_text' ? c.text : '')) : [])).join(''),
      toolCalls: calls.map((c) => ({ name: c.name, args: JSON.parse(c.arguments) })),
      promptTokens: r.usage!.input_tokens,
      completionTokens: r.usage!.output_tokens,
      requestId: response.headers.get('x-gateway-request-id')!,
      bodyId: r.id,
      headerCost: response.headers.get('x-gateway-cost'),
    };
  },
};

const UPSTREAMS = { openai: 'sim-gpt', anthropic: 'sim-claude' };

describe('dialects × upstreams through the official SDKs', function () {
  const stack = useStack();
  let acct: TestAccount;
  let client: Client;
  before(async () => {
    acct = await newAccount({ credits: '100' });
    client = {
      openai: new OpenAI({ apiKey: acct.key, baseURL: `${stack.gateway.url}/v1`, maxRetries: 0 }),
      anthropic: new Anthropic({ apiKey: acct.key, baseURL: stack.gateway.url, maxRetries: 0 }),
    };
  });

  const generation = async (id: string) => (await call(stack.gateway.url, `/v1/generation?id=${encodeURIComponent(id)}`, { key: acct.key })).json.data;

  for (const [dialect, ask] of Object.entries(DIALECTS)) {
    for (const [upstream, model] of Object.entries(UPSTREAMS)) {
      for (const stream of [false, true]) {
        const mode = stream ? 'streaming' : 'non-streaming';
        it(`${dialect} → ${upstream} upstream, ${mode}: content, usage and the billed credits`, async () => {
          const a = await ask(client, model, 'hello from the dialect test [sim tokens=6 cost=auto]', stream, false);
          assert.match(a.text, /^Echo: hello from the dialect test/, `the answer echoes the prompt: ${a.text}`);
          assert.equal(a.completionTokens, 6, 'the requested 6 completion tokens are reported');
          assert.ok(a.promptTokens > 0, `prompt tokens counted: ${a.promptTokens}`);
          assert.equal(a.toolCalls.length, 0, 'no tool calls for a plain prompt');
          const row = await settled(a.requestId);
          assert.equal(row.model, model, 'the request row names the model');
          assert.equal(row.completion_tokens, 6, 'the request row records the completion tokens');
          assert.equal(row.prompt_tokens, a.promptTokens, 'the request row records the prompt tokens the client saw');
          assert.equal(row.billing_source, 'provider_cost', 'billed from the provider cost');
          const g = await generation(a.requestId);
          assert.ok(g.cost > 0, `the generation has a cost: ${g.cost}`);
          assert.equal(g.billing_source, 'provider_cost', 'the generation is billed from the provider cost');
          if (stream) assert.equal(a.headerCost, null, 'a stream carries no x-gateway-cost header');
          else {
            assert.equal(Number(a.headerCost), g.cost, 'x-gateway-cost is the generation cost');
            // The body id is a lookup id for non-streaming answers.
            assert.equal((await generation(a.bodyId)).id, a.requestId, 'the body id looks up the same generation');
          }
        });

        it(`${dialect} → ${upstream} upstream, ${mode}: tool calls`, async () => {
          const a = await ask(client, model, 'Paris weather [sim tool_call=get_weather]', stream, true);
          assert.equal(a.toolCalls.length, 1, 'one tool call');
          assert.equal(a.toolCalls[0].name, 'get_weather', 'the tool call names get_weather');
          assert.match(String(a.toolCalls[0].args.input), /Paris weather/, 'the tool call arguments carry the prompt');
          assert.equal((await settled(a.requestId)).status, 'settled', 'the tool-call request is settled');
        });
      }
    }
  }

  it('messages-dialect errors use the vendor shape, authentication included', async () => {
    const bad = new Anthropic({ apiKey: 'gw_ai_nope', baseURL: stack.gateway.url, maxRetries: 0 });
    await assert.rejects(bad.messages.create({ model: 'sim-claude', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }), (e: InstanceType<typeof Anthropic.APIError>) => {
      assert.equal(e.status, 401, 'a bad key is refused with 401');
      assert.equal((e.error as { type: string }).type, 'error', 'the body is an Anthropic error envelope');
      assert.equal((e.error as { error: { type: string } }).error.type, 'authentication_error', 'the error type is authentication_error');
      return true;
    });
    const r = await call(stack.gateway.url, '/v1/messages', { key: acct.key, body: { model: 'sim-claude', messages: [{ role: 'user', content: 'x' }] } });
    assert.equal(r.status, 400, 'a request without max_tokens is refused with 400');
    assert.deepEqual(Object.keys(r.json), ['type', 'error'], 'the body is an Anthropic error envelope');
    assert.equal(r.json.error.type, 'invalid_request_error', 'the error type is invalid_request_error');
    assert.match(r.json.error.message, /max_tokens/, 'the error names the field');
  });

  it('tool results go back to either upstream from the messages dialect', async () => {
    for (const model of Object.values(UPSTREAMS)) {
      const m = await client.anthropic.messages.create({
        model,
        max_tokens: 50,
        tools: [{ name: WEATHER.name, input_schema: WEATHER.parameters as Anthropic.Tool.InputSchema }],
        messages: [
          { role: 'user', content: 'weather?' },
          { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { input: 'Paris' } }] },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'sunny and 21C' }] },
        ],
      });
      const text = m.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
      assert.match(text, /^Tool said: sunny/, `the ${model} upstream saw the tool result: ${text}`);
    }
  });

  it('responses-dialect function_call_output goes back to either upstream', async () => {
    for (const model of Object.values(UPSTREAMS)) {
      const r = await client.openai.responses.create({
        model,
        tools: [{ type: 'function', strict: false, ...WEATHER }],
        input: [
          { role: 'user', content: 'weather?' },
          { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"input":"Paris"}' },
          { type: 'function_call_output', call_id: 'call_1', output: 'rainy' },
        ],
      });
      assert.match(r.output_text, /^Tool said: rainy/, `the ${model} upstream saw the function output: ${r.output_text}`);
    }
  });

  it('a messages stream the client closes early is settled as cancelled', async () => {
    const ctl = new AbortController();
    const res = await fetch(`${stack.gateway.url}/v1/messages`, {
      method: 'POST',
      signal: ctl.signal,
      headers: { 'x-api-key': acct.key, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'sim-gpt', max_tokens: 300, stream: true, messages: [{ role: 'user', content: 'long [sim tokens=200 chunk_delay=20]' }] }),
    });
    const id = res.headers.get('x-gateway-request-id')!;
    const reader = res.body!.getReader();
    let got = '';
    while (!got.includes('text_delta')) got += new TextDecoder().decode((await reader.read()).value);
    ctl.abort();
    const row = await settled(id);
    assert.equal(row.status, 'cancelled', 'the closed stream is settled as cancelled');
    assert.ok(Number(row.charge) > 0, `a cancelled stream is charged for what was sent: ${row.charge}`);
  });

  it('bodies carry no gateway fields in the messages and responses dialects', async () => {
    const m = await call(stack.gateway.url, '/v1/messages', { key: acct.key, headers: { 'anthropic-version': '2023-06-01' }, body: { model: 'sim-gpt', max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] } });
    assert.deepEqual(Object.keys(m.json.usage).sort(), ['cache_creation_input_tokens', 'cache_read_input_tokens', 'input_tokens', 'output_tokens'], 'the messages usage has only the vendor fields');
    assert.equal(m.json.cost, undefined, 'no gateway cost field in the messages body');
    const r = await call(stack.gateway.url, '/v1/responses', { key: acct.key, body: { model: 'sim-claude', input: 'hi' } });
    assert.deepEqual(Object.keys(r.json.usage).sort(), ['input_tokens', 'input_tokens_details', 'output_tokens', 'output_tokens_details', 'total_tokens'], 'the responses usage has only the vendor fields');
    assert.ok(r.headers.get('x-gateway-cost'), 'the answer carries x-gateway-cost');
  });
});
