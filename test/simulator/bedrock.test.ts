import assert from 'node:assert/strict';
import { BedrockRuntimeClient, ConverseCommand, ConverseStreamCommand, type ConverseCommandInput } from '@aws-sdk/client-bedrock-runtime';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { simSecretFor } from '../../simulator/bedrock';
import { env } from '../setup/env';

// The simulator's Bedrock Converse routes against the official AWS client: SigV4 checked (a wrong
// secret or a missing signature refused as Bedrock refuses them), validation in Bedrock's words,
// event-stream frames the client decodes, exceptions the client raises by name.

const KEY = 'AKIASIMULATORTEST01';
const MODEL = 'anthropic.claude-3-haiku-20240307-v1:0';
const client = (secret = simSecretFor(KEY)) =>
  new BedrockRuntimeClient({ endpoint: env.simulator.url, region: 'us-east-1', credentials: { accessKeyId: KEY, secretAccessKey: secret }, maxAttempts: 1, requestHandler: new NodeHttpHandler({}) });
const input = (text: string, extra: Partial<ConverseCommandInput> = {}): ConverseCommandInput => ({ modelId: MODEL, messages: [{ role: 'user', content: [{ text }] }], ...extra });

/** The exception the client raised, by name, status and message. */
async function refusal(p: Promise<unknown>): Promise<{ name: string; status: number | undefined; message: string }> {
  try {
    await p;
  } catch (err) {
    const e = err as Error & { $metadata?: { httpStatusCode?: number } };
    return { name: e.name, status: e.$metadata?.httpStatusCode, message: e.message };
  }
  return assert.fail('the call was answered');
}

describe('simulator: Amazon Bedrock Converse', () => {
  it('answers a signed Converse call: text, stop reason, usage with cache fields', async () => {
    const out = await client().send(new ConverseCommand(input('hello there [sim tokens=3 cached=2]', { system: [{ text: 'brief' }], inferenceConfig: { maxTokens: 10 } })));
    assert.deepEqual(out.output?.message?.content, [{ text: 'Echo: hello there' }], 'the echo');
    assert.equal(out.stopReason, 'end_turn', 'stopReason');
    assert.equal(out.usage?.cacheReadInputTokens, 2, 'cache reads');
    assert.equal(out.usage?.totalTokens, (out.usage?.inputTokens ?? 0) + 3 + 2, 'total = input + output + cache');
  });

  it('streams event-stream frames the client decodes, and an in-stream exception by name', async () => {
    const out = await client().send(new ConverseStreamCommand(input('one two [sim tokens=3]')));
    const names: string[] = [];
    let text = '';
    for await (const ev of out.stream!) {
      names.push(...Object.keys(ev));
      text += ev.contentBlockDelta?.delta?.text ?? '';
    }
    assert.deepEqual(names, ['messageStart', 'contentBlockDelta', 'contentBlockDelta', 'contentBlockDelta', 'contentBlockStop', 'messageStop', 'metadata'], 'the event sequence');
    assert.equal(text, 'Echo: one two', 'the text deltas');
    const failing = await client().send(new ConverseStreamCommand(input('x y z [sim drop_after=1 error_code=throttlingException]')));
    const err = await refusal(
      (async () => {
        for await (const ev of failing.stream!) void ev;
      })(),
    );
    assert.equal(err.name, 'ThrottlingException', `the in-stream exception: ${JSON.stringify(err)}`);
  });

  it('refuses a wrong secret, an unsigned call and a rejected key as Bedrock does', async () => {
    const wrong = await refusal(client('notTheRightSecret000').send(new ConverseCommand(input('hi'))));
    assert.deepEqual([wrong.name, wrong.status], ['InvalidSignatureException', 403], `wrong secret: ${JSON.stringify(wrong)}`);
    const unsigned = await fetch(`${env.simulator.url}/model/${encodeURIComponent(MODEL)}/converse`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(input('hi')) });
    assert.equal(unsigned.status, 403, 'unsigned: 403');
    assert.match(unsigned.headers.get('x-amzn-errortype') ?? '', /^MissingAuthenticationTokenException:/, 'the error type header');
    assert.deepEqual(await unsigned.json(), { message: 'Missing Authentication Token' }, 'the {message} body');
    const rejected = await refusal(client().send(new ConverseCommand(input(`hi [sim reject_keys=${KEY}]`))));
    assert.deepEqual([rejected.name, rejected.status], ['UnrecognizedClientException', 403], `rejected key: ${JSON.stringify(rejected)}`);
  });

  it('validates as Bedrock does and maps the status control to its exceptions', async () => {
    const first = await refusal(client().send(new ConverseCommand({ modelId: MODEL, messages: [{ role: 'assistant', content: [{ text: 'hi' }] }] })));
    assert.deepEqual([first.name, first.status], ['ValidationException', 400], 'a conversation must start with a user message');
    assert.match(first.message, /must start with a user message/, first.message);
    const temp = await refusal(client().send(new ConverseCommand(input('hi', { inferenceConfig: { temperature: 3 } }))));
    assert.match(temp.message, /at 'inferenceConfig.temperature' failed to satisfy constraint/, temp.message);
    const tools = await refusal(
      client().send(new ConverseCommand({ modelId: MODEL, messages: [{ role: 'user', content: [{ text: 'hi' }] }, { role: 'assistant', content: [{ toolUse: { toolUseId: 't1', name: 'f', input: {} } }] }, { role: 'user', content: [{ toolResult: { toolUseId: 't1', content: [{ text: 'r' }] } }] }] })),
    );
    assert.match(tools.message, /toolConfig field must be defined/, tools.message);
    for (const [status, name] of [[429, 'ThrottlingException'], [408, 'ModelTimeoutException'], [503, 'ServiceUnavailableException'], [403, 'AccessDeniedException']] as const) {
      const e = await refusal(client().send(new ConverseCommand(input(`hi [sim status=${status}]`))));
      assert.deepEqual([e.name, e.status], [name, status], `status ${status}: ${JSON.stringify(e)}`);
    }
  });
});
