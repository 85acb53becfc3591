import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { promisify } from 'node:util';
import Decimal from 'decimal.js';
import OpenAI from 'openai';
import { createAccount } from '../../services/accounts/accounts';
import { createKey } from '../../services/keys/keys';
import { inspectAudio } from '../../api/gateway/media/audio/format';
import { SIMULATOR_MODELS } from '../../simulator/catalog';
import { fixture, png, wav } from '../helpers/audio-fixtures';
import { call, checkInvariants, newAccount, settled, startStack, useStack, type TestAccount } from '../helpers/stack';
import { env } from '../setup/env';

// Chat audio (spec 1 sections 4.7, 4.8, 2.9) end to end: the official SDK against the gateway,
// the simulator as provider speaking OpenAI's audio wire format, settlement by the workflow.

const MODEL = 'sim-gpt-audio';
const AUDIO_MODEL = SIMULATOR_MODELS.find((m) => m.id === MODEL)!;
/** The tariff columns a reservation copies at hold time. */
const TARIFF = ['input_multiplier', 'output_multiplier', 'cache_multiplier', 'cache_creation_multiplier', 'audio_input_multiplier', 'audio_output_multiplier'] as const;
type Rates = Record<(typeof TARIFF)[number], string>;
const CATALOG_RATES = Object.fromEntries(TARIFF.map((k) => [k, AUDIO_MODEL[k]!])) as Rates;
/** The simulator's rules (simulator/README.md): 10 input audio tokens a second of 16,000 bytes; 3 audio tokens and 240 ms a spoken word. */
const simInputTokens = (clip: Buffer) => Math.ceil((clip.length / 16_000) * 10);
const WORD_BYTES_PCM = 5760 * 2;
// The gateway's bound (api/gateway/dialects/chat-audio.ts): 32 audio tokens a second.
const BOUND_TOKENS_PER_SECOND = 32;

interface AudioUsage {
  prompt_tokens: number;
  completion_tokens: number;
  prompt_tokens_details: { cached_tokens: number; cache_write_tokens: number; audio_tokens: number; text_tokens: number };
  completion_tokens_details: { reasoning_tokens: number; audio_tokens: number; text_tokens: number };
  cost: number;
  cost_details: { input_credits: number; output_credits: number; cache_read_credits: number; cache_write_credits: number; billing_source: string };
}

/** Spec 2.1 with audio: text tokens at the text rates, audio tokens at the audio rates (exact). */
function expectedCost(u: AudioUsage, r: Rates) {
  const d = u.prompt_tokens_details;
  const audioIn = d.audio_tokens;
  const audioOut = u.completion_tokens_details.audio_tokens;
  const input = new Decimal(r.input_multiplier).mul(u.prompt_tokens - d.cached_tokens - d.cache_write_tokens - audioIn).add(new Decimal(r.audio_input_multiplier).mul(audioIn));
  const output = new Decimal(r.output_multiplier).mul(u.completion_tokens - audioOut).add(new Decimal(r.audio_output_multiplier).mul(audioOut));
  const cache = new Decimal(r.cache_multiplier).mul(d.cached_tokens).add(new Decimal(r.cache_creation_multiplier).mul(d.cache_write_tokens));
  return { input, output, total: input.add(output).add(cache) };
}

const dec = (x: string | number) => new Decimal(x);

interface Streamed {
  requestId: string;
  audio: Buffer;
  transcript: string;
  content: string;
  usage: AudioUsage;
  finish: string | null;
}

