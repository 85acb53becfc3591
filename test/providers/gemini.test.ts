import assert from 'node:assert/strict';
import type { CanonicalRequest } from '../../providers/canonical';
import { geminiGenerate, SKIP_SIGNATURE } from '../../providers/gemini/generate';
import { azureChat } from '../../providers/azure-openai';
import type { Provider } from '../../domain/catalog/model';

// The gemini adapter's translation (providers/gemini/generate.ts) and azure-openai's path: what
// goes where, what is listed as ignored, how finish reasons and usage come back.

const base = (over: Partial<CanonicalRequest> = {}): CanonicalRequest => ({ messages: [], maxTokens: 100, stop: [], tools: [], ignored: [], ...over });
const provider = (settings: Record<string, unknown>): Provider => ({ id: 'p', kind: 'azure-openai', base_url: 'http://x/', api_keys: [], credits_per_cost_unit: '1', settings });

describe('gemini adapter', function () {
  it('translates a conversation with a tool round trip', () => {
    const req = base({
      messages: [
        { role: 'system', text: 'Be brief.' },
        { role: 'user', parts: [{ type: 'text', text: 'weather?' }, { type: 'image', url: 'data:image/png;base64,AAAA' }] },
        { role: 'assistant', parts: [{ type: 'text', text: '' }], toolCalls: [{ id: 'c1', name: 'weather', arguments: '{"city":"Paris"}' }, { id: 'c2', name: 'time', arguments: '{}' }] },
        { role: 'tool', toolCallId: 'c1', content: 'sunny' },
        { role: 'tool', toolCallId: 'c2', content: 'noon' },
        { role: 'system', text: 'Answer in French.' },
      ],
      stop: ['a', 'b', 'c', 'd', 'e', 'f'],
      temperature: 0.2,
      tools: [{ name: 'weather', parameters: { type: 'object' } }],
      toolChoice: { name: 'weather' },
      jsonSchema: { name: 'x', schema: { type: 'object' } },
      user: 'u1',
      reasoningEffort: 'high',
    });
    const body = geminiGenerate.request(req, 'gemini-3-pro', false) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    assert.deepEqual(body.systemInstruction, { parts: [{ text: 'Be brief.\n\nAnswer in French.' }] }, 'every system message in the system instruction');
    assert.deepEqual(body.contents[0], { role: 'user', parts: [{ text: 'weather?' }, { inlineData: { mimeType: 'image/png', data: 'AAAA' } }] }, 'the user turn');
    assert.deepEqual(body.contents[1].parts[0], { functionCall: { id: 'c1', name: 'weather', args: { city: 'Paris' } }, thoughtSignature: SKIP_SIGNATURE }, 'a Gemini 3 model: the sentinel on the first call');
    assert.equal(body.contents[1].parts[1].thoughtSignature, undefined, 'not on the second');
    assert.deepEqual(body.contents[2], { role: 'user', parts: [{ functionResponse: { id: 'c1', name: 'weather', response: { output: 'sunny' } } }, { functionResponse: { id: 'c2', name: 'time', response: { output: 'noon' } } }] }, 'both results in one user turn, named after their calls');
    assert.deepEqual(body.generationConfig, { maxOutputTokens: 100, temperature: 0.2, stopSequences: ['a', 'b', 'c', 'd', 'e'], responseMimeType: 'application/json', responseJsonSchema: { type: 'object' } }, 'the generation config');
    assert.deepEqual(body.toolConfig, { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['weather'] } }, 'a named tool');
    assert.deepEqual(req.ignored, ['stop_sequences;truncated=5', 'reasoning_effort', 'user'], 'what Gemini cannot carry');
    const older = geminiGenerate.request(base({ messages: req.messages }), 'gemini-2.5-flash', false) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    assert.equal(older.contents[1].parts[0].thoughtSignature, undefined, 'no sentinel before Gemini 3');
    assert.equal(geminiGenerate.path(provider({}), 'gemini-2.5-flash', true), 'v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse', 'the stream path');
  });

  it('maps finish reasons and usage, thoughts and tool-use prompts included', () => {
    const usageMetadata = { promptTokenCount: 10, candidatesTokenCount: 4, thoughtsTokenCount: 3, cachedContentTokenCount: 6, toolUsePromptTokenCount: 2 };
    const r = geminiGenerate.response({ responseId: 'r1', modelVersion: 'g', candidates: [{ content: { parts: [{ text: 'hm', thought: true }, { text: 'hello' }] }, finishReason: 'MAX_TOKENS' }], usageMetadata });
    assert.deepEqual([r.text, r.reasoning, r.finish, r.id], ['hello', 'hm', 'length', 'r1'], 'text, reasoning, finish, id');
    assert.deepEqual(r.usage?.tokens, { prompt_tokens: 12, completion_tokens: 7, cached_tokens: 6, cache_write_tokens: 0, reasoning_tokens: 3 }, 'usage');
    assert.equal(r.usage?.cost, null, 'Gemini reports no cost');
    const call = geminiGenerate.response({ candidates: [{ content: { parts: [{ functionCall: { name: 'f', args: { a: 1 } } }] }, finishReason: 'STOP' }] });
    assert.equal(call.finish, 'tool_calls', 'STOP with a call');
    assert.ok(call.toolCalls[0]?.id.startsWith('call_') && call.toolCalls[0].arguments === '{"a":1}', `an id made up: ${JSON.stringify(call.toolCalls)}`);
    assert.equal(geminiGenerate.response({ candidates: [{ finishReason: 'SAFETY' }] }).finish, 'content_filter', 'safety');
    assert.equal(geminiGenerate.response({ promptFeedback: { blockReason: 'SAFETY' } }).finish, 'content_filter', 'a blocked prompt');
    const stopped = geminiGenerate.response({ candidates: [{ content: { parts: [{ text: 'one' }] }, finishReason: 'STOP' }] }, ['two']);
    assert.deepEqual([stopped.finish, stopped.stopSequence], ['stop_sequence', 'two'], 'the only sequence asked');
    assert.equal(geminiGenerate.keyRejected?.({ error: { code: 400, details: [{ reason: 'API_KEY_INVALID' }] } }), true, 'a bad key');
    assert.equal(geminiGenerate.keyRejected?.({ error: { code: 400, message: 'bad' } }), false, 'a bad request');
  });

  it('parses a stream of whole responses', () => {
    const parse = geminiGenerate.streamParser([]);
    const ev = (v: unknown) => parse({ raw: '', data: JSON.stringify(v), event: null });
    assert.deepEqual(ev({ responseId: 'r', modelVersion: 'g', candidates: [{ content: { parts: [{ text: 'he' }] } }] }), [{ type: 'start', id: 'r', model: 'g' }, { type: 'text', text: 'he' }], 'start and text');
    const call = ev({ candidates: [{ content: { parts: [{ functionCall: { id: 'x', name: 'f', args: {} } }] } }] });
    assert.deepEqual(call, [{ type: 'tool_call', index: 0, id: 'x', name: 'f' }, { type: 'tool_args', index: 0, fragment: '{}' }], 'a whole call');
    const last = ev({ candidates: [{ content: { parts: [{ text: '' }] }, finishReason: 'STOP' }], usageMetadata: { promptTokenCount: 5, candidatesTokenCount: 1 } });
    assert.deepEqual(last.map((e) => e.type), ['finish', 'usage'], 'finish and usage at the end');
    assert.equal(last[0]?.type === 'finish' && last[0].reason, 'tool_calls', 'the answer called a function');
    assert.throws(() => ev({ error: { message: 'boom' } }), /boom/, 'an error event breaks the stream');
  });
});

describe('azure-openai adapter', function () {
  it('posts to the deployment with the provider’s API version and the api-key header', () => {
    assert.equal(azureChat.path(provider({ api_version: '2024-10-21' }), 'gpt 4o', false), 'openai/deployments/gpt%204o/chat/completions?api-version=2024-10-21', 'the path');
    assert.deepEqual(azureChat.authHeaders('k'), { 'api-key': 'k' }, 'the header');
    assert.equal(azureChat.native, 'chat', 'chat passes through');
  });
});
