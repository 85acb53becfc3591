import assert from 'node:assert/strict';
import Decimal from 'decimal.js';
import { SIMULATOR_MODELS } from '../../simulator/catalog';
import { wav } from '../helpers/audio-fixtures';
import { call, checkInvariants, newAccount, settled, useStack, type TestAccount } from '../helpers/stack';
import { env } from '../setup/env';

// Audio models priced per token (spec 1 sections 2.2, 2.8, 4.8 item 3) over real HTTP, with the
// simulator metering `sim-tts-tokens` / `sim-transcribe-tokens` in tokens as OpenAI's
// gpt-4o-mini-tts / gpt-4o-transcribe do. Per-unit pricing: audio.test.ts.

const pricingOf = (id: string) => SIMULATOR_MODELS.find((m) => m.id === id)!.details!.pricing as Record<string, string>;
const TTS = pricingOf('sim-tts-tokens');
const TRANSCRIBE = pricingOf('sim-transcribe-tokens');
const PER_CHAR = pricingOf('sim-tts-1').per_character;
const PER_SECOND = pricingOf('sim-whisper-1').per_second;
const TRANSCRIBE_UPSTREAM = 'sim-transcribe-tokens-2026-01-15';
const HALF_PRICED = 'test-tts-half-priced';
/** The simulator's fixed late cost of a token transcription, unlike the tokens × rates estimate. */
const TRANSCRIBE_COST = '0.0009';

const dec = (v: string | number) => new Decimal(v);
const tokens = (r: Record<string, string>, input: number, output: number) => dec(r.per_input_token).mul(input).add(dec(r.per_output_token).mul(output));
const sameAmount = (actual: string | number, expected: Decimal, what: string) => assert.ok(dec(actual).eq(expected), `${what}: ${actual} ≠ ${expected.toFixed()}`);
/** Seconds a transcription is held for (spec 4.8): what the WAV holds, its size bound, at least 10. */
const holdSeconds = (file: Buffer, seconds: number) => Math.ceil(Math.max(10, seconds, file.length / 16_000));

