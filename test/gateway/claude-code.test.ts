import assert from 'node:assert/strict';
import { env } from '../setup/env';
import { call, newAccount, settled, useStack, type TestAccount } from '../helpers/stack';

// Claude Code's own request bodies over real HTTP (issue 29): its first prompt (a system message
// mid-conversation, adaptive thinking, max_tokens 32000, context_management, output_config, a
// server tool, streaming) answers natively and translated with what was ignored reported, a tool
// round trip completes, each request is charged once, and refusals are ones a person can act on.

const HEADERS = { 'anthropic-version': '2023-06-01', 'anthropic-beta': 'claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27' };
const BASH = { name: 'Bash', description: 'Executes a bash command', input_schema: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'], additionalProperties: false } };

/** The body Claude Code sends for `claude -p "<prompt>"` to a model it does not know. */
function firstPrompt(model: string, prompt: string, extra: Record<string, unknown> = {}) {
  return {
    model,
    max_tokens: 32000,
    stream: true,
    system: [
      { type: 'text', text: "You are Claude Code, Anthropic's official CLI for Claude.", cache_control: { type: 'ephemeral' } },
      { type: 'text', text: 'You are an interactive CLI tool that helps users with software engineering tasks.', cache_control: { type: 'ephemeral' } },
    ],
    messages: [
      { role: 'user', content: [{ type: 'text', text: '<system-reminder>As you answer, use the context below.</system-reminder>' }, { type: 'text', text: prompt, cache_control: { type: 'ephemeral' } }] },
      { role: 'system', content: 'Available agent types: general-purpose, statusline-setup. Available skills: none.' },
    ],
    tools: [BASH, { name: 'Read', description: 'Reads a file', input_schema: { type: 'object', properties: { file_path: { type: 'string' } }, required: ['file_path'] } }, { type: 'web_search_20250305', name: 'web_search', max_uses: 8 }],
    metadata: { user_id: 'user_abc_account__session_123' },
    thinking: { type: 'adaptive' },
    context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] },
    output_config: { effort: 'high' },
    ...extra,
  };
}

interface SseEvent {
  type: string;
  [k: string]: unknown;
}
const events = (text: string): SseEvent[] =>
  text
    .split('\n')
    .filter((l) => l.startsWith('data: '))
    .map((l) => JSON.parse(l.slice(6)) as SseEvent);
const streamedText = (evs: SseEvent[]) => evs.map((e) => ((e.delta as { text?: string } | undefined)?.text ?? '')).join('');
const toolUses = (evs: SseEvent[]) => evs.filter((e) => e.type === 'content_block_start' && (e.content_block as { type: string }).type === 'tool_use').map((e) => e.content_block as { id: string; name: string });

async function simLast(endpoint: string, marker: string): Promise<Record<string, unknown>> {
  const s = (await (await fetch(`${env.simulator.url}/_sim/stats`)).json()) as { last_requests: Array<{ endpoint: string; body: Record<string, unknown> }> };
  const hit = s.last_requests.reverse().find((r) => r.endpoint === endpoint && JSON.stringify(r.body).includes(marker));
  assert.ok(hit, `the simulator received the ${endpoint} request marked ${marker}`);
  return hit.body;
}

