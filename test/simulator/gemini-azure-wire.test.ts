import assert from 'node:assert/strict';
import OpenAI, { AzureOpenAI } from 'openai';
import { env } from '../setup/env';

// The simulator speaks Gemini's and Azure OpenAI's wire formats as their own clients expect:
// Google's @google/genai and the openai package's AzureOpenAI client, pointed at the simulator,
// get text, a function call, a stream and the vendor's errors back (simulator/README.md).

// @google/genai is an ES module (its types say so): imported dynamically from this CommonJS suite.
type GenAI = typeof import('@google/genai', { with: { 'resolution-mode': 'import' } });

describe('simulator: Gemini wire format through Google’s own client', function () {
  let genai: GenAI;
  before(async () => {
    genai = await import('@google/genai');
  });
  const ai = () => new genai.GoogleGenAI({ apiKey: 'sim-gemini-key', httpOptions: { baseUrl: env.simulator.url } });

  it('generateContent: text, the system instruction counted, usage metadata', async () => {
    const r = await ai().models.generateContent({
      model: 'sim-gemini-2026-01-15',
      contents: 'hello gemini [sim tokens=3 cached=2]',
      config: { systemInstruction: 'be brief', maxOutputTokens: 50, temperature: 0.5 },
    });
    assert.equal(r.text, 'Echo: hello gemini', 'the reply, three tokens');
    assert.equal(r.candidates?.[0]?.finishReason, 'STOP', 'a natural stop');
    const u = r.usageMetadata;
    assert.equal(u?.candidatesTokenCount, 3, 'three visible tokens');
    assert.equal(u?.cachedContentTokenCount, 2, 'cached tokens reported apart');
    // chars: 'be brief' (8) + the user text (35) = 43 → 11, plus 4 × 2 contents
    assert.equal(u?.promptTokenCount, 19, `prompt tokens by the chat rule: ${JSON.stringify(u)}`);
    assert.equal(u?.totalTokenCount, 22, 'prompt + candidates');
    assert.equal(r.modelVersion, 'sim-gemini-2026-01-15', 'the model named');
  });

  it('a function call, its response answered with text; stop sequences and the token limit', async () => {
    const tools = [{ functionDeclarations: [{ name: 'weather', description: 'the weather', parametersJsonSchema: { type: 'object', properties: { input: { type: 'string' } } } }] }];
    const asked = { role: 'user', parts: [{ text: 'Paris weather [sim tool_call=weather]' }] };
    const r = await ai().models.generateContent({ model: 'sim-gemini', contents: [asked], config: { tools, toolConfig: { functionCallingConfig: { mode: genai.FunctionCallingConfigMode.ANY } } } });
    const call = r.functionCalls?.[0];
    assert.deepEqual({ name: call?.name, args: call?.args }, { name: 'weather', args: { input: 'Paris weather' } }, 'the call and its arguments');
    assert.equal(r.candidates?.[0]?.finishReason, 'STOP', 'Gemini ends a call with STOP');
    const back = await ai().models.generateContent({
      model: 'sim-gemini',
      contents: [asked, { role: 'model', parts: [{ functionCall: { name: 'weather', args: call?.args } }] }, { role: 'user', parts: [{ functionResponse: { name: 'weather', response: { output: 'sunny and warm' } } }] }],
      config: { tools },
    });
    assert.ok(back.text?.startsWith('Tool said: sunny and warm'), `the function response answered: ${back.text}`);
    const stopped = await ai().models.generateContent({ model: 'sim-gemini', contents: 'one two three four [sim tokens=10]', config: { stopSequences: ['three'] } });
    assert.equal(stopped.text, 'Echo: one two', 'cut before the stop sequence, which is left out');
    const cut = await ai().models.generateContent({ model: 'sim-gemini', contents: 'one two three four', config: { maxOutputTokens: 2 } });
    assert.equal(cut.candidates?.[0]?.finishReason, 'MAX_TOKENS', 'the token limit');
  });

  it('generateContentStream: one chunk per token, the last with the finish reason and the usage', async () => {
    const chunks = [];
    for await (const c of await ai().models.generateContentStream({ model: 'sim-gemini', contents: 'stream this please [sim tokens=4 reasoning=5]', config: { thinkingConfig: { includeThoughts: true } } })) chunks.push(c);
    const thought = chunks[0]?.candidates?.[0]?.content?.parts?.[0];
    assert.equal(thought?.thought, true, 'a thought summary first, when asked for');
    assert.equal(chunks.map((c) => c.text ?? '').join(''), 'Echo: stream this please', 'the text of the chunks');
    const last = chunks.at(-1);
    assert.equal(last?.candidates?.[0]?.finishReason, 'STOP', 'the finish reason in the last chunk');
    assert.deepEqual([last?.usageMetadata?.candidatesTokenCount, last?.usageMetadata?.thoughtsTokenCount], [4, 5], 'visible and thought tokens apart');
  });

  it('errors: Google’s error body, a bad key is a 400 API_KEY_INVALID, a missing key 403', async () => {
    const fail = async (fn: () => Promise<unknown>) => {
      try {
        await fn();
      } catch (err) {
        assert.ok(err instanceof genai.ApiError, `an ApiError: ${String(err)}`);
        return { status: err.status, body: JSON.parse(err.message) as { error: { code: number; status: string; message: string; details?: Array<{ reason?: string }> } } };
      }
      throw new Error('the call succeeded');
    };
    const limited = await fail(() => ai().models.generateContent({ model: 'sim-gemini', contents: 'hi [sim status=429]' }));
    assert.deepEqual([limited.status, limited.body.error.code, limited.body.error.status], [429, 429, 'RESOURCE_EXHAUSTED'], 'a rate limit');
    const badKey = await fail(() => ai().models.generateContent({ model: 'sim-gemini', contents: 'hi [sim reject_keys=sim-gemini-key]' }));
    assert.deepEqual([badKey.status, badKey.body.error.status, badKey.body.error.details?.[0]?.reason], [400, 'INVALID_ARGUMENT', 'API_KEY_INVALID'], 'a rejected key');
    const invalid = await fail(() => ai().models.generateContent({ model: 'sim-gemini', contents: 'hi', config: { stopSequences: ['a', 'b', 'c', 'd', 'e', 'f'] } }));
    assert.equal(invalid.status, 400, 'at most 5 stop sequences');
    const res = await fetch(`${env.simulator.url}/v1beta/models/sim-gemini:generateContent`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ contents: [{ parts: [{ text: 'hi' }] }] }) });
    assert.equal(res.status, 403, 'no key: permission denied');
    assert.equal(((await res.json()) as { error: { status: string } }).error.status, 'PERMISSION_DENIED', 'the status name');
  });
});

