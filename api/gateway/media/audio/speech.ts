import type { Context } from 'koa';
import { GatewayError } from '../../../../domain/shared/errors';
import { tokensCharge, unitsCharge, type Credits } from '../../../../domain/credits/pricing';
import { providerAuthHeaders, providerFor } from '../../../../providers';
import type { SpeechParams } from '../../../../providers/endpoints';
import { postUpstream, type UpstreamResponse } from '../../../../providers/upstream';
import type { AuthRecord } from '../../../../services/keys/auth-store';
import type { CatalogModel } from '../../../../domain/catalog/model';
import { readJsonObject } from '../../../shared/http';
import { checkAccess } from '../../shared/access';
import { contentHash } from '../../../../services/idempotency/claims';
import { type AudioDeps, audioPricing, type AudioPricing, decodeBase64, rejectUnknown } from './common';
import { beginBillableCall } from '../../shared/billable-call';
import { watchClient, type ClientWatch } from '../../shared/client-watch';
import { upstreamFailure, upstreamRefusal } from '../../shared/upstream-failure';
import { inspectAudio } from './format';

const MAX_INPUT = 10_000;
const MAX_SAMPLE_BYTES = 15 * 1024 * 1024;
const MAX_OPTIONS_BYTES = 8 * 1024;
// A 15 MB sample in base64 plus the rest of the body.
const BODY_LIMIT = Math.ceil((MAX_SAMPLE_BYTES * 4) / 3) + 1024 * 1024;
const KNOWN = ['model', 'input', 'voice', 'response_format', 'speed', 'input_references', 'provider'];
/**
 * Audio output tokens a byte of input text may become, at most (token pricing). OpenAI counts an
 * audio token per 50 ms of speech, and voices speak ~15 characters a second: ~1.3 tokens a
 * character; 4 leaves room for voices down to 5 characters a second. The simulator makes 60 ms of
 * audio a character at 20 tokens a second: 1.2. Per UTF-8 byte, so scripts spoken longer per
 * character (CJK: 3 bytes) get more room.
 */
const AUDIO_TOKENS_PER_BYTE_BOUND = 4;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Spec 4.4 without the model: 400 naming the parameter, before anything is held. */
function parse(body: Record<string, unknown>): SpeechParams & { model: string } {
  rejectUnknown(body, KNOWN);
  const { model, input, voice, response_format: format, speed } = body;
  if (model === undefined || model === '') throw new GatewayError('missing_required_parameter', { param: 'model' });
  if (typeof model !== 'string') throw new GatewayError('invalid_parameter', { param: 'model', detail: 'must be a string' });
  if (input === undefined || input === '') throw new GatewayError('missing_required_parameter', { param: 'input' });
  if (typeof input !== 'string') throw new GatewayError('invalid_parameter', { param: 'input', detail: 'must be a string' });
  if (input.length > MAX_INPUT) throw new GatewayError('invalid_parameter', { param: 'input', detail: `at most ${MAX_INPUT} characters` });
  if (voice !== undefined && (typeof voice !== 'string' || !voice)) throw new GatewayError('invalid_parameter', { param: 'voice', detail: 'must be a voice id' });
  if (format !== undefined && typeof format !== 'string') throw new GatewayError('invalid_parameter', { param: 'response_format', detail: "'mp3' or 'pcm'" });
  if (format !== undefined && format !== 'mp3' && format !== 'pcm') throw new GatewayError('unsupported_parameter', { param: 'response_format', detail: `'${format}' is not offered; use 'mp3' or 'pcm'` });
  if (speed !== undefined && (typeof speed !== 'number' || !(speed >= 0.25 && speed <= 4))) throw new GatewayError('invalid_parameter', { param: 'speed', detail: 'a number from 0.25 to 4' });
  return { model, input, voice: voice as string | undefined, response_format: format ?? 'pcm', speed: speed as number | undefined };
}

