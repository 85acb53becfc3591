import assert from 'node:assert/strict';
import { fixture, png, wav } from '../helpers/audio-fixtures';
import { call, checkInvariants, newAccount, settled, useStack, type TestAccount } from '../helpers/stack';
import { env } from '../setup/env';

// Audio endpoints (spec 1 sections 4.4, 4.5, 4.8, 4.9) over real HTTP, with the simulator as
// provider and the reservation workflow settling late provider costs. Chat audio (4.7):
// chat-audio.test.ts.

const PER_CHAR = 0.000015; // sim-tts-1 details.pricing.per_character
const PER_SECOND = 0.0001; // sim-whisper-1 details.pricing.per_second
const WHISPER_UPSTREAM = 'sim-whisper-1-2026-01-15';
const close = (a: number, b: number) => Math.abs(a - b) < 1e-9;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const jsonOf = async (r: Response): Promise<any> => r.json();

describe('audio endpoints', function () {
  this.timeout(60_000);
  const stack = useStack();
  let acct: TestAccount;
  const base = () => stack.gateway.url;

  const simBehaviour = (body: Record<string, unknown>) => call(env.simulator.url, '/_sim/behaviour', { body });
  const lastSimRequest = async (endpoint: string) => {
    const stats = (await call(env.simulator.url, '/_sim/stats')).json;
    const list = (stats.last_requests as Array<{ endpoint: string; body: Record<string, unknown> }>).filter((r) => r.endpoint === endpoint);
    return list[list.length - 1];
  };
  const forwardedFormat = (r: { body: Record<string, unknown> }) => {
    const file = (r.body.file as Array<{ filename: string; content_type: string }>)[0];
    return { name: file.filename, type: file.content_type };
  };
  const reservations = (accountId: string) => env.db('reservations').where({ account_id: accountId });
  const generation = async (key: string, id: string) => (await call(base(), `/v1/generation?id=${id}`, { key })).json.data;

  const speech = (key: string, body: Record<string, unknown>, headers: Record<string, string> = {}, signal?: AbortSignal) =>
    fetch(`${base()}/v1/audio/speech`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers }, body: JSON.stringify(body), signal });

  const transcribeFile = (key: string, file: Buffer, fields: Record<string, string | string[]> = {}, opts: { name?: string; type?: string; headers?: Record<string, string> } = {}) => {
    const form = new FormData();
    form.append('model', 'sim-whisper-1');
    for (const [k, v] of Object.entries(fields)) for (const x of Array.isArray(v) ? v : [v]) form.append(k, x);
    form.append('file', new Blob([file], { type: opts.type ?? 'application/octet-stream' }), opts.name ?? 'audio.bin');
    return fetch(`${base()}/v1/audio/transcriptions`, { method: 'POST', headers: { authorization: `Bearer ${key}`, ...opts.headers }, body: form }).then(async (r) => ({
      status: r.status,
      headers: r.headers,
      json: JSON.parse(await r.text()),
    }));
  };
  const transcribeJson = (key: string, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
    call(base(), '/v1/audio/transcriptions', { key, body: { model: 'sim-whisper-1', ...body }, headers });

  before(async () => {
    acct = await newAccount({ credits: '50' });
    // The provider records a fixed transcription cost 300 ms after answering.
    await simBehaviour({ model: WHISPER_UPSTREAM, cost: 0.0007, cost_delay: 300 });
  });
  after(async () => {
    await simBehaviour({ model: WHISPER_UPSTREAM, cost: null, cost_delay: null });
  });

  describe('speech', () => {
    it('streams the provider pcm bytes with the pcm content type, then charges the provider-recorded cost', async () => {
      const input = '[sim seconds=0.5 cost=0.0005 cost_delay=300] Hello there, this is a speech test of the gateway.';
      const res = await speech(acct.key, { model: 'sim-tts-1', input, voice: 'alloy' });
      assert.equal(res.status, 200, 'the speech is answered');
      assert.equal(res.headers.get('content-type'), 'audio/pcm;rate=24000;channels=1', 'pcm is answered with its rate and channels');
      assert.equal(res.headers.get('x-gateway-cost'), null, 'the answer carries no cost');
      const id = res.headers.get('x-gateway-request-id')!;
      const bytes = Buffer.from(await res.arrayBuffer());
      assert.equal(bytes.length, 0.5 * 24_000 * 2, '16-bit samples of 0.5 s, unchanged');
      const held = await reservations(acct.accountId).where({ id }).first();
      assert.equal(Number(held.held_credits), input.length * PER_CHAR, 'held from the text length');
      assert.equal(held.modality, 'audio', 'the reservation is an audio one');
      const pending = await generation(acct.key, id);
      assert.equal(pending.billing_source, 'pending', 'the cost is pending until the provider records it');
      const row = await settled(id);
      assert.equal(row.billing_source, 'provider_cost', 'charged from the provider-recorded cost');
      assert.equal(Number(row.charge), 0.0005, 'the cost the provider recorded, not the estimate');
      const g = await generation(acct.key, id);
      assert.equal(g.modality, 'audio', 'the generation is an audio one');
      assert.equal(g.usage_details.characters, input.length, "the usage counts the input's characters");
      assert.equal(g.usage_details.seconds, 0.5, 'the usage has the seconds of audio made');
      assert.equal(g.outcome, 'completed', 'the generation completed');
    });

    it('answers mp3 as audio/mpeg with the provider frames', async () => {
      const res = await speech(acct.key, { model: 'sim-tts-1', input: '[sim seconds=0.24 cost_delay=100] Short mp3.', response_format: 'mp3' });
      assert.equal(res.status, 200, 'the mp3 speech is answered');
      assert.equal(res.headers.get('content-type'), 'audio/mpeg', 'mp3 is answered as audio/mpeg');
      const bytes = Buffer.from(await res.arrayBuffer());
      assert.equal(bytes.length, 10 * 96, 'ten mp3 frames of 96 bytes, unchanged');
      assert.deepEqual([...bytes.subarray(0, 4)], [0xff, 0xf3, 0x44, 0xc4], "the first bytes are the provider's mp3 frame header");
      await settled(res.headers.get('x-gateway-request-id')!);
    });

    it('forwards bytes as they arrive, before the provider has finished', async () => {
      const res = await speech(acct.key, { model: 'sim-tts-1', input: '[sim seconds=1 chunk_delay=150 cost_delay=100] Streaming as produced.' });
      const reader = res.body!.getReader();
      const first = await reader.read();
      assert.equal(first.done, false, 'the first chunk arrives before the end');
      assert.equal(first.value!.length, 4800, 'one 100 ms chunk');
      const id = res.headers.get('x-gateway-request-id')!;
      assert.equal((await reservations(acct.accountId).where({ id }).first()).status, 'held', 'the provider is still producing');
      let total = first.value!.length;
      for (let r = await reader.read(); !r.done; r = await reader.read()) total += r.value.length;
      assert.equal(total, 48_000, 'all of 1 s of 16-bit 24 kHz audio arrives');
      await settled(id);
    });

    it('a client that closes early is charged the provider-recorded cost of the audio made', async () => {
      const input = '[sim seconds=3 chunk_delay=150 cost_delay=200] A long sentence the client will not wait for.';
      const res = await speech(acct.key, { model: 'sim-tts-1', input });
      const id = res.headers.get('x-gateway-request-id')!;
      const reader = res.body!.getReader();
      await reader.read();
      await reader.cancel();
      const row = await settled(id);
      assert.equal(row.status, 'cancelled', 'the reservation is cancelled');
      assert.equal(row.outcome, 'cancelled', 'the outcome is cancelled');
      assert.equal(row.billing_source, 'provider_cost', 'the cancelled speech is charged from the provider-recorded cost');
      const spoken = row.usage_details.characters as number;
      assert.ok(spoken > 0 && spoken < input.length, `some audio was made (${spoken} of ${input.length} characters)`);
      assert.ok(close(Number(row.charge), spoken * PER_CHAR), `charge ${row.charge} = recorded cost of ${spoken} characters`);
      assert.equal((await generation(acct.key, id)).outcome, 'cancelled', 'the generation shows the cancel');
    });

    it('a client that closes before any audio was made is charged zero', async () => {
      const res = await speech(acct.key, { model: 'sim-tts-1', input: '[sim chunk_delay=5000 cost_delay=100] Nothing will be said.' });
      assert.equal(res.status, 200, 'the speech is answered before any audio');
      const id = res.headers.get('x-gateway-request-id')!;
      await res.body!.cancel();
      const row = await settled(id);
      assert.equal(row.status, 'cancelled', 'the reservation is cancelled');
      assert.equal(row.billing_source, 'provider_cost', 'charged from the provider-recorded cost, even when zero');
      assert.equal(Number(row.charge), 0, 'no audio made: charged zero');
      assert.equal(row.usage_details.characters, 0, 'no characters spoken');
    });

    it('a client that leaves before the provider answered is not billed', async () => {
      const a = await newAccount({ credits: '5' });
      const abort = new AbortController();
      const pending = speech(a.key, { model: 'sim-tts-1', input: '[sim latency=1500 cost_delay=100] Too slow for this client.' }, {}, abort.signal);
      await new Promise((r) => setTimeout(r, 400));
      abort.abort();
      await assert.rejects(pending);
      const [row] = await reservations(a.accountId);
      const done = await settled(row.id);
      assert.equal(done.status, 'cancelled', 'the reservation is cancelled');
      assert.equal(done.billing_source, 'not_billed', 'a request the provider never answered is not billed');
      assert.equal(Number(done.charge), 0, 'nothing charged');
    });

    it('a provider that breaks off mid-audio: the client sees a cut body, the provider-recorded cost is charged', async () => {
      const input = '[sim seconds=2 chunk_delay=20 drop_after=3 cost_delay=100] The provider will drop this one.';
      const res = await speech(acct.key, { model: 'sim-tts-1', input });
      assert.equal(res.status, 200, 'the answer started before the provider broke off');
      const id = res.headers.get('x-gateway-request-id')!;
      await assert.rejects(res.arrayBuffer(), 'the body ends in an error, not a clean end');
      const row = await settled(id);
      assert.equal(row.outcome, 'failed', 'the outcome is failed');
      assert.equal(row.billing_source, 'provider_cost', 'the failed speech is charged from the provider-recorded cost');
      const spoken = row.usage_details.characters as number;
      assert.ok(spoken > 0 && spoken < input.length, `the failed speech stopped part way: ${spoken} of ${input.length} characters`);
      assert.ok(close(Number(row.charge), spoken * PER_CHAR), `charge ${row.charge} = ${spoken} characters × ${PER_CHAR}`);
    });

    it('the late cost is settled by the workflow across a worker restart before the cost arrives', async () => {
      const res = await speech(acct.key, { model: 'sim-tts-1', input: '[sim seconds=0.2 cost=0.0004 cost_delay=2500] Durable late cost settlement.' });
      const id = res.headers.get('x-gateway-request-id')!;
      await res.arrayBuffer();
      await new Promise((r) => setTimeout(r, 400)); // the workflow has polled once (pending) and sleeps
      await stack.stopWorker();
      assert.equal((await generation(acct.key, id)).billing_source, 'pending', 'the cost is still pending while the worker is stopped');
      await new Promise((r) => setTimeout(r, 2500)); // the provider records its cost meanwhile
      assert.equal((await reservations(acct.accountId).where({ id }).first()).status, 'held', 'the reservation stays held while the worker is stopped');
      await stack.startWorker();
      const row = await settled(id);
      assert.equal(row.billing_source, 'provider_cost', 'the restarted worker settles from the provider-recorded cost');
      assert.equal(Number(row.charge), 0.0004, 'charged the cost the provider recorded during the restart');
    });

    it('voice cloning with one sample and one transcript on a voice_cloning model; provider options forwarded', async () => {
      const sample = wav(0.2).toString('base64');
      const res = await speech(acct.key, {
        model: 'sim-tts-clone',
        input: '[sim seconds=0.1 cost_delay=100] Cloned.',
        voice: 'my-voice',
        input_references: [{ type: 'input_audio', input_audio: { data: sample } }, { type: 'text', text: 'the sample says this' }],
        provider: { options: { simulator: { style: 'calm' }, other: { x: 1 } } },
      });
      assert.equal(res.status, 200, 'the cloning speech is answered');
      await res.arrayBuffer();
      const forwarded = await lastSimRequest('/v1/audio/speech');
      assert.equal(forwarded.body.style, 'calm', 'the provider options for the simulator are forwarded');
      assert.equal(forwarded.body.model, 'sim-tts-clone-2026-01-15', 'the model is forwarded as the upstream model');
      assert.equal((forwarded.body.input_references as unknown[]).length, 2, 'the sample and the transcript are forwarded');
      await settled(res.headers.get('x-gateway-request-id')!);
    });

    it('rejects every invalid request before holding anything', async () => {
      const a = await newAccount({ credits: '5' });
      const sample = (b: Buffer) => ({ type: 'input_audio', input_audio: { data: b.toString('base64') } });
      const cases: Array<[Record<string, unknown>, number, string, string | null]> = [
        [{ input: 'hi' }, 400, 'missing_required_parameter', 'model'],
        [{ model: 'sim-tts-1' }, 400, 'missing_required_parameter', 'input'],
        [{ model: 'sim-tts-1', input: 'x'.repeat(10_001) }, 400, 'invalid_parameter', 'input'],
        [{ model: 'sim-tts-1', input: 'hi', voice: 'nobody' }, 400, 'invalid_parameter', 'voice'],
        [{ model: 'sim-tts-1', input: 'hi', response_format: 'wav' }, 400, 'unsupported_parameter', 'response_format'],
        [{ model: 'sim-tts-1', input: 'hi', response_format: 'opus' }, 400, 'unsupported_parameter', 'response_format'],
        [{ model: 'sim-tts-1', input: 'hi', speed: 0.2 }, 400, 'invalid_parameter', 'speed'],
        [{ model: 'sim-tts-1', input: 'hi', speed: 4.5 }, 400, 'invalid_parameter', 'speed'],
        [{ model: 'sim-tts-1', input: 'hi', instructions: 'whisper' }, 400, 'unsupported_parameter', 'instructions'],
        [{ model: 'sim-tts-1', input: 'hi', stream_format: 'sse' }, 400, 'unsupported_parameter', 'stream_format'],
        [{ model: 'sim-tts-1', input: 'hi', colour: 'blue' }, 400, 'unsupported_parameter', 'colour'],
        [{ model: 'sim-tts-1', input: 'hi', input_references: [sample(wav(0.1))] }, 400, 'unsupported_parameter', 'input_references'],
        [{ model: 'sim-tts-clone', input: 'hi', input_references: [sample(wav(0.1)), sample(wav(0.1))] }, 400, 'invalid_parameter', 'input_references'],
        [{ model: 'sim-tts-clone', input: 'hi', input_references: [{ type: 'text', text: 'only text' }] }, 400, 'invalid_parameter', 'input_references'],
        [{ model: 'sim-tts-clone', input: 'hi', input_references: [sample(wav(0.1)), { type: 'text', text: 'a' }, { type: 'text', text: 'b' }] }, 400, 'invalid_parameter', 'input_references'],
        [{ model: 'sim-tts-clone', input: 'hi', input_references: [{ type: 'input_audio', input_audio: { data: '***' } }] }, 400, 'invalid_audio', 'input_references[0].input_audio.data'],
        [{ model: 'sim-tts-clone', input: 'hi', input_references: [sample(png())] }, 400, 'invalid_audio', 'input_references[0].input_audio.data'],
        [{ model: 'sim-tts-clone', input: 'hi', input_references: [sample(Buffer.alloc(15 * 1024 * 1024 + 1))] }, 413, 'request_too_large', 'input_references[0].input_audio.data'],
        [{ model: 'sim-tts-1', input: 'hi', provider: { options: { simulator: { pad: 'x'.repeat(8200) } } } }, 400, 'invalid_parameter', 'provider.options'],
        [{ model: 'sim-whisper-1', input: 'hi' }, 400, 'unsupported_capability', 'model'],
        [{ model: 'sim-gpt', input: 'hi' }, 400, 'unsupported_capability', 'model'],
        [{ model: 'nope', input: 'hi' }, 403, 'model_not_found', 'model'],
      ];
      for (const [body, status, code, param] of cases) {
        const res = await speech(a.key, body);
        const json = await jsonOf(res);
        assert.equal(res.status, status, `${JSON.stringify(body).slice(0, 120)} → ${JSON.stringify(json)}`);
        assert.equal(json.error.code, code, JSON.stringify(json));
        assert.equal(json.error.param, param, JSON.stringify(json));
      }
      const cap = await jsonOf(await speech(a.key, { model: 'sim-whisper-1', input: 'hi' }));
      assert.match(cap.error.message, /POST \/v1\/audio\/transcriptions/, 'names the right endpoint');
      assert.equal((await reservations(a.accountId)).length, 0, 'no invalid request held anything');
      const credits = (await call(base(), '/v1/credits', { key: a.key })).json.data;
      assert.equal(credits.remaining_credits, 5, 'the balance is untouched');
    });

    it('a balance below the hold is refused with 402 and nothing held', async () => {
      const poor = await newAccount({ credits: '0.0001' });
      const res = await speech(poor.key, { model: 'sim-tts-1', input: 'x'.repeat(100) });
      assert.equal(res.status, 402, 'a balance below the hold is refused with 402');
      assert.equal((await jsonOf(res)).error.code, 'insufficient_quota', 'the refusal says insufficient_quota');
      assert.equal((await reservations(poor.accountId)).length, 0, 'nothing held');
    });
  });

  describe('transcription', () => {
    it('reads the format from the content, not the file name or MIME type, and charges the late provider cost', async () => {
      const res = await transcribeFile(acct.key, wav(2), { response_format: 'json', prompt: 'names: Ada' }, { name: 'song.mp3', type: 'audio/mpeg' });
      assert.equal(res.status, 200, JSON.stringify(res.json));
      const forwarded = await lastSimRequest('/v1/audio/transcriptions');
      assert.deepEqual(forwardedFormat(forwarded), { name: 'audio.wav', type: 'audio/wav' }, 'named and typed after the content');
      assert.equal(forwarded.body.prompt, undefined, 'prompt is not forwarded');
      assert.equal(typeof res.json.text, 'string', 'the transcription has its text');
      const usage = res.json.usage;
      const seconds = Math.ceil(wav(2).length / 16_000);
      assert.equal(usage.seconds, seconds, 'the usage counts the seconds of audio');
      assert.equal(usage.cost_details.billing_source, 'pending', 'the cost is pending until the provider records it');
      assert.equal(usage.cost_details.is_estimate, true, 'the cost shown is an estimate');
      assert.equal(usage.cost_details.reserved_credits, 10 * PER_SECOND, '10 seconds were reserved, the minimum hold');
      assert.ok(close(usage.cost, seconds * PER_SECOND), `cost ${usage.cost} = ${seconds} s × ${PER_SECOND}`);
      assert.ok(close(usage.balance.after, usage.balance.before - usage.cost), `balance after ${usage.balance.after} = before ${usage.balance.before} - cost ${usage.cost}`);
      const id = res.headers.get('x-gateway-request-id')!;
      const row = await settled(id);
      assert.equal(row.billing_source, 'provider_cost', "the late cost is charged from the provider's record");
      assert.equal(Number(row.charge), 0.0007, 'charged the cost the provider recorded');
      const g = await generation(acct.key, id);
      assert.equal(g.modality, 'audio', 'the generation is an audio one');
      assert.equal(g.usage_details.seconds, seconds, 'the generation has the seconds transcribed');
    });

    it('detects every supported format by content, whatever the label says', async () => {
      const files: Array<[string, Buffer]> = [
        ['wav', fixture('tone.wav')],
        ['wav', wav(0.5)],
        ['mp3', fixture('tone.mp3')],
        ['flac', fixture('tone.flac')],
        ['m4a', fixture('tone.m4a')],
        ['ogg', fixture('tone.opus.ogg')],
        ['ogg', fixture('tone.vorbis.ogg')],
        ['webm', fixture('tone.webm')],
        ['aac', fixture('tone.aac')],
      ];
      const ids: string[] = [];
      for (const [format, bytes] of files) {
        const res = await transcribeJson(acct.key, { input_audio: { data: bytes.toString('base64'), format: 'flac' } });
        assert.equal(res.status, 200, `${format}: ${res.text}`);
        assert.equal(forwardedFormat(await lastSimRequest('/v1/audio/transcriptions')).name, `audio.${format}`, `${format}: forwarded named after the detected format`);
        ids.push(res.headers.get('x-gateway-request-id')!);
      }
      await Promise.all(ids.map((id) => settled(id)));
      // A data URI with a misleading media type is read by content too.
      const uri = await transcribeJson(acct.key, { input_audio: { data: `data:audio/wav;base64,${fixture('tone.mp3').toString('base64')}`, format: 'wav' } });
      assert.equal(uri.status, 200, 'a data URI with a misleading media type is answered');
      assert.equal(forwardedFormat(await lastSimRequest('/v1/audio/transcriptions')).name, 'audio.mp3', "the data URI's content is detected as mp3");
      await settled(uri.headers.get('x-gateway-request-id')!);
    });

    it('refuses content that is not audio, bad base64 and recognised but unaccepted formats', async () => {
      const a = await newAccount({ credits: '5' });
      const png1 = await transcribeFile(a.key, png(), {}, { name: 'voice.wav', type: 'audio/wav' });
      assert.equal(png1.status, 400, 'a PNG labelled as wav is refused with 400');
      assert.equal(png1.json.error.code, 'invalid_audio', 'a PNG is not audio');
      assert.equal(png1.json.error.param, 'file', 'the refusal names the file');
      const text = await transcribeJson(a.key, { input_audio: { data: Buffer.from('just some text, not audio at all').toString('base64'), format: 'wav' } });
      assert.equal(text.json.error.code, 'invalid_audio', 'text is not audio');
      const bad = await transcribeJson(a.key, { input_audio: { data: 'not base64!!', format: 'wav' } });
      assert.equal(bad.status, 400, 'bad base64 is refused with 400');
      assert.equal(bad.json.error.code, 'invalid_audio', 'bad base64 is not audio');
      assert.equal(bad.json.error.param, 'input_audio.data', 'the refusal names input_audio.data');
      // Recognised audio the provider does not take: AIFF, FLAC in Ogg, MPEG layer II, Matroska.
      const aif = await transcribeFile(a.key, fixture('tone.aiff'), {}, { name: 'a.wav', type: 'audio/wav' });
      assert.equal(aif.status, 400, 'AIFF is refused with 400');
      assert.equal(aif.json.error.code, 'unsupported_audio_format', 'AIFF is recognised but not accepted');
      assert.match(aif.json.error.message, /aiff/i, 'the refusal names AIFF');
      for (const name of ['tone.flac.ogg', 'tone.mp2', 'tone.mka']) {
        const res = await transcribeJson(a.key, { input_audio: { data: fixture(name).toString('base64'), format: 'ogg' } });
        assert.equal(res.status, 400, name);
        assert.equal(res.json.error.code, 'unsupported_audio_format', name);
        assert.equal(res.json.error.param, 'input_audio', name);
      }
      // A text file named and typed as MP3 is still not audio.
      const named = await transcribeFile(a.key, Buffer.from('RIFF? no. just words in a file called voice.mp3'), {}, { name: 'voice.mp3', type: 'audio/mpeg' });
      assert.equal(named.json.error.code, 'invalid_audio', 'a text file named and typed as MP3 is not audio');
      const empty = await transcribeFile(a.key, Buffer.alloc(0));
      assert.equal(empty.json.error.code, 'invalid_audio', 'an empty file is not audio');
      assert.equal((await reservations(a.accountId)).length, 0, 'no refused request held anything');
    });

    it('validates every parameter before holding', async () => {
      const a = await newAccount({ credits: '5' });
      const clip = wav(0.5);
      const multipart: Array<[Record<string, string | string[]>, string, string]> = [
        [{ language: 'english' }, 'invalid_parameter', 'language'],
        [{ language: 'qq' }, 'invalid_parameter', 'language'],
        [{ temperature: '1.5' }, 'invalid_parameter', 'temperature'],
        [{ temperature: 'hot' }, 'invalid_parameter', 'temperature'],
        [{ response_format: 'text' }, 'unsupported_parameter', 'response_format'],
        [{ response_format: 'srt' }, 'unsupported_parameter', 'response_format'],
        [{ response_format: 'vtt' }, 'unsupported_parameter', 'response_format'],
        [{ response_format: 'xml' }, 'invalid_parameter', 'response_format'],
        [{ 'timestamp_granularities[]': 'word' }, 'invalid_parameter', 'timestamp_granularities'],
        [{ response_format: 'verbose_json', 'timestamp_granularities[]': 'sentence' }, 'invalid_parameter', 'timestamp_granularities'],
        [{ stream: 'true' }, 'unsupported_parameter', 'stream'],
        [{ provider: '{}' }, 'unsupported_parameter', 'provider'],
      ];
      for (const [fields, code, param] of multipart) {
        const res = await transcribeFile(a.key, clip, fields);
        assert.equal(res.status, 400, JSON.stringify(fields));
        assert.equal(res.json.error.code, code, `${JSON.stringify(fields)} → ${JSON.stringify(res.json)}`);
        assert.equal(res.json.error.param, param, `${JSON.stringify(fields)}: the refusal names ${param}`);
      }
      const data = clip.toString('base64');
      const json: Array<[Record<string, unknown>, string, string]> = [
        [{ input_audio: { data }, stream: true }, 'unsupported_parameter', 'stream'],
        [{ input_audio: { data }, temperature: -0.1 }, 'invalid_parameter', 'temperature'],
        [{ input_audio: { data }, timestamp_granularities: ['segment'], response_format: 'json' }, 'invalid_parameter', 'timestamp_granularities'],
        [{}, 'missing_required_parameter', 'input_audio'],
        [{ input_audio: { data }, model: undefined, speed: 1 }, 'unsupported_parameter', 'speed'],
      ];
      for (const [body, code, param] of json) {
        const res = await transcribeJson(a.key, body);
        assert.equal(res.status, 400, JSON.stringify(body));
        assert.equal(res.json.error.code, code, `${JSON.stringify(body)} → ${res.text}`);
        assert.equal(res.json.error.param, param, `${JSON.stringify(body)}: the refusal names ${param}`);
      }
      const noModel = await call(base(), '/v1/audio/transcriptions', { key: a.key, body: { input_audio: { data } } });
      assert.equal(noModel.json.error.code, 'missing_required_parameter', 'a JSON body without a model is refused as missing');
      assert.equal(noModel.json.error.param, 'model', 'the refusal names the model');
      // multipart without a file; a text field holding a file; a malformed body
      const form = new FormData();
      form.append('model', 'sim-whisper-1');
      const noFile = await fetch(`${base()}/v1/audio/transcriptions`, { method: 'POST', headers: { authorization: `Bearer ${a.key}` }, body: form });
      assert.equal((await jsonOf(noFile)).error.param, 'file', 'multipart without a file names the file');
      const fileInText = new FormData();
      fileInText.append('model', new Blob(['sim-whisper-1']), 'model.txt');
      fileInText.append('file', new Blob([clip]), 'a.wav');
      const r1 = await fetch(`${base()}/v1/audio/transcriptions`, { method: 'POST', headers: { authorization: `Bearer ${a.key}` }, body: fileInText });
      assert.equal((await jsonOf(r1)).error.code, 'invalid_multipart', 'a text field holding a file is invalid multipart');
      const r2 = await fetch(`${base()}/v1/audio/transcriptions`, { method: 'POST', headers: { authorization: `Bearer ${a.key}`, 'content-type': 'multipart/form-data; boundary=xyz' }, body: '--xyz\r\nbroken' });
      assert.equal(r2.status, 400, 'a malformed multipart body is refused with 400');
      assert.equal((await jsonOf(r2)).error.code, 'invalid_multipart', 'a malformed multipart body is invalid multipart');
      const plain = await call(base(), '/v1/audio/transcriptions', { key: a.key, body: 'hello', headers: { 'content-type': 'text/plain' } });
      assert.equal(plain.status, 415, 'a text/plain body is refused with 415');
      assert.equal(plain.json.error.code, 'unsupported_media_type', 'the refusal says unsupported_media_type');
      const speechModel = await transcribeJson(a.key, { model: 'sim-tts-1', input_audio: { data } });
      assert.equal(speechModel.json.error.code, 'unsupported_capability', 'a speech model cannot transcribe');
      assert.match(speechModel.json.error.message, /POST \/v1\/audio\/speech/, 'the refusal names the speech endpoint');
      assert.equal((await reservations(a.accountId)).length, 0, 'no refused request held anything');
    });

    it('verbose_json with word timestamps over multipart', async () => {
      const res = await transcribeFile(acct.key, wav(4), { response_format: 'verbose_json', 'timestamp_granularities[]': ['word', 'segment'], language: 'en', temperature: '0.2' });
      assert.equal(res.status, 200, JSON.stringify(res.json));
      assert.equal(res.json.language, 'en', 'the language is answered');
      assert.ok(Array.isArray(res.json.words) && res.json.words.length > 0, `verbose_json lists words: ${JSON.stringify(res.json.words)}`);
      assert.ok(Array.isArray(res.json.segments), `verbose_json lists segments: ${JSON.stringify(res.json.segments)}`);
      assert.equal(typeof res.json.duration, 'number', 'verbose_json has the duration');
      const forwarded = await lastSimRequest('/v1/audio/transcriptions');
      assert.deepEqual(forwarded.body['timestamp_granularities[]'], ['word', 'segment'], 'both timestamp granularities are forwarded');
      assert.equal(forwarded.body.temperature, '0.2', 'the temperature is forwarded');
      assert.equal(forwarded.body.language, 'en', 'the language is forwarded');
      await settled(res.headers.get('x-gateway-request-id')!);
    });

    it('holds at least 10 seconds, the header duration when longer, and never less than the size allows', async () => {
      const heldFor = async (file: Buffer) => {
        const res = await transcribeFile(acct.key, file);
        assert.equal(res.status, 200, JSON.stringify(res.json));
        const id = res.headers.get('x-gateway-request-id')!;
        const row = await reservations(acct.accountId).where({ id }).first();
        await settled(id);
        return { held: Number(row.held_credits), reserved: res.json.usage.cost_details.reserved_credits };
      };
      const short = await heldFor(fixture('tone.mp3'));
      assert.equal(short.held, 10 * PER_SECOND, 'a 2-second file holds 10 seconds');
      assert.equal(short.reserved, short.held, 'the reserved credits shown are the hold');
      // 8 kHz 8-bit: 20 s in 160 kB, more than the size bound (10 s): the header's duration counts.
      const longHeader = await heldFor(wav(20, { rate: 8000, bits: 8 }));
      assert.ok(close(longHeader.held, 20 * PER_SECOND), `held ${longHeader.held}`);
      // An MP3 of 14.2 s in 14 kB: the duration read from its frames counts, not the size.
      const longMp3 = await heldFor(fixture('long-14s.mp3'));
      assert.ok(close(longMp3.held, 15 * PER_SECOND), `held ${longMp3.held}`);
      // The header claims 1 s but 800 kB follow: held for the size bound, not the header.
      const lying = wav(25, { claimSeconds: 1 });
      const big = await heldFor(lying);
      assert.ok(close(big.held, Math.ceil(lying.length / 16_000) * PER_SECOND), `held ${big.held}`);
    });

    it('limits: multipart file over 25 MB and JSON body over 16 MB answer 413 without a hold', async () => {
      const a = await newAccount({ credits: '5' });
      const huge = await transcribeFile(a.key, Buffer.concat([wav(0.1), Buffer.alloc(25 * 1024 * 1024)]));
      assert.equal(huge.status, 413, 'a file over 25 MB is refused with 413');
      assert.equal(huge.json.error.code, 'request_too_large', 'the refusal says request_too_large');
      const bigJson = await transcribeJson(a.key, { input_audio: { data: Buffer.concat([wav(0.1), Buffer.alloc(12 * 1024 * 1024 + 1)]).toString('base64') } });
      assert.equal(bigJson.status, 413, 'a JSON body over 16 MB is refused with 413');
      assert.equal(bigJson.json.error.code, 'request_too_large', 'the refusal says request_too_large');
      // 24 MB fits the multipart limit (and is more than a JSON body may hold).
      const ok = await transcribeFile(a.key, Buffer.concat([wav(0.1), Buffer.alloc(24 * 1024 * 1024)]));
      assert.equal(ok.status, 200, JSON.stringify(ok.json));
      await settled(ok.headers.get('x-gateway-request-id')!);
      assert.equal((await reservations(a.accountId)).length, 1, 'only the 24 MB file held anything');
    });
  });

  describe('idempotency', () => {
    it('same key and content: 409 idempotent_replay, not processed; other content: 409 idempotency_key_reused', async () => {
      const a = await newAccount({ credits: '5' });
      const clip = wav(1);
      const key = `k-${Date.now()}`;
      const first = await transcribeFile(a.key, clip, { language: 'en' }, { headers: { 'idempotency-key': key }, name: 'x.wav' });
      assert.equal(first.status, 200, 'the first transcription is answered');
      // The same content in a new multipart body (another boundary, another file name) is a replay.
      const again = await transcribeFile(a.key, clip, { language: 'en' }, { headers: { 'idempotency-key': key }, name: 'y.wav' });
      assert.equal(again.status, 409, 'the same content again is refused with 409');
      assert.equal(again.json.error.code, 'idempotent_replay', 'the same content is an idempotent replay');
      const other = await transcribeFile(a.key, clip, { language: 'de' }, { headers: { 'idempotency-key': key } });
      assert.equal(other.status, 409, 'other content under the same key is refused with 409');
      assert.equal(other.json.error.code, 'idempotency_key_reused', 'the key was reused for other content');

      const sp = { model: 'sim-tts-1', input: '[sim seconds=0.1 cost_delay=100] Once.' };
      const s1 = await speech(a.key, sp, { 'idempotency-key': key + '-s' });
      assert.equal(s1.status, 200, 'the first speech is answered');
      await s1.arrayBuffer();
      const s2 = await speech(a.key, sp, { 'idempotency-key': key + '-s' });
      assert.equal(s2.status, 409, 'the same speech again is refused with 409');
      assert.equal((await jsonOf(s2)).error.code, 'idempotent_replay', 'the same speech is an idempotent replay');
      const s3 = await speech(a.key, { ...sp, input: 'Twice.' }, { 'idempotency-key': key + '-s' });
      assert.equal((await jsonOf(s3)).error.code, 'idempotency_key_reused', 'other speech under the same key is a reused key');

      // A request refused before any output frees its key.
      const poor = await newAccount({ credits: '0' });
      const refused = await speech(poor.key, sp, { 'idempotency-key': 'retry-me' });
      assert.equal(refused.status, 402, 'a balance of zero is refused with 402');
      await env.db('accounts').where({ id: poor.accountId }).update({ total_credits: '1' });
      const retried = await speech(poor.key, sp, { 'idempotency-key': 'retry-me' });
      assert.equal(retried.status, 200, 'the key of a refused request can be used again');
      await retried.arrayBuffer();

      const rows = await reservations(a.accountId);
      assert.equal(rows.length, 2, 'replays are neither processed nor billed');
      for (const r of rows) await settled(r.id);
      await settled((await reservations(poor.accountId))[0].id);
    });
  });

  describe('audio models', () => {
    it('lists speech and transcription models with their fields, filtered by type and tier', async () => {
      const all = await call(base(), '/v1/audio/models', { key: acct.key });
      assert.equal(all.status, 200, 'the audio models are listed');
      const ids = all.json.data.map((m: { id: string }) => m.id);
      assert.deepEqual(ids, ['sim-tts-1', 'sim-tts-clone', 'sim-whisper-1'], 'the speech and transcription models, in order');
      const tts = all.json.data[0];
      assert.equal(tts.type, 'speech', 'sim-tts-1 is a speech model');
      assert.equal(tts.endpoint, '/v1/audio/speech', 'the speech model names its endpoint');
      assert.deepEqual(tts.voices, ['alloy', 'verse', 'sage'], "the speech model's voices");
      assert.equal(tts.voice_cloning, false, 'sim-tts-1 does not clone voices');
      assert.deepEqual(tts.response_formats, ['mp3', 'pcm'], "the speech model's response formats");
      assert.deepEqual(tts.pricing, { per_character: PER_CHAR }, 'the speech model is priced per character');
      assert.equal(all.json.data[1].voice_cloning, true, 'sim-tts-clone clones voices');
      const tr = await call(base(), '/v1/audio/models?type=transcription', { key: acct.key });
      assert.deepEqual(tr.json.data.map((m: { id: string }) => m.id), ['sim-whisper-1'], 'type=transcription lists the transcription model only');
      assert.equal(tr.json.data[0].type, 'transcription', "the transcription model's type");
      assert.deepEqual(tr.json.data[0].input_formats, ['wav', 'mp3', 'flac', 'm4a', 'ogg', 'webm', 'aac'], "the transcription model's input formats");
      assert.deepEqual(tr.json.data[0].pricing, { per_second: PER_SECOND }, 'the transcription model is priced per second');
      const sp = await call(base(), '/v1/audio/models?type=speech', { key: acct.key });
      assert.deepEqual(sp.json.data.map((m: { id: string }) => m.id), ['sim-tts-1', 'sim-tts-clone'], 'type=speech lists the speech models only');
      const bad = await call(base(), '/v1/audio/models?type=video', { key: acct.key });
      assert.equal(bad.status, 400, 'an unknown type is refused with 400');
      assert.equal(bad.json.error.param, 'type', 'the refusal names the type');
      const trial = await newAccount({ tier: 'free_trial' });
      const listed = (await call(base(), '/v1/audio/models?type=speech', { key: trial.key })).json.data.map((m: { id: string }) => m.id);
      assert.deepEqual(listed, ['sim-tts-1'], 'the cloning model is outside the free-trial tier');
      const caps = (await call(base(), '/v1/models', { key: acct.key })).json.data.find((m: { id: string }) => m.id === 'sim-gpt-audio').capabilities;
      assert.deepEqual(caps, ['text', 'audio_input', 'audio_output'], "the audio chat model's capabilities");
    });
  });

  describe('afterwards', () => {
    it('keeps the money invariants of every account used here', async () => {
      const inv = await checkInvariants(acct.accountId);
      assert.equal(inv.reservations.pending, 0, 'no reservation is left pending');
      assert.equal(Number(inv.account.reserved_credits), 0, 'nothing is left reserved');
      assert.ok(close(Number(inv.account.total_usage), Number(inv.ledger.usage)), `total usage ${inv.account.total_usage} equals the ledger's ${inv.ledger.usage}`);
      assert.ok(close(Number(inv.account.total_usage), Number(inv.reservations.charged)), `total usage ${inv.account.total_usage} equals the reservations' charges ${inv.reservations.charged}`);
    });
  });
});
