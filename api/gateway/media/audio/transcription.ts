import type { Context } from 'koa';
import { GatewayError } from '../../../../domain/shared/errors';
import { lt, tokensCharge, unitsCharge, type Credits } from '../../../../domain/credits/pricing';
import { providerAuthHeaders, providerFor } from '../../../../providers';
import type { UpstreamResponse } from '../../../../providers/upstream';
import { postUpstreamForm } from '../../../../providers/upstream';
import type { AuthRecord } from '../../../../services/keys/auth-store';
import { checkAccess } from '../../shared/access';
import { contentHash } from '../../../../services/idempotency/claims';
import { type AudioDeps, audioPricing, type AudioPricing, mediaUsage, unsupportedFormat } from './common';
import { beginBillableCall } from '../../shared/billable-call';
import { watchClient } from '../../shared/client-watch';
import { upstreamFailure, upstreamRefusal } from '../../shared/upstream-failure';
import { holdSeconds } from './format';
import { readTranscription } from './transcription-request';

/**
 * Upper bounds a second of held audio, for token pricing. Audio input: OpenAI's transcribe models
 * count 10–17 audio tokens a second, Gemini 32. Text output: fast speech is ~5 words a second
 * and a word rarely takes over 3 tokens. The simulator counts 10 audio tokens and 2.5 one-token
 * words a second.
 */
const AUDIO_TOKENS_PER_SECOND_BOUND = 32;
const TEXT_TOKENS_PER_SECOND_BOUND = 16;

/** The hold (spec 4.8) for the held seconds: seconds × rate, or the token bounds × rates. */
function transcriptionHold(pricing: AudioPricing, seconds: number): Credits {
  if (pricing.kind === 'unit') return unitsCharge(pricing.rate, seconds);
  return tokensCharge(pricing.rates, seconds * AUDIO_TOKENS_PER_SECOND_BOUND, seconds * TEXT_TOKENS_PER_SECOND_BOUND);
}

const count = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : null);

/**
 * The estimate from what the provider measured (seconds, or input and output tokens, by how the
 * model is priced); the hold when it measured nothing usable.
 */
function transcriptionEstimate(pricing: AudioPricing, usage: Record<string, unknown> | null, held: Credits): Credits {
  if (pricing.kind === 'unit') {
    const seconds = count(usage?.seconds);
    return seconds === null ? held : unitsCharge(pricing.rate, seconds);
  }
  const input = count(usage?.input_tokens);
  const output = count(usage?.output_tokens);
  return input === null || output === null ? held : tokensCharge(pricing.rates, input, output);
}

/**
 * POST /v1/audio/transcriptions (spec 4.5): held for the duration read from the content; the
 * answer shows the estimate as `pending`, the reservation workflow charges the provider's late cost.
 */
export function transcription(deps: AudioDeps) {
  return async (ctx: Context) => {
    const started = Date.now();
    const t = await readTranscription(ctx);
    const audioParam = ctx.request.type === 'multipart/form-data' ? 'file' : 'input_audio';
    const auth: AuthRecord = ctx.state.auth;
    const { model, provider, complimentary } = await checkAccess(deps.catalog, auth, t.model, 'transcription', 'POST /v1/audio/transcriptions');
    const endpoint = providerFor(provider.kind, 'transcription');
    if (!endpoint) throw new GatewayError('provider_unavailable', { model: model.id });
    const pricing = audioPricing(model.details, 'per_second', model.id);
    const held = complimentary ? '0' : transcriptionHold(pricing, holdSeconds({ kind: 'accepted', format: t.format, seconds: t.seconds }, t.audio.length));
    const { hold, report, key } = await beginBillableCall(deps, ctx, {
      started,
      idempotency: { scope: 'audio', bodyHash: contentHash('transcription', JSON.stringify(t.fields), t.audio) },
      hold: { model: model.id, provider: provider.id, endpoint: '/v1/audio/transcriptions', modality: 'audio', tariff: model, held, complimentary },
    });
    // Watched from the hold on (the upload was read before): a client that leaves aborts the provider call.
    const client = watchClient(ctx);
    const left = () => report({ outcome: 'cancelled', billable: false, usage: null, providerCost: null, httpStatus: 499, error: 'the client closed the connection before the answer' });
    const form = endpoint.request(
      { audio: t.audio, format: t.format, language: t.language, temperature: t.temperature, verbose: t.verbose, granularities: t.granularities, options: t.providerOptions?.[provider.id] },
      model.upstream_model,
    );
    let upstream: UpstreamResponse;
    let json: Record<string, unknown>;
    try {
      upstream = await postUpstreamForm(provider, endpoint.path, form, {
        timeoutMs: deps.upstreamTimeoutMs,
        signal: client.abort.signal,
        authHeaders: (key) => providerAuthHeaders(provider.kind, key),
      });
    } catch (err) {
      await key.release();
      if (client.gone()) return left();
      throw upstreamFailure(err, report, deps.upstreamTimeoutMs, model.id);
    }
    if (upstream.statusCode !== 200) {
      await key.release();
      throw await upstreamRefusal(upstream, report, model.id, { special: unsupportedFormat(audioParam) });
    }
    try {
      json = (await upstream.body.json()) as Record<string, unknown>;
    } catch (err) {
      if (client.gone()) return left();
      throw upstreamFailure(err, report, deps.upstreamTimeoutMs, model.id);
    }
    const { body: transcript, usage } = endpoint.result(json);
    const estimate = transcriptionEstimate(pricing, usage, held);
    const shown = lt(held, estimate) ? held : estimate;
    const generationId = upstream.headers[endpoint.generationIdHeader]?.toString();
    // The provider transcribed it but the client left: cancelled, billed as the provider records it.
    report({
      outcome: client.gone() ? 'cancelled' : 'completed',
      billable: true,
      usage: null,
      providerCost: null,
      httpStatus: client.gone() ? 499 : 200,
      media: { billingSource: 'estimate', amount: estimate },
      usageDetails: usage ?? (pricing.kind === 'unit' ? { seconds: null } : { input_tokens: null, output_tokens: null }),
      lateCost: generationId ? { providerId: provider.id, generationId } : undefined,
    });
    ctx.set('x-gateway-request-id', hold.reservationId);
    ctx.set('x-gateway-cost', hold.complimentary ? '0' : shown);
    ctx.body = { ...transcript, usage: { ...usage, ...mediaUsage(hold, shown, generationId ? 'pending' : 'estimate') } };
  };
}