describe('Claude Code request bodies through the gateway (issue 29)', function () {
  const stack = useStack();
  let acct: TestAccount;
  before(async () => {
    acct = await newAccount({ credits: '100' });
  });
  const messages = (body: unknown, headers: Record<string, string> = HEADERS) => call(stack.gateway.url, '/v1/messages', { key: acct.key, headers, body });

  /** One hold, one charge, one release for the request. */
  async function chargedOnce(requestId: string) {
    const row = await settled(requestId);
    assert.equal(row.status, 'settled', `request ${requestId} is settled`);
    const kinds = (await env.db('ledger').where({ reservation_id: requestId }).select('kind')).map((l) => l.kind).sort();
    assert.deepEqual(kinds, ['charge', 'hold', 'release'], `request ${requestId} has one charge in the ledger`);
    return row;
  }

  it('the first prompt answers natively on sim-claude: max_tokens clamped and reported, everything else passed', async () => {
    const res = await messages(firstPrompt('sim-claude', 'Say hello native [sim tokens=3]'));
    assert.equal(res.status, 200, res.text);
    assert.equal(res.headers.get('x-gateway-ignored-params'), 'max_tokens;clamped=8192', 'only the clamp is reported on a native upstream');
    const evs = events(res.text);
    assert.equal(evs.at(-1)?.type, 'message_stop', 'the stream ends with message_stop');
    assert.match(streamedText(evs), /^Echo: /, 'the answer echoes the last user turn');
    const sent = await simLast('/v1/messages', 'Say hello native');
    assert.equal(sent.max_tokens, 8192, 'the upstream got the clamped limit');
    assert.deepEqual((sent.messages as Array<{ role: string }>).map((m) => m.role), ['user', 'system'], 'the mid-conversation system message passed at its place');
    for (const k of ['thinking', 'context_management', 'output_config', 'tools']) assert.ok(sent[k] !== undefined, `${k} passed to the native upstream`);
    const row = await chargedOnce(res.headers.get('x-gateway-request-id')!);
    assert.equal(row.completion_tokens, 3, 'usage as the simulator reported it');
    const g = (await call(stack.gateway.url, `/v1/generation?id=${res.headers.get('x-gateway-request-id')}`, { key: acct.key })).json.data;
    assert.deepEqual(g.route?.ignored_params, ['max_tokens;clamped=8192'], 'the request log records the clamp');
  });

  it('the first prompt answers translated on sim-gpt: mapped where chat has an equivalent, the rest named', async () => {
    const res = await messages(firstPrompt('sim-gpt', 'Say hello translated [sim tokens=3]'));
    assert.equal(res.status, 200, res.text);
    const ignored = (res.headers.get('x-gateway-ignored-params') ?? '').split(', ');
    for (const name of ['context_management', 'tools.web_search_20250305', 'system.cache_control', 'messages.content.cache_control', 'max_tokens;clamped=8192']) {
      assert.ok(ignored.includes(name), `${name} is reported as ignored (${ignored.join(', ')})`);
    }
    for (const mapped of ['thinking', 'output_config', 'messages', 'tools', 'metadata']) assert.ok(!ignored.includes(mapped), `${mapped} is mapped, not ignored`);
    const evs = events(res.text);
    assert.equal(evs.at(-1)?.type, 'message_stop', 'the translated stream ends with message_stop');
    assert.match(streamedText(evs), /^Echo: /, 'the answer echoes the last user turn');
    const sent = await simLast('/v1/chat/completions', 'Say hello translated');
    const roles = (sent.messages as Array<{ role: string; content: unknown }>).map((m) => m.role);
    assert.deepEqual(roles, ['system', 'user', 'system'], 'the mid-conversation system message stays at its place');
    assert.equal(sent.reasoning_effort, 'high', 'adaptive thinking at effort high → reasoning_effort high');
    assert.equal(sent.max_tokens, 8192, 'the clamped limit');
    assert.deepEqual((sent.tools as Array<{ function: { name: string } }>).map((t) => t.function.name), ['Bash', 'Read'], 'custom tools kept, the server tool dropped');
    assert.equal(sent.user, 'user_abc_account__session_123', 'metadata.user_id → user');
    const id = res.headers.get('x-gateway-request-id')!;
    await chargedOnce(id);
    const g = (await call(stack.gateway.url, `/v1/generation?id=${id}`, { key: acct.key })).json.data;
    assert.deepEqual(g.route?.ignored_params, ignored, 'the request log records what the header listed');
  });

  for (const model of ['sim-claude', 'sim-gpt']) {
    it(`a tool round trip on ${model}, streamed, each request charged once`, async () => {
      const ask = await messages(firstPrompt(model, `list the files ${model} [sim tool_call=Bash]`));
      assert.equal(ask.status, 200, ask.text);
      const calls = toolUses(events(ask.text));
      assert.equal(calls.length, 1, 'one tool call');
      assert.equal(calls[0].name, 'Bash', 'the custom tool is called');
      const first = firstPrompt(model, `list the files ${model} [sim tool_call=Bash]`);
      const answer = await messages({
        ...first,
        messages: [
          ...first.messages,
          { role: 'assistant', content: [{ type: 'tool_use', id: calls[0].id, name: 'Bash', input: { command: 'ls' } }] },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: calls[0].id, content: 'README.md package.json' }] },
        ],
      });
      assert.equal(answer.status, 200, answer.text);
      assert.match(streamedText(events(answer.text)), /^Tool said: README\.md/, 'the tool result reached the model');
      await chargedOnce(ask.headers.get('x-gateway-request-id')!);
      await chargedOnce(answer.headers.get('x-gateway-request-id')!);
    });
  }

  it('the other direction: a chat request on sim-claude maps reasoning_effort to adaptive thinking and keeps a later system message in place', async () => {
    const res = await call(stack.gateway.url, '/v1/chat/completions', {
      key: acct.key,
      body: {
        model: 'sim-claude',
        reasoning_effort: 'high',
        temperature: 0.5,
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'reverse direction [sim tokens=2]' },
          { role: 'assistant', content: 'ok' },
          { role: 'system', content: 'Now answer in French.' },
          { role: 'user', content: 'again' },
        ],
      },
    });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.headers.get('x-gateway-ignored-params'), 'temperature', 'Anthropic takes no temperature with thinking: reported');
    const sent = await simLast('/v1/messages', 'reverse direction');
    assert.deepEqual(sent.thinking, { type: 'adaptive' }, 'thinking on');
    assert.deepEqual(sent.output_config, { effort: 'high' }, 'at the effort asked for');
    assert.equal(sent.temperature, undefined, 'no temperature with thinking');
    assert.equal(sent.system, 'Be brief.', 'the leading system message is the system prompt');
    assert.deepEqual((sent.messages as Array<{ role: string }>).map((m) => m.role), ['user', 'assistant', 'system', 'user'], 'the later one stays at its place');
    await chargedOnce(res.headers.get('x-gateway-request-id')!);
  });

  it('count_tokens takes the first prompt (its count-tokens fields) with the system message mid-conversation', async () => {
    const { max_tokens: _m, stream: _s, metadata: _d, ...body } = firstPrompt('sim-claude', 'count me');
    const res = await call(stack.gateway.url, '/v1/messages/count_tokens', { key: acct.key, headers: HEADERS, body });
    assert.equal(res.status, 200, res.text);
    assert.ok(res.json.input_tokens > 20, `an estimate of the prompt and tools (${res.json.input_tokens})`);
  });

  it('an unknown top-level name is still 400 naming it, in Anthropic’s error shape', async () => {
    const res = await messages(firstPrompt('sim-claude', 'x', { frobnicate: true }));
    assert.equal(res.status, 400, res.text);
    assert.equal(res.json.type, 'error', 'Anthropic error shape');
    assert.equal(res.json.error.type, 'invalid_request_error', 'an invalid request');
    assert.match(res.json.error.message, /Unsupported parameter 'frobnicate'/, 'the message names the unknown field');
    const chat = await call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model: 'sim-gpt', messages: [{ role: 'user', content: 'x' }], frobnicate: 1 } });
    assert.equal(chat.json.error.code, 'unsupported_parameter', 'the gateway envelope carries the code');
    assert.equal(chat.json.error.param, 'frobnicate', 'and the param');
  });

  it('an unknown model is reported as such even when other fields are bad, on messages and count_tokens', async () => {
    const bad = { ...firstPrompt('no-such-model', 'x'), thinking: { type: 'sideways' }, frobnicate: 1 };
    const res = await messages(bad);
    assert.equal(res.status, 403, res.text);
    assert.match(res.json.error.message, /Model 'no-such-model' does not exist/, 'the model error, not a parameter one');
    const { max_tokens: _m, stream: _s, metadata: _d, ...count } = bad;
    const c = await call(stack.gateway.url, '/v1/messages/count_tokens', { key: acct.key, headers: HEADERS, body: count });
    assert.equal(c.status, 403, c.text);
    assert.match(c.json.error.message, /no-such-model/, 'count_tokens reports the model too');
  });

  it('two bad fields are both listed, with what is accepted; the first is error.param', async () => {
    const res = await messages(firstPrompt('sim-claude', 'x', { thinking: { type: 'sideways' }, output_config: { effort: 'extreme' } }));
    assert.equal(res.status, 400, res.text);
    assert.match(res.json.error.message, /thinking\.type.*expected one of 'enabled', 'adaptive', 'disabled', 'between_tools'/, 'the thinking types are named');
    assert.match(res.json.error.message, /output_config\.effort.*one of 'low', 'medium', 'high', 'xhigh', 'max'/, 'the efforts are named');
    assert.doesNotMatch(res.json.error.message, /Invalid input/, "never zod's bare message");
    const chat = await call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model: 'sim-gpt', messages: [{ role: 'wizard', content: 'x' }], temperature: 'hot' } });
    assert.equal(chat.status, 400, chat.text);
    assert.equal(chat.json.error.param, 'messages.0.role', 'error.param is the first refused field');
    assert.match(chat.json.error.message, /messages\.0\.role.*Also refused: 'temperature' \(expected number, got string\)/, 'the second is listed with what is accepted');
  });
});