/** Voice cloning parts: one voice sample (≤ 15 MB, audio by its content) and at most one transcript. */
async function checkReferences(refs: unknown): Promise<unknown[]> {
  if (!Array.isArray(refs) || refs.length === 0) throw new GatewayError('invalid_parameter', { param: 'input_references', detail: 'an array of one input_audio part and at most one text part' });
  let audio = 0;
  let text = 0;
  for (const [i, r] of refs.entries()) {
    const param = `input_references[${i}]`;
    if (isObject(r) && r.type === 'text' && typeof r.text === 'string') {
      text++;
      continue;
    }
    if (!isObject(r) || r.type !== 'input_audio' || !isObject(r.input_audio) || typeof r.input_audio.data !== 'string') {
      throw new GatewayError('invalid_parameter', { param, detail: "{ type: 'input_audio', input_audio: { data } } or { type: 'text', text }" });
    }
    audio++;
    const bytes = decodeBase64(r.input_audio.data);
    if (!bytes || bytes.length === 0) throw new GatewayError('invalid_audio', { param: `${param}.input_audio.data`, detail: 'not valid base64' });
    if (bytes.length > MAX_SAMPLE_BYTES) throw new GatewayError('request_too_large', { limit: '15 MB (voice sample)', param: `${param}.input_audio.data` });
    if ((await inspectAudio(bytes)).kind === 'unknown') throw new GatewayError('invalid_audio', { param: `${param}.input_audio.data`, detail: 'the voice sample is not recognised audio' });
  }
  if (audio !== 1) throw new GatewayError('invalid_parameter', { param: 'input_references', detail: 'exactly one input_audio part (the voice sample)' });
  if (text > 1) throw new GatewayError('invalid_parameter', { param: 'input_references', detail: 'at most one text part (the transcript of the sample)' });
  return refs;
}

/** `provider: { options: { <slug>: {…} } }`, at most 8 KB; this provider's part is forwarded. */
function providerOptions(provider: unknown, slug: string): Record<string, unknown> | undefined {
  if (provider === undefined) return undefined;
  if (!isObject(provider) || Object.keys(provider).some((k) => k !== 'options') || !isObject(provider.options)) {
    throw new GatewayError('invalid_parameter', { param: 'provider', detail: '{ options: { <provider_slug>: { … } } }' });
  }
  if (Buffer.byteLength(JSON.stringify(provider.options)) > MAX_OPTIONS_BYTES) throw new GatewayError('invalid_parameter', { param: 'provider.options', detail: 'at most 8 KB' });
  const mine = provider.options[slug];
  if (mine !== undefined && !isObject(mine)) throw new GatewayError('invalid_parameter', { param: `provider.options.${slug}`, detail: 'must be an object' });
  return mine;
}

function checkModel(p: SpeechParams, model: CatalogModel, body: Record<string, unknown>): void {
  const voices = model.details.voices;
  if (p.voice !== undefined && Array.isArray(voices) && voices.length > 0 && !voices.includes(p.voice)) {
    throw new GatewayError('invalid_parameter', { param: 'voice', detail: `one of ${voices.join(', ')}` });
  }
  if (body.input_references !== undefined && model.details.voice_cloning !== true) {
    throw new GatewayError('unsupported_parameter', { param: 'input_references', detail: `${model.id} has no voice cloning` });
  }
}

/**
 * The hold (spec 4.8): characters × rate, or an upper bound of the tokens. A byte-level token holds
 * at least one UTF-8 byte, so input tokens ≤ bytes; audio output is bounded from the same bytes,
 * and a slower speed makes longer audio.
 */
function speechHold(pricing: AudioPricing, p: SpeechParams): Credits {
  if (pricing.kind === 'unit') return unitsCharge(pricing.rate, p.input.length);
  const bytes = Buffer.byteLength(p.input);
  return tokensCharge(pricing.rates, bytes, Math.ceil((bytes * AUDIO_TOKENS_PER_BYTE_BOUND) / Math.min(1, p.speed ?? 1)));
}