describe('chat audio', function () {
  this.timeout(60_000);
  const stack = useStack();
  let acct: TestAccount;
  const base = () => stack.gateway.url;
  const openai = (key: string) => new OpenAI({ apiKey: key, baseURL: `${base()}/v1`, maxRetries: 0 });
  const reservations = (accountId: string) => env.db('reservations').where({ account_id: accountId });
  const lastSimRequest = async () => {
    const stats = (await call(env.simulator.url, '/_sim/stats')).json;
    const list = (stats.last_requests as Array<{ endpoint: string; body: Record<string, unknown> }>).filter((r) => r.endpoint === '/v1/chat/completions');
    return list[list.length - 1];
  };
  const chat = (key: string, body: Record<string, unknown>) => call(base(), '/v1/chat/completions', { key, body });
  const userWith = (text: string, clip?: Buffer, format = 'wav') => [
    { role: 'user', content: [{ type: 'text', text }, ...(clip ? [{ type: 'input_audio', input_audio: { data: clip.toString('base64'), format } }] : [])] },
  ];

  /** A spoken answer streamed through the official SDK. */
  async function speak(key: string, format: 'wav' | 'mp3' | 'pcm16', messages: unknown[], extra: Record<string, unknown> = {}): Promise<Streamed> {
    const params = { model: MODEL, stream: true as const, modalities: ['text', 'audio'], audio: { voice: 'alloy', format }, messages, ...extra } as unknown as OpenAI.ChatCompletionCreateParamsStreaming;
    const { data: stream, response } = await openai(key).chat.completions.create(params).withResponse();
    const pieces: Buffer[] = [];
    let transcript = '';
    let content = '';
    let usage: AudioUsage | undefined;
    let finish: string | null = null;
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta as { content?: string | null; audio?: { data?: string; transcript?: string } } | undefined;
      if (delta?.audio?.data) pieces.push(Buffer.from(delta.audio.data, 'base64'));
      transcript += delta?.audio?.transcript ?? '';
      content += delta?.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (chunk.usage) usage = chunk.usage as unknown as AudioUsage;
    }
    assert.ok(usage, 'usage in the last chunk');
    return { requestId: response.headers.get('x-gateway-request-id')!, audio: Buffer.concat(pieces), transcript, content, usage, finish };
  }

  const generation = async (key: string, id: string) => (await call(base(), `/v1/generation?id=${id}`, { key })).json.data;
  /** The rates a reservation copied at hold time. */
  const heldRates = (row: Record<string, string>) => Object.fromEntries(TARIFF.map((k) => [k, row[k]])) as Rates;

  before(async () => {
    acct = await newAccount({ credits: '50' });
  });

  describe('catalog', () => {
    it('the audio rates are tariff columns of the model, not details', async () => {
      const row = await env.db('models').where({ id: MODEL }).first();
      assert.ok(dec(row.audio_input_multiplier).eq(CATALOG_RATES.audio_input_multiplier), `audio input rate ${row.audio_input_multiplier}, catalog ${CATALOG_RATES.audio_input_multiplier}`);
      assert.ok(dec(row.audio_output_multiplier).eq(CATALOG_RATES.audio_output_multiplier), `audio output rate ${row.audio_output_multiplier}, catalog ${CATALOG_RATES.audio_output_multiplier}`);
      assert.equal(row.details.audio_input_multiplier, undefined, 'the audio input rate is no longer in details');
      assert.equal(row.details.audio_output_multiplier, undefined, 'the audio output rate is no longer in details');
      const text = await env.db('models').where({ id: 'sim-gpt' }).first();
      assert.equal(text.audio_input_multiplier, null, 'a text model has no audio input rate');
    });
  });

  describe('audio output', () => {
    for (const format of ['wav', 'mp3', 'pcm16'] as const) {
      it(`streams ${format} audio and its transcript; usage.cost = text tokens × text rates + audio tokens × audio rates, exactly`, async () => {
        const clip = fixture('tone.wav');
        const s = await speak(acct.key, format, userWith('Say hello back [sim tokens=5]', clip));
        assert.equal(s.finish, 'stop', `${format}: the answer finishes with stop`);
        assert.equal(s.content, '', 'a spoken answer has its text in the transcript');
        const words = s.transcript.split(' ');
        assert.equal(words[0], 'Echo:', 'the simulator\'s transcript echoes the prompt');
        const u = s.usage;
        assert.equal(words.length, u.completion_tokens_details.text_tokens, 'one text token a transcript word');
        // Audio made: 240 ms a word, 3 audio tokens a word.
        assert.equal(u.completion_tokens_details.audio_tokens, 3 * words.length, '3 audio tokens a word');
        assert.equal(u.completion_tokens, u.completion_tokens_details.text_tokens + u.completion_tokens_details.audio_tokens, 'completion tokens are text plus audio tokens');
        assert.equal(u.prompt_tokens_details.audio_tokens, simInputTokens(clip), 'the input clip\'s audio tokens as the simulator counts them');
        if (format === 'pcm16') {
          assert.equal(s.audio.length, words.length * WORD_BYTES_PCM, `${format}: 240 ms of pcm16 a word`);
          // a 440 Hz tone, 16-bit little-endian at 24 kHz: sample 6 is round(8000 × sin(2π × 440 × 6 / 24000))
          assert.equal(s.audio.readInt16LE(12), Math.round(8000 * Math.sin((2 * Math.PI * 440 * 6) / 24_000)), 'the tone\'s sample 6 arrives intact');
        } else {
          const read = await inspectAudio(s.audio);
          assert.equal(read.kind, 'accepted', `${format}: the audio reads back as a valid file`);
          assert.equal(read.kind === 'accepted' && read.format, format, `${format}: the file is the format asked for`);
          assert.ok(read.kind === 'accepted' && Math.abs((read.seconds ?? 0) - 0.24 * words.length) < 0.05, `duration ${JSON.stringify(read)}`);
        }

        const expected = expectedCost(u, CATALOG_RATES);
        assert.equal(u.cost, expected.total.toNumber(), 'usage.cost is text and audio tokens at their rates, exactly');
        assert.equal(u.cost_details.input_credits, expected.input.toNumber(), 'input credits exactly');
        assert.equal(u.cost_details.output_credits, expected.output.toNumber(), 'output credits exactly');
        assert.equal(u.cost_details.billing_source, 'token_fallback', 'billed from the token counts');
        const row = await settled(s.requestId);
        assert.equal(row.status, 'settled', 'the request settles');
        assert.ok(dec(row.charge).eq(expected.total), `${row.charge} = ${expected.total.toFixed()}`);
        assert.ok(dec(row.input_credits).eq(expected.input), `input credits ${row.input_credits}, expected ${expected.input.toFixed()}`);
        assert.ok(dec(row.output_credits).eq(expected.output), `output credits ${row.output_credits}, expected ${expected.output.toFixed()}`);
        assert.deepEqual(heldRates(row), Object.fromEntries(TARIFF.map((k) => [k, dec(CATALOG_RATES[k]).toFixed(12)])), 'the hold copied the catalog rates, audio rates included');
        const ledger = await env.db('ledger').where({ reservation_id: s.requestId, kind: 'charge' }).first();
        assert.ok(dec(ledger.amount).eq(expected.total), `ledger charge ${ledger.amount}, expected ${expected.total.toFixed()}`);
      });
    }

    it('the raw stream: audio deltas as OpenAI sends them, usage once in the last chunk before [DONE]', async () => {
      const res = await chat(acct.key, { model: MODEL, stream: true, modalities: ['text', 'audio'], audio: { voice: 'verse', format: 'pcm16' }, messages: userWith('Hi there [sim tokens=3]') });
      assert.equal(res.status, 200, res.text);
      const events = res.text.split('\n\n').filter((e) => e.startsWith('data: ')).map((e) => e.slice(6));
      assert.equal(events.at(-1), '[DONE]', 'the stream ends with [DONE]');
      const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
      const audio = chunks.map((c) => c.choices[0]?.delta?.audio).filter(Boolean);
      assert.match(audio[0].id, /^audio_/, 'the audio id as OpenAI sends it');
      assert.equal(audio[0].transcript, 'Echo:', 'the first audio delta carries the first transcript word');
      assert.equal(audio.filter((a) => a.data).length, 3, 'one audio data delta a word');
      assert.ok(audio.at(-1).expires_at > Date.now() / 1000, `the audio expires in the future: ${audio.at(-1).expires_at}`);
      const last = chunks.at(-1);
      assert.equal(chunks.filter((c) => c.usage).length, 1, 'usage appears in exactly one chunk');
      assert.ok(last.usage, `the last chunk carries the usage: ${JSON.stringify(last)}`);
      assert.equal(last.choices[0].finish_reason, 'stop', 'the last chunk finishes with stop');
      assert.deepEqual(last.choices[0].delta, {}, 'the last chunk\'s delta is empty');
      const forwarded = await lastSimRequest();
      assert.deepEqual(forwarded.body.audio, { voice: 'verse', format: 'pcm16' }, 'the audio options reach the provider unchanged');
      assert.deepEqual(forwarded.body.stream_options, { include_usage: true }, 'the gateway asks the provider for usage');
      await settled(res.headers.get('x-gateway-request-id')!);
    });

    it('a format the provider cannot make is its 400, and the hold is released', async () => {
      const a = await newAccount({ credits: '5' });
      const res = await chat(a.key, { model: MODEL, stream: true, modalities: ['text', 'audio'], audio: { voice: 'alloy', format: 'flac' }, messages: userWith('Hi') });
      assert.equal(res.status, 400, res.text);
      assert.match(res.json.error.message, /does not support 'flac'/, 'the provider\'s refusal names the format');
      const [row] = await reservations(a.accountId);
      assert.equal((await settled(row.id)).billing_source, 'not_billed', 'the refused request is not billed');
      assert.ok(dec((await checkInvariants(a.accountId)).account.total_usage).eq(0), 'an unsupported audio format is not billed: total usage stays 0');
    });
  });

  describe('audio input', () => {
    it('an input_audio part reaches the provider unchanged; the answer is billed at the audio input rate', async () => {
      const clip = fixture('tone.mp3');
      const res = await openai(acct.key)
        .chat.completions.create({ model: MODEL, messages: userWith('What is said? [sim tokens=4]', clip, 'mp3') as OpenAI.ChatCompletionMessageParam[] })
        .withResponse();
      const forwarded = await lastSimRequest();
      const parts = (forwarded.body.messages as Array<{ content: Array<Record<string, unknown>> }>)[0].content;
      assert.deepEqual(parts[1], { type: 'input_audio', input_audio: { data: clip.toString('base64'), format: 'mp3' } }, 'the input_audio part reaches the provider unchanged');
      const u = res.data.usage as unknown as AudioUsage;
      assert.equal(u.prompt_tokens_details.audio_tokens, simInputTokens(clip), 'the clip\'s audio tokens as the simulator counts them');
      assert.equal(u.completion_tokens_details.audio_tokens, 0, 'a text answer makes no audio');
      const expected = expectedCost(u, CATALOG_RATES);
      assert.equal(u.cost, expected.total.toNumber(), 'usage.cost at the audio input rate, exactly');
      assert.ok(dec(u.cost_details.input_credits).gt(dec(CATALOG_RATES.input_multiplier).mul(u.prompt_tokens)), 'audio tokens cost more than text ones');
      const row = await settled(res.response.headers.get('x-gateway-request-id')!);
      assert.ok(dec(row.charge).eq(expected.total), `charge ${row.charge}, expected ${expected.total.toFixed()}`);
      assert.equal(row.modality, 'audio', 'the request is recorded as audio');
    });

    it('holds a clip for its duration × 32 tokens, never shorter than its size allows, not for its base64 bytes', async () => {
      const maxTokens = 100;
      const cases = [
        // 60 s of 16-bit 16 kHz WAV: its size allows 120 s at 16,000 bytes a second
        { clip: wav(60), format: 'wav', sizeWins: true },
        // 14 s of 8 kbit/s MP3: its duration is longer than the size allows
        { clip: fixture('long-14s.mp3'), format: 'mp3', sizeWins: false },
      ];
      for (const c of cases) {
        const read = await inspectAudio(c.clip);
        const seconds = read.kind === 'accepted' ? (read.seconds ?? 0) : 0;
        const bySize = c.clip.length / 16_000;
        assert.equal(bySize > seconds, c.sizeWins, `${c.format}: ${seconds} s read, ${bySize} s by size`);
        const messages = userWith('Listen [sim tokens=2]', c.clip, c.format);
        const res = await chat(acct.key, { model: MODEL, max_tokens: maxTokens, messages });
        assert.equal(res.status, 200, res.text);
        const row = await settled(res.headers.get('x-gateway-request-id')!);
        const textBytes = Buffer.byteLength(JSON.stringify(messages)) - Buffer.byteLength(JSON.stringify(c.clip.toString('base64')));
        const audioTokens = Math.ceil(Math.max(seconds, bySize) * BOUND_TOKENS_PER_SECOND);
        const r = CATALOG_RATES;
        const dearestInput = Decimal.max(r.input_multiplier, r.cache_multiplier, r.cache_creation_multiplier, r.audio_input_multiplier);
        const held = dearestInput.mul(textBytes + audioTokens).add(dec(CATALOG_RATES.output_multiplier).mul(maxTokens));
        assert.ok(dec(row.held_credits).eq(held), `${c.format}: held ${row.held_credits}, expected ${held.toFixed()}`);
        assert.ok(dec(row.charge).lte(dec(row.held_credits)), `${c.format}: charge ${row.charge} within the hold ${row.held_credits}`);
      }
    });

    it('a balance far below the base64 size of a clip still covers its duration-bound hold', async () => {
      const clip = wav(30); // 960 KB: counted as bytes it would need ~1.3M tokens × 0.00004 ≈ 51 credits
      const a = await newAccount({ credits: '0.5' });
      const res = await chat(a.key, { model: MODEL, max_tokens: 50, messages: userWith('Listen [sim tokens=2]', clip) });
      assert.equal(res.status, 200, res.text);
      const row = await settled(res.headers.get('x-gateway-request-id')!);
      assert.ok(dec(row.held_credits).lt('0.5'), `a short clip holds under 0.5 credits: held ${row.held_credits}`);
      assert.ok(dec(row.charge).eq(expectedCost(res.json.usage, CATALOG_RATES).total), `charge ${row.charge}, usage ${JSON.stringify(res.json.usage)}`);
    });
  });

  describe('validation (400 before any hold)', () => {
    const clip = () => fixture('tone.wav').toString('base64');
    const part = (input_audio: unknown) => ({ type: 'input_audio', input_audio });
    const asUser = (...content: unknown[]) => [{ role: 'user', content }];
    const spoken = { modalities: ['text', 'audio'], stream: true };
    const cases: Array<[string, Record<string, unknown>, string, string | null]> = [
      ['input_audio in a system message', { messages: [{ role: 'system', content: [part({ data: clip(), format: 'wav' })] }, { role: 'user', content: 'hi' }] }, 'invalid_parameter', 'messages[0].content[0]'],
      ['input_audio in an assistant message', { messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: [part({ data: clip(), format: 'wav' })] }] }, 'invalid_parameter', 'messages[1].content[0]'],
      ['an audio URL', { messages: asUser({ type: 'text', text: 'x' }, part({ data: 'https://example.com/a.wav', format: 'wav' })) }, 'unsupported_parameter', 'messages[0].content[1].input_audio.data'],
      ['a data URI', { messages: asUser(part({ data: `data:audio/wav;base64,${clip()}`, format: 'wav' })) }, 'invalid_audio', 'messages[0].content[0].input_audio.data'],
      ['bad base64', { messages: asUser(part({ data: 'not base64!', format: 'wav' })) }, 'invalid_audio', 'messages[0].content[0].input_audio.data'],
      ['empty data', { messages: asUser(part({ data: '', format: 'wav' })) }, 'invalid_audio', 'messages[0].content[0].input_audio.data'],
      ['content that is not audio', { messages: asUser(part({ data: png().toString('base64'), format: 'wav' })) }, 'invalid_audio', 'messages[0].content[0].input_audio.data'],
      ['recognised audio not accepted (AIFF)', { messages: asUser(part({ data: fixture('tone.aiff').toString('base64'), format: 'wav' })) }, 'unsupported_audio_format', 'messages[0].content[0].input_audio.data'],
      ['format not a string', { messages: asUser(part({ data: clip(), format: 3 })) }, 'invalid_parameter', 'messages[0].content[0].input_audio.format'],
      ['format missing', { messages: asUser(part({ data: clip() })) }, 'missing_required_parameter', 'messages[0].content[0].input_audio.format'],
      ['data missing', { messages: asUser(part({ format: 'wav' })) }, 'missing_required_parameter', 'messages[0].content[0].input_audio.data'],
      ['input_audio missing', { messages: asUser({ type: 'input_audio' }) }, 'missing_required_parameter', 'messages[0].content[0].input_audio'],
      ['data not a string', { messages: asUser(part({ data: 12, format: 'wav' })) }, 'invalid_parameter', 'messages[0].content[0].input_audio'],
      ['a model without audio_input', { model: 'sim-gpt', messages: asUser(part({ data: clip(), format: 'wav' })) }, 'unsupported_capability', 'messages[0].content[0]'],
      ['a voice outside the model list', { ...spoken, audio: { voice: 'nobody', format: 'wav' }, messages: asUser({ type: 'text', text: 'hi' }) }, 'invalid_parameter', 'audio.voice'],
      ['audio output without the audio object', { ...spoken, messages: asUser({ type: 'text', text: 'hi' }) }, 'missing_required_parameter', 'audio'],
      ['audio output without stream: true', { modalities: ['text', 'audio'], audio: { voice: 'alloy', format: 'wav' }, messages: asUser({ type: 'text', text: 'hi' }) }, 'invalid_parameter', 'stream'],
      ['audio output from a model without audio_output', { ...spoken, model: 'sim-gpt', audio: { voice: 'alloy', format: 'wav' }, messages: asUser({ type: 'text', text: 'hi' }) }, 'unsupported_capability', 'modalities'],
      ['an audio output format outside the list', { ...spoken, audio: { voice: 'alloy', format: 'ogg' }, messages: asUser({ type: 'text', text: 'hi' }) }, 'invalid_parameter', 'audio.format'],
    ];
    for (const [name, body, code, param] of cases) {
      it(`${name}: 400 ${code}`, async () => {
        const a = await newAccount({ credits: '5' });
        const res = await chat(a.key, { model: MODEL, ...body });
        assert.equal(res.status, 400, res.text);
        assert.equal(res.json.error.code, code, res.text);
        assert.equal(res.json.error.param, param, `${name}: the error names the parameter`);
        assert.equal(res.json.error.type, 'invalid_request_error', `${name}: an invalid request error`);
        assert.equal((await reservations(a.accountId)).length, 0, `${name}: refused before any hold`);
      });
    }

    it('the messages and responses dialects refuse audio parts before a hold (audio is chat only)', async () => {
      const a = await newAccount({ credits: '5' });
      const audioBlock = { type: 'input_audio', input_audio: { data: clip(), format: 'wav' } };
      for (const model of ['sim-claude', MODEL]) {
        const res = await call(base(), '/v1/messages', { key: a.key, headers: { 'anthropic-version': '2023-06-01' }, body: { model, max_tokens: 50, messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }, audioBlock] }] } });
        assert.equal(res.status, 400, res.text);
        assert.equal(res.json.type, 'error', `${model}: an Anthropic error envelope`);
        assert.match(res.json.error.message, /messages\.0\.content\.1.*\/v1\/chat\/completions/, `${model}: the error names the part and points to /v1/chat/completions`);
      }
      const res = await call(base(), '/v1/responses', { key: a.key, body: { model: MODEL, input: [{ role: 'user', content: [{ type: 'input_text', text: 'hi' }, audioBlock] }] } });
      assert.equal(res.status, 400, res.text);
      assert.equal(res.json.error.code, 'unsupported_parameter', 'the responses dialect refuses the audio part');
      assert.match(res.json.error.message, /\/v1\/chat\/completions/, 'the error points to /v1/chat/completions');
      assert.equal((await reservations(a.accountId)).length, 0, 'refused before any hold');
    });
  });

  describe('generation record and cancellation', () => {
    it('GET /v1/generation shows modality audio and the audio tokens in usage_details', async () => {
      const s = await speak(acct.key, 'pcm16', userWith('Hi [sim tokens=2]', fixture('tone.wav')));
      await settled(s.requestId);
      const g = await generation(acct.key, s.requestId);
      assert.equal(g.modality, 'audio', 'the generation record says audio');
      assert.deepEqual(g.usage_details, { input_audio_tokens: s.usage.prompt_tokens_details.audio_tokens, output_audio_tokens: s.usage.completion_tokens_details.audio_tokens }, 'usage_details has the input and output audio tokens');
      assert.equal(g.cost, s.usage.cost, 'the generation\'s cost is the answer\'s usage.cost');

      const plain = await chat(acct.key, { model: MODEL, messages: [{ role: 'user', content: 'no audio [sim tokens=2]' }] });
      const text = await generation(acct.key, plain.headers.get('x-gateway-request-id')!);
      await settled(text.id);
      const after = await generation(acct.key, text.id);
      assert.equal(after.modality, 'text', 'a text request\'s generation record says text');
      assert.equal(after.usage_details, null, 'a text request has no usage_details');
    });

    it('a client that closes an audio stream early: cancelled, charged for what was sent, never above the hold', async () => {
      const params = { model: MODEL, stream: true, modalities: ['text', 'audio'], audio: { voice: 'alloy', format: 'pcm16' }, messages: userWith('Talk slowly [sim tokens=40 chunk_delay=40]', fixture('tone.wav')) };
      const { data: stream, response } = await openai(acct.key).chat.completions.create(params as unknown as OpenAI.ChatCompletionCreateParamsStreaming).withResponse();
      let audioChunks = 0;
      for await (const chunk of stream) {
        if ((chunk.choices[0]?.delta as { audio?: { data?: string } } | undefined)?.audio?.data) audioChunks++;
        if (audioChunks === 3) break; // leaving the loop aborts the request
      }
      const row = await settled(response.headers.get('x-gateway-request-id')!);
      assert.equal(row.status, 'cancelled', 'the closed stream\'s request is cancelled');
      assert.equal(row.outcome, 'cancelled', 'the outcome is cancelled');
      assert.ok(dec(row.charge).gt(0), `a cancelled stream still charges what was produced: ${row.charge}`);
      assert.ok(dec(row.charge).lte(dec(row.held_credits)), `charge ${row.charge} within the hold ${row.held_credits}`);
      const g = await generation(acct.key, row.id);
      assert.equal(g.outcome, 'cancelled', 'the generation record says cancelled');
      assert.equal(g.modality, 'audio', 'the generation record says audio');
      // 3 words of pcm16 were sent (34,560 bytes = 0.72 s), estimated at 10 tokens a second
      assert.ok(g.usage_details.output_audio_tokens >= 8, JSON.stringify(g.usage_details));
      assert.ok(g.usage_details.input_audio_tokens > 0, `input audio tokens counted: ${JSON.stringify(g.usage_details)}`);
    });
  });

  describe('tariff', () => {
    const setRates = (rates: Partial<Rates>) => env.db('models').where({ id: MODEL }).update(rates);
    /** Until the gateway's catalog has reloaded: a hold copies these rates. */
    async function untilHeld(rates: Partial<Rates>) {
      for (let i = 0; ; i++) {
        const res = await chat(acct.key, { model: MODEL, messages: [{ role: 'user', content: 'rate probe [sim tokens=1]' }] });
        const row = await settled(res.headers.get('x-gateway-request-id')!);
        if (Object.entries(rates).every(([k, v]) => (v === null ? row[k] === null : row[k] !== null && dec(row[k]).eq(v)))) return;
        if (i > 50) assert.fail('the catalog did not reload');
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    afterEach(async () => {
      await setRates({ audio_input_multiplier: CATALOG_RATES.audio_input_multiplier, audio_output_multiplier: CATALOG_RATES.audio_output_multiplier });
      await untilHeld({ audio_input_multiplier: CATALOG_RATES.audio_input_multiplier, audio_output_multiplier: CATALOG_RATES.audio_output_multiplier });
    });

    it('a tariff change after the hold does not change the charge of the running request', async () => {
      const params = { model: MODEL, stream: true, modalities: ['text', 'audio'], audio: { voice: 'alloy', format: 'wav' }, messages: userWith('Slow [sim tokens=6 chunk_delay=60]', fixture('tone.wav')) };
      const { data: stream, response } = await openai(acct.key).chat.completions.create(params as unknown as OpenAI.ChatCompletionCreateParamsStreaming).withResponse();
      const newRates = { audio_input_multiplier: '0.5', audio_output_multiplier: '0.7' };
      let changed = false;
      let usage: AudioUsage | undefined;
      for await (const chunk of stream) {
        if (!changed) {
          changed = true;
          await setRates(newRates);
          await untilHeld(newRates); // the catalog now has the new rates
        }
        if (chunk.usage) usage = chunk.usage as unknown as AudioUsage;
      }
      const expected = expectedCost(usage!, CATALOG_RATES);
      assert.equal(usage!.cost, expected.total.toNumber(), 'usage.cost at the rates copied at hold time');
      const row = await settled(response.headers.get('x-gateway-request-id')!);
      assert.ok(dec(row.charge).eq(expected.total), `charge ${row.charge}, expected ${expected.total.toFixed()}`);
      assert.ok(dec(row.audio_output_multiplier).eq(CATALOG_RATES.audio_output_multiplier), `audio output rate ${row.audio_output_multiplier}, catalog ${CATALOG_RATES.audio_output_multiplier}`);
    });

    it('a model without audio rates bills audio tokens at the text rate of the same direction', async () => {
      await setRates({ audio_input_multiplier: null, audio_output_multiplier: null } as unknown as Partial<Rates>);
      await untilHeld({ audio_input_multiplier: null, audio_output_multiplier: null } as unknown as Partial<Rates>);
      const s = await speak(acct.key, 'pcm16', userWith('Hi [sim tokens=3]', fixture('tone.wav')));
      const textRates = { ...CATALOG_RATES, audio_input_multiplier: CATALOG_RATES.input_multiplier, audio_output_multiplier: CATALOG_RATES.output_multiplier };
      const expected = expectedCost(s.usage, textRates);
      assert.ok(s.usage.prompt_tokens_details.audio_tokens > 0 && s.usage.completion_tokens_details.audio_tokens > 0, `audio tokens on both sides: ${JSON.stringify(s.usage)}`);
      assert.equal(s.usage.cost, expected.total.toNumber(), 'usage.cost with audio tokens at the text rates');
      const row = await settled(s.requestId);
      assert.ok(dec(row.charge).eq(expected.total), `charge ${row.charge}, expected ${expected.total.toFixed()}`);
      assert.equal(row.audio_input_multiplier, null, 'the hold copied no audio rate');
    });
  });

  describe('keyed variant', () => {
    it('the hold with key spend copies the audio rates too', async () => {
      const keyed = await startStack({ variant: 'keyed', adminToken: 'admin-token-for-tests-0123456789' });
      try {
        const a = await createAccount(env.db, { name: `keyed-audio-${randomUUID()}`, tier: 'pro', credits: '5' });
        const k = await createKey(env.db, { accountId: a.id, label: 'audio', format: 'mt', settings: { spend_limit: '2' } });
        const res = await call(keyed.gateway.url, '/v1/chat/completions', { key: k.key, body: { model: MODEL, messages: userWith('Hi [sim tokens=2]', fixture('tone.wav')) } });
        assert.equal(res.status, 200, res.text);
        const row = await settled(res.headers.get('x-gateway-request-id')!);
        assert.ok(dec(row.audio_input_multiplier).eq(CATALOG_RATES.audio_input_multiplier), `audio input rate ${row.audio_input_multiplier}, catalog ${CATALOG_RATES.audio_input_multiplier}`);
        assert.ok(dec(row.charge).eq(expectedCost(res.json.usage, CATALOG_RATES).total), `charge ${row.charge}, usage ${JSON.stringify(res.json.usage)}`);
        const key = await env.db('api_keys').where({ id: k.id }).first();
        assert.ok(dec(key.spend).eq(row.charge), `key spend ${key.spend} equals the charge ${row.charge}`);
      } finally {
        await keyed.close();
      }
    });
  });

  describe('operator CLI', () => {
    const cli = async (...args: string[]) => {
      const root = path.resolve(__dirname, '../..');
      const { stdout } = await promisify(execFile)(path.join(root, 'node_modules', '.bin', 'tsx'), ['admin/cli.ts', ...args], { cwd: root, env: { ...process.env, DATABASE_URL: env.databaseUrl } });
      return JSON.parse(stdout);
    };
    it('model set takes --audio-input and --audio-output; model list shows them; leaving them out means text rates', async () => {
      const id = `cli-audio-${randomUUID()}`;
      const flags = ['--id', id, '--provider', 'simulator', '--upstream', 'sim-gpt-audio-2026-01-15', '--capabilities', 'text,audio_input,audio_output', '--tiers', 'pro'];
      const rates = ['--input', '0.000001', '--output', '0.000002', '--cache', '0.0000001', '--cache-write', '0.000001'];
      const set = await cli('model', 'set', ...flags, ...rates, '--audio-input', '0.00003', '--audio-output', '0.00006');
      assert.ok(dec(set.audio_input_multiplier).eq('0.00003'), `set audio input rate: ${set.audio_input_multiplier}`);
      const listed = (await cli('model', 'list')).models.find((m: { id: string }) => m.id === id);
      assert.ok(dec(listed.audio_output_multiplier).eq('0.00006'), `listed audio output rate: ${listed.audio_output_multiplier}`);
      const plain = await cli('model', 'set', ...flags, ...rates);
      assert.equal(plain.audio_input_multiplier, null, 'without --audio-input no audio input rate');
      assert.equal(plain.audio_output_multiplier, null, 'without --audio-output no audio output rate');
      await env.db('models').where({ id }).delete();
    });
  });

  describe('migration', () => {
    it('20261223000001 is reversible: down moves the rates back into details, up moves them out again', async () => {
      const name = '20261223000001_chat_audio_rates.ts';
      await env.db.migrate.down({ name });
      try {
        const row = await env.db('models').where({ id: MODEL }).first();
        assert.equal(row.audio_input_multiplier, undefined, 'down: the column is gone');
        assert.equal(row.details.audio_input_multiplier, CATALOG_RATES.audio_input_multiplier, 'down: the audio input rate moved back into details');
        assert.equal(row.details.audio_output_multiplier, CATALOG_RATES.audio_output_multiplier, 'down: the audio output rate moved back into details');
        assert.equal(await env.db.schema.hasColumn('reservations', 'audio_input_multiplier'), false, 'down: reservations lose the audio rate column');
      } finally {
        await env.db.migrate.up({ name });
      }
      const row = await env.db('models').where({ id: MODEL }).first();
      assert.ok(dec(row.audio_input_multiplier).eq(CATALOG_RATES.audio_input_multiplier), `audio input rate after the migrations ${row.audio_input_multiplier}, catalog ${CATALOG_RATES.audio_input_multiplier}`);
      assert.equal(row.details.audio_input_multiplier, undefined, 'up: the rate is out of details again');
      assert.deepEqual(row.details.voices, AUDIO_MODEL.details!.voices, 'up: the other details are kept');
    });
  });

  describe('afterwards', () => {
    it('keeps the money invariants of the account used here', async () => {
      const inv = await checkInvariants(acct.accountId);
      assert.equal(inv.reservations.pending, 0, 'no request left pending');
      assert.ok(dec(inv.account.reserved_credits).eq(0), `reserved credits back to 0: ${inv.account.reserved_credits}`);
      assert.ok(dec(inv.account.total_usage).eq(inv.ledger.usage), `total usage ${inv.account.total_usage} equals the ledger's ${inv.ledger.usage}`);
      assert.ok(dec(inv.account.total_usage).eq(inv.reservations.charged), `total usage ${inv.account.total_usage} equals the reservations' charges ${inv.reservations.charged}`);
    });
  });
});