describe('audio models priced per token', function () {
  this.timeout(60_000);
  const stack = useStack();
  let acct: TestAccount;
  const base = () => stack.gateway.url;
  const simBehaviour = (body: Record<string, unknown>) => call(env.simulator.url, '/_sim/behaviour', { body });
  const heldOf = async (id: string) => (await env.db('reservations').where({ id }).first()).held_credits as string;
  const generation = async (id: string) => (await call(base(), `/v1/generation?id=${id}`, { key: acct.key })).json.data;

  const speech = async (body: Record<string, unknown>) => {
    const res = await fetch(`${base()}/v1/audio/speech`, { method: 'POST', headers: { authorization: `Bearer ${acct.key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    assert.equal(res.status, 200, await res.clone().text());
    await res.arrayBuffer();
    return res.headers.get('x-gateway-request-id')!;
  };
  const transcribe = async (model: string, file: Buffer) => {
    const res = await call(base(), '/v1/audio/transcriptions', { key: acct.key, body: { model, input_audio: { data: file.toString('base64'), format: 'wav' } } });
    assert.equal(res.status, 200, res.text);
    return { id: res.headers.get('x-gateway-request-id')!, usage: res.json.usage };
  };

  before(async () => {
    acct = await newAccount({ credits: '20', tier: 'business' });
    await simBehaviour({ model: TRANSCRIBE_UPSTREAM, cost: Number(TRANSCRIBE_COST), cost_delay: 300 });
    // A tariff with one token rate only: not a complete price.
    const tts = await env.db('models').where({ id: 'sim-tts-tokens' }).first();
    await env.db('models')
      .insert({ ...tts, id: HALF_PRICED, details: { ...tts.details, pricing: { per_input_token: TTS.per_input_token } } })
      .onConflict('id')
      .merge();
  });
  after(async () => {
    await simBehaviour({ model: TRANSCRIBE_UPSTREAM, cost: null, cost_delay: null, no_usage: null });
    await env.db('models').where({ id: HALF_PRICED }).delete();
  });

  describe('speech', () => {
    it('holds input tokens ≤ UTF-8 bytes and 4 audio tokens a byte; charges the provider cost; usage_details shows the tokens', async () => {
      const input = '[sim seconds=0.5 cost_delay=300] Hello, tokens.';
      const bytes = Buffer.byteLength(input);
      const id = await speech({ model: 'sim-tts-tokens', input, voice: 'alloy' });
      sameAmount(await heldOf(id), tokens(TTS, bytes, 4 * bytes), 'hold');
      assert.equal((await generation(id)).billing_source, 'pending', 'the generation is pending until the late provider cost arrives');
      const row = await settled(id);
      assert.equal(row.billing_source, 'provider_cost', 'the late provider cost is billed');
      // The simulator's cost: ceil(characters / 4) text tokens, 20 audio tokens a second.
      const inputTokens = Math.ceil(input.length / 4);
      sameAmount(row.charge, tokens(TTS, inputTokens, 10), 'charge');
      const g = await generation(id);
      assert.equal(g.modality, 'audio', 'the generation is an audio one');
      assert.equal(g.usage_details.input_tokens, inputTokens, "the generation shows the simulator's input tokens");
      assert.equal(g.usage_details.output_tokens, 10, 'the generation shows 10 audio tokens for half a second');
      assert.equal(g.usage_details.characters, input.length, "the generation shows the input's characters");
    });

    it('counts bytes, not characters, and a slower speed makes room for longer audio', async () => {
      const input = '[sim seconds=0.1 cost_delay=100] Grüße, 日本語のテキスト。';
      const bytes = Buffer.byteLength(input);
      assert.ok(bytes > input.length, `the input has multi-byte characters: ${bytes} bytes, ${input.length} characters`);
      const id = await speech({ model: 'sim-tts-tokens', input, speed: 0.5 });
      sameAmount(await heldOf(id), tokens(TTS, bytes, 8 * bytes), 'hold');
      await settled(id);
    });

    it('without a provider cost the estimate is the hold (the answer reports no usage)', async () => {
      const input = '[sim seconds=0.2 cost=none cost_delay=100] Nobody records this cost.';
      const id = await speech({ model: 'sim-tts-tokens', input });
      const row = await settled(id);
      assert.equal(row.billing_source, 'estimate', 'without a provider cost the hold is billed as an estimate');
      assert.equal(row.is_estimate, true, 'a charge without a provider cost is an estimate');
      sameAmount(row.charge, tokens(TTS, Buffer.byteLength(input), 4 * Buffer.byteLength(input)), 'charge');
      assert.equal((await generation(id)).usage_details.output_tokens, 4, 'the recorded tokens are still shown');
    });

    it('per-character pricing is held as before: characters × per_character', async () => {
      const input = '[sim seconds=0.1 cost_delay=100] Characters, as before.';
      const id = await speech({ model: 'sim-tts-1', input });
      sameAmount(await heldOf(id), dec(PER_CHAR).mul(input.length), 'hold');
      await settled(id);
    });

    it('a tariff with one token rate only is 503 model_pricing_unavailable and holds nothing', async () => {
      const a = await newAccount({ credits: '5', tier: 'business' });
      const res = await call(base(), '/v1/audio/speech', { key: a.key, body: { model: HALF_PRICED, input: 'Hello.' } });
      assert.equal(res.status, 503, res.text);
      assert.equal(res.json.error.code, 'model_pricing_unavailable', 'the tariff with one token rate is model_pricing_unavailable');
      assert.equal((await env.db('reservations').where({ account_id: a.accountId })).length, 0, 'the refused request holds nothing');
    });
  });

  describe('transcription', () => {
    it('holds 32 audio and 16 text tokens a held second; usage has the tokens; the provider cost is charged', async () => {
      const file = wav(2);
      const s = holdSeconds(file, 2);
      const { id, usage } = await transcribe('sim-transcribe-tokens', file);
      const hold = tokens(TRANSCRIBE, 32 * s, 16 * s);
      sameAmount(await heldOf(id), hold, 'hold');
      // The simulator: 10 audio tokens a second of bytes / 16,000, one token per word (2.5 a second).
      const duration = file.length / 16_000;
      const audio = Math.ceil(duration * 10);
      const words = Math.floor(duration * 2.5);
      assert.equal(usage.input_tokens, audio, 'input tokens are 10 audio tokens a second');
      assert.deepEqual(usage.input_token_details, { audio_tokens: audio, text_tokens: 0 }, 'the input tokens are all audio');
      assert.equal(usage.output_tokens, words, 'output tokens are one a word');
      assert.equal(usage.total_tokens, audio + words, 'total tokens are audio plus words');
      assert.equal(usage.seconds, undefined, 'token-priced usage has no seconds');
      assert.equal(usage.type, undefined, 'token-priced usage has no per-unit type');
      const estimate = tokens(TRANSCRIBE, audio, words);
      sameAmount(usage.cost, estimate, 'cost shown');
      assert.equal(usage.cost_details.billing_source, 'pending', "the cost shown is pending the provider's");
      assert.equal(usage.cost_details.is_estimate, true, 'the cost shown is an estimate');
      sameAmount(usage.cost_details.reserved_credits, hold, 'reserved_credits');
      assert.ok(dec(usage.balance.after).eq(dec(usage.balance.before).sub(usage.cost)), `balance after ${usage.balance.after} = before ${usage.balance.before} - cost ${usage.cost}`);
      const row = await settled(id);
      assert.equal(row.billing_source, 'provider_cost', 'the late provider cost is billed');
      sameAmount(row.charge, dec(TRANSCRIBE_COST), 'charge');
      const g = await generation(id);
      assert.equal(g.usage_details.input_tokens, audio, 'the generation shows the audio tokens');
      assert.equal(g.usage_details.output_tokens, words, 'the generation shows the word tokens');
      assert.equal(g.usage_details.total_tokens, audio + words, 'the generation shows the total tokens');
    });

    it('without a provider cost charges the reported tokens × rates; without usage, the hold', async () => {
      await simBehaviour({ model: TRANSCRIBE_UPSTREAM, cost: 'none' });
      const file = wav(5);
      const { id, usage } = await transcribe('sim-transcribe-tokens', file);
      const duration = file.length / 16_000;
      assert.equal(usage.input_tokens, Math.ceil(duration * 10), 'input tokens are 10 audio tokens a second');
      assert.equal(usage.output_tokens, Math.floor(duration * 2.5), 'output tokens are one a word');
      const row = await settled(id);
      assert.equal(row.billing_source, 'estimate', 'without a provider cost the tokens are billed as an estimate');
      assert.equal(row.is_estimate, true, 'a charge from tokens × rates is an estimate');
      sameAmount(row.charge, tokens(TRANSCRIBE, usage.input_tokens, usage.output_tokens), 'charge');
      sameAmount(usage.cost, dec(row.charge), 'cost shown');

      await simBehaviour({ model: TRANSCRIBE_UPSTREAM, no_usage: true });
      const bare = await transcribe('sim-transcribe-tokens', file);
      assert.equal(bare.usage.input_tokens, undefined, 'a transcription without usage shows no tokens');
      const s = holdSeconds(file, 5);
      const hold = tokens(TRANSCRIBE, 32 * s, 16 * s);
      sameAmount(bare.usage.cost, hold, 'cost shown');
      const bareRow = await settled(bare.id);
      assert.equal(bareRow.billing_source, 'estimate', 'without usage the hold is billed as an estimate');
      sameAmount(bareRow.charge, hold, 'charge');
      await simBehaviour({ model: TRANSCRIBE_UPSTREAM, cost: Number(TRANSCRIBE_COST), no_usage: null });
    });

    it('per-second pricing: held seconds × per_second, usage has seconds and no tokens', async () => {
      const file = wav(12);
      const { id, usage } = await transcribe('sim-whisper-1', file);
      const s = holdSeconds(file, 12);
      sameAmount(await heldOf(id), dec(PER_SECOND).mul(s), 'hold');
      assert.equal(usage.seconds, Math.ceil(file.length / 16_000), 'per-second usage shows the seconds of audio');
      assert.equal(usage.input_tokens, undefined, 'per-second usage has no input tokens');
      assert.equal(usage.total_tokens, undefined, 'per-second usage has no total tokens');
      sameAmount(usage.cost, dec(PER_SECOND).mul(usage.seconds), 'cost shown');
      await settled(id);
      assert.equal((await generation(id)).usage_details.seconds, usage.seconds, 'the generation shows the seconds');
    });
  });

  describe('audio models', () => {
    it('lists the units each model is priced in; token-priced models are for the business tier', async () => {
      const listed = (await call(base(), '/v1/audio/models', { key: acct.key })).json.data;
      const pricing = Object.fromEntries(listed.map((m: { id: string; pricing: unknown }) => [m.id, m.pricing]));
      assert.deepEqual(pricing['sim-tts-tokens'], { per_input_token: Number(TTS.per_input_token), per_output_token: Number(TTS.per_output_token) }, 'the TTS token model lists its token rates');
      assert.deepEqual(pricing['sim-transcribe-tokens'], { per_input_token: Number(TRANSCRIBE.per_input_token), per_output_token: Number(TRANSCRIBE.per_output_token) }, 'the transcription token model lists its token rates');
      assert.deepEqual(pricing['sim-tts-1'], { per_character: Number(PER_CHAR) }, 'the per-character model lists its character rate');
      assert.deepEqual(pricing['sim-whisper-1'], { per_second: Number(PER_SECOND) }, 'the per-second model lists its second rate');
      const tr = listed.find((m: { id: string }) => m.id === 'sim-transcribe-tokens');
      assert.equal(tr.type, 'transcription', 'the token transcription model is a transcription model');
      assert.equal(tr.endpoint, '/v1/audio/transcriptions', 'the token transcription model names its endpoint');
      const pro = await newAccount({ tier: 'pro' });
      const proIds = (await call(base(), '/v1/audio/models', { key: pro.key })).json.data.map((m: { id: string }) => m.id);
      assert.ok(!proIds.includes('sim-tts-tokens') && !proIds.includes('sim-transcribe-tokens'), `the token-priced audio models are not offered on pro: ${proIds.join(', ')}`);
    });
  });

  describe('afterwards', () => {
    it('keeps the money invariants of the account', async () => {
      const inv = await checkInvariants(acct.accountId);
      assert.equal(inv.reservations.pending, 0, 'no reservation is left pending');
      assert.ok(dec(inv.account.reserved_credits).isZero(), `reserved credits back to 0: ${inv.account.reserved_credits}`);
      assert.ok(dec(inv.account.total_usage).eq(inv.ledger.usage), `total usage ${inv.account.total_usage} equals the ledger's ${inv.ledger.usage}`);
      assert.ok(dec(inv.account.total_usage).eq(inv.reservations.charged), `total usage ${inv.account.total_usage} equals the reservations' charges ${inv.reservations.charged}`);
    });
  });
});