describe('simulator: Azure OpenAI wire format through the openai package’s AzureOpenAI client', function () {
  const azure = (apiVersion = '2024-10-21') => new AzureOpenAI({ endpoint: env.simulator.url, apiKey: 'sim-azure-key', apiVersion, deployment: 'gpt-4o-prod', maxRetries: 0 });

  it('chat completions at the deployment: text, filter results, a tool call, a stream with usage', async () => {
    const r = await azure().chat.completions.create({ model: 'ignored', messages: [{ role: 'user', content: 'hello azure [sim tokens=2]' }] });
    assert.equal(r.choices[0]?.message.content, 'Echo: hello', 'the reply');
    assert.equal(r.model, 'gpt-4o-prod', 'the deployment answers');
    assert.ok((r as unknown as { prompt_filter_results: unknown[] }).prompt_filter_results.length === 1, 'Azure’s prompt filter results');
    const tool = await azure().chat.completions.create({
      model: 'ignored',
      messages: [{ role: 'user', content: 'Paris [sim tool_call=weather]' }],
      tools: [{ type: 'function', function: { name: 'weather', parameters: { type: 'object' } } }],
    });
    assert.equal(tool.choices[0]?.message.tool_calls?.[0]?.type === 'function' && tool.choices[0].message.tool_calls[0].function.name, 'weather', 'the tool call');
    const stream = await azure().chat.completions.create({ model: 'ignored', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'stream it [sim tokens=3]' }] });
    let text = '';
    let usage: OpenAI.CompletionUsage | undefined;
    let first = true;
    for await (const c of stream) {
      if (first) assert.equal(c.choices.length, 0, 'Azure opens with a chunk of no choices (the prompt filter results)');
      first = false;
      text += c.choices[0]?.delta.content ?? '';
      usage = c.usage ?? usage;
    }
    assert.equal(text, 'Echo: stream it', 'the streamed text');
    assert.equal(usage?.completion_tokens, 3, 'the usage chunk');
  });

  it('errors: 401 for a rejected key, 404 without api-version, 429 in Azure’s shape', async () => {
    const status = async (fn: () => Promise<unknown>) => {
      try {
        await fn();
      } catch (err) {
        assert.ok(err instanceof OpenAI.APIError, `an APIError: ${String(err)}`);
        return { status: err.status, code: err.code, message: err.message };
      }
      throw new Error('the call succeeded');
    };
    const rejected = await status(() => azure().chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'hi [sim reject_keys=sim-azure-key]' }] }));
    assert.deepEqual([rejected.status, rejected.code], [401, '401'], 'Azure’s access denied');
    const limited = await status(() => azure().chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'hi [sim status=429]' }] }));
    assert.ok(limited.status === 429 && limited.message.includes('2024-10-21'), `Azure’s rate limit names the API version: ${limited.message}`);
    const res = await fetch(`${env.simulator.url}/openai/deployments/d/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'api-key': 'k' }, body: '{}' });
    assert.equal(res.status, 404, 'no api-version: resource not found');
  });
});
