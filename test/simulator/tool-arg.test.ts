import assert from 'node:assert/strict';
import { env } from '../setup/env';

// The simulator's `tool_arg=KEY` control (simulator/README.md, Tool calls): the call's argument is
// named KEY and valued with the text after the directive, so a real client's own tool (Claude
// Code's Bash, Codex's exec_command) gets a usable argument although the client puts context of
// its own before the prompt in the same message.

async function post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<Record<string, unknown>> {
  const res = await fetch(`${env.simulator.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer sk-test', ...headers }, body: JSON.stringify(body) });
  const json = (await res.json()) as Record<string, unknown>;
  assert.equal(res.status, 200, `${path} answered ${res.status}: ${JSON.stringify(json)}`);
  return json;
}

describe('simulator: tool_arg names the tool call argument', () => {
  it('Anthropic: a user turn of several text blocks; the argument is the text after the directive', async () => {
    const answer = await post(
      '/v1/messages',
      {
        model: 'sim-claude',
        max_tokens: 100,
        tools: [{ name: 'Bash', input_schema: { type: 'object', properties: { command: { type: 'string' } } } }],
        messages: [{ role: 'user', content: [{ type: 'text', text: '<system-reminder>\nToday is a day.\n</system-reminder>\n\n' }, { type: 'text', text: '[sim tool_call=Bash tool_arg=command]  echo   hi' }] }],
      },
      { 'anthropic-version': '2023-06-01' },
    );
    assert.equal(answer.stop_reason, 'tool_use', 'the answer is a tool call');
    const block = (answer.content as Array<Record<string, unknown>>).find((b) => b.type === 'tool_use');
    assert.deepEqual(block?.input, { command: 'echo hi' }, 'only the text after the directive, whitespace collapsed, under the named key');
  });

  it('Responses and chat: the same rule; without tool_arg the argument stays {"input": <the whole message>}', async () => {
    const tools = [{ type: 'function', name: 'exec_command', parameters: { type: 'object' } }];
    const responses = await post('/v1/responses', { model: 'sim-gpt', tools, input: [{ role: 'user', content: 'run [sim tool_call=exec_command tool_arg=cmd] echo 42' }] });
    const call = (responses.output as Array<Record<string, unknown>>).find((i) => i.type === 'function_call');
    assert.equal(call?.arguments, '{"cmd":"echo 42"}', 'Responses: the named argument');
    const chat = await post('/v1/chat/completions', { model: 'sim-gpt', tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }], messages: [{ role: 'user', content: 'Paris weather [sim tool_call=f]' }] });
    const message = (chat.choices as Array<{ message: { tool_calls: Array<{ function: { arguments: string } }> } }>)[0]!.message;
    assert.equal(message.tool_calls[0]!.function.arguments, '{"input":"Paris weather"}', 'chat without tool_arg: unchanged');
  });
});
