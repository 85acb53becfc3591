import type { Context } from 'koa';
import { GatewayError } from '../../../domain/errors';
import { lt, unitsCharge } from '../../../domain/pricing';
import { ADAPTERS } from '../../../providers';
import { GENERATION_ID_HEADER, TRANSCRIPTION_PATH, transcriptionRequest, transcriptionResult } from '../../../providers/openai/audio';
import type { UpstreamResponse } from '../../../providers/upstream';
import { postUpstreamForm } from '../../../providers/upstream';
import type { AuthRecord } from '../../auth-store';
import { checkAccess } from '../access';
import { contentHash } from '../idempotency';
import { claimAudioKey, mediaUsage, unitRate, upstreamFailure, upstreamRefusal, type AudioDeps, type Report } from './common';
import { holdSeconds } from './format';
import { readTranscription } from './transcription-request';

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
    const adapter = ADAPTERS[provider.kind];
    if (!adapter) throw new GatewayError('provider_unavailable', { model: model.id });
    const perSecond = unitRate(model.details, 'per_second', model.id);
    const held = complimentary ? '0' : unitsCharge(perSecond, holdSeconds({ kind: 'accepted', format: t.format, seconds: t.seconds }, t.audio.length));
    const release = await claimAudioKey(ctx, deps.db, contentHash('transcription', JSON.stringify(t.fields), t.audio));

    let hold;
    try {
      hold = await deps.reservations.hold({
        reservationId: ctx.state.requestId,
        accountId: auth.accountId,
        keyId: auth.keyId,
        model: model.id,
        provider: provider.id,
        endpoint: '/v1/audio/transcriptions',
        modality: 'audio',
        tariff: model,
        held,
        complimentary,
      });
    } catch (err) {
      await release?.();
      throw err;
    }
    const report: Report = (r) => void hold.report({ ...r, latencyMs: Date.now() - started });
    const form = transcriptionRequest(
      { audio: t.audio, format: t.format, language: t.language, temperature: t.temperature, verbose: t.verbose, granularities: t.granularities, options: t.providerOptions?.[provider.id] },
      model.upstream_model,
    );
    let upstream: UpstreamResponse;
    let json: Record<string, unknown>;
    try {
      upstream = await postUpstreamForm(provider, TRANSCRIPTION_PATH, form, { timeoutMs: deps.upstreamTimeoutMs, authHeaders: adapter.authHeaders });
    } catch (err) {
      await release?.();
      throw upstreamFailure(err, report, deps.upstreamTimeoutMs, model.id);
    }
    if (upstream.statusCode !== 200) {
      await release?.();
      throw await upstreamRefusal(upstream, report, model.id, audioParam);
    }
    try {
      json = (await upstream.body.json()) as Record<string, unknown>;
    } catch (err) {
      throw upstreamFailure(err, report, deps.upstreamTimeoutMs, model.id);
    }
    const { body: transcript, usage } = transcriptionResult(json);
    const seconds = typeof usage?.seconds === 'number' ? usage.seconds : null;
    // Without a measured duration the held seconds are the estimate.
    const estimate = seconds === null ? held : unitsCharge(perSecond, seconds);
    const shown = lt(held, estimate) ? held : estimate;
    const generationId = upstream.headers[GENERATION_ID_HEADER]?.toString();
    report({
      outcome: 'completed',
      billable: true,
      usage: null,
      providerCost: null,
      httpStatus: 200,
      media: { billingSource: 'estimate', amount: estimate },
      usageDetails: usage ?? { seconds: null },
      lateCost: generationId ? { providerId: provider.id, generationId } : undefined,
    });
    ctx.set('x-gateway-request-id', hold.reservationId);
    ctx.set('x-gateway-cost', hold.complimentary ? '0' : shown);
    ctx.body = { ...transcript, usage: { ...usage, ...mediaUsage(hold, shown, generationId ? 'pending' : 'estimate') } };
  };
}