/** POST /v1/audio/speech (spec 4.4): the provider's bytes streamed as they arrive; its late cost is charged. */
export function speech(deps: AudioDeps) {
  return async (ctx: Context) => {
    const started = Date.now();
    const body = await readJsonObject(ctx, BODY_LIMIT);
    const p = parse(body);
    const auth: AuthRecord = ctx.state.auth;
    const { model, provider, complimentary } = await checkAccess(deps.catalog, auth, p.model, 'speech_generation', 'POST /v1/audio/speech');
    checkModel(p, model, body);
    const params: SpeechParams = { ...p, input_references: body.input_references === undefined ? undefined : await checkReferences(body.input_references), options: providerOptions(body.provider, provider.id) };
    const endpoint = providerFor(provider.kind, 'speech');
    if (!endpoint) throw new GatewayError('provider_unavailable', { model: model.id });
    // The answer reports no usage, so the hold is also the estimate should the provider record no cost.
    const estimate = speechHold(audioPricing(model.details, 'per_character', model.id), p);
    const { hold, report, key } = await beginBillableCall(deps, ctx, {
      started,
      idempotency: { scope: 'audio', bodyHash: contentHash('speech', JSON.stringify(body)) },
      hold: { model: model.id, provider: provider.id, endpoint: '/v1/audio/speech', modality: 'audio', tariff: model, held: complimentary ? '0' : estimate, complimentary },
    });
    // A client that leaves, before or during the audio, stops the provider.
    const client = watchClient(ctx);
    let upstream: UpstreamResponse;
    try {
      upstream = await postUpstream(provider, endpoint.path, endpoint.request(params, model.upstream_model), {
        timeoutMs: deps.upstreamTimeoutMs,
        signal: client.abort.signal,
        authHeaders: (key) => providerAuthHeaders(provider.kind, key),
      });
    } catch (err) {
      await key.release();
      if (client.gone()) {
        // Gone before the provider answered: no audio reached anyone, and no cost record is known.
        report({ outcome: 'cancelled', billable: false, usage: null, providerCost: null, httpStatus: 499, error: 'the client closed before the provider answered' });
        return;
      }
      throw upstreamFailure(err, report, deps.upstreamTimeoutMs, model.id);
    }
    if (upstream.statusCode !== 200) {
      await key.release();
      throw await upstreamRefusal(upstream, report, model.id);
    }
    const generationId = upstream.headers[endpoint.generationIdHeader]?.toString();
    // No cost in the answer: the provider records it, the reservation workflow fetches it.
    const billed = (outcome: 'completed' | 'cancelled' | 'failed', httpStatus: number, error?: string) =>
      report({
        outcome,
        billable: true,
        usage: null,
        providerCost: null,
        httpStatus,
        error: error ?? null,
        media: { billingSource: 'estimate', amount: estimate },
        usageDetails: { characters: p.input.length },
        lateCost: generationId ? { providerId: provider.id, generationId } : undefined,
      });
    await relay(ctx, upstream, { requestId: hold.reservationId, contentType: endpoint.contentType[params.response_format], client, billed });
  };
}

interface RelayOptions {
  requestId: string;
  contentType: string;
  /** set when the client's connection closed before the answer ended */
  client: ClientWatch;
  billed: (outcome: 'completed' | 'cancelled' | 'failed', httpStatus: number, error?: string) => void;
}

/** Writes the bytes as they arrive, with back-pressure. */
async function relay(ctx: Context, upstream: UpstreamResponse, o: RelayOptions): Promise<void> {
  ctx.respond = false;
  const res = ctx.res;
  if (!o.client.gone()) {
    res.writeHead(200, { 'content-type': o.contentType, 'cache-control': 'no-cache', 'x-gateway-request-id': o.requestId });
    res.flushHeaders();
  }
  const drained = () =>
    new Promise<void>((resolve) => {
      if (res.destroyed) return resolve();
      res.once('drain', resolve);
      res.once('close', resolve);
    });
  try {
    for await (const chunk of upstream.body) {
      if (o.client.gone() || res.destroyed) break;
      if (!res.write(chunk)) await drained();
    }
  } catch (err) {
    if (!o.client.gone()) {
      // The provider broke off: the client sees a cut body; the provider's recorded cost (if any) is charged.
      o.billed('failed', 502, `the provider stream broke: ${err instanceof Error ? err.message : String(err)}`);
      res.destroy();
      return;
    }
  }
  if (o.client.gone() || res.destroyed) {
    upstream.body.destroy();
    return o.billed('cancelled', 499);
  }
  o.billed('completed', 200);
  res.end();
}
