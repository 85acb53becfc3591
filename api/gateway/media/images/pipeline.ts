import type { Context } from 'koa';
import { GatewayError } from '../../../../domain/shared/errors';
import type { RequestReport } from '../../../../domain/credits/reservation';
import { sseEvents } from '../../../../providers/sse';
import { postUpstream, UpstreamFailure, type UpstreamResponse } from '../../../../providers/upstream';
import { providerAuthHeaders, providerFor } from '../../../../providers';
import type { ImagesEndpoint, UpstreamImageUsage } from '../../../../providers/endpoints';
import type { Access } from '../../shared/access';
import type { Hold, Reservations } from '../../../../services/credits/holds';
import type { Db } from '../../../../platform/db';
import { beginBillableCall } from '../../shared/billable-call';
import { upstreamFailure, upstreamRefusal } from '../../shared/upstream-failure';
import { chargeOf, holdFor, imageUsage, mediaCharge, outputPixels, type ImageRates } from './billing';
import { IMAGE_MEDIA_TYPE, sniffImage } from './image-kind';
import { openEventStream } from '../../shared/event-stream';
import { watchClient, type ClientWatch } from '../../shared/client-watch';
import type { ImageRequest } from './schema';

// The one path of every image request once it is valid: claim the idempotency key, hold,
// forward, answer (plain or streamed), report what was received to the reservation workflow.

export interface ImageDeps {
  db: Db;
  reservations: Reservations;
  upstreamTimeoutMs: number;
}

export interface ImageJob {
  req: ImageRequest;
  access: Access;
  rates: ImageRates;
  /** input images as data URLs (fetched URLs, uploads) */
  inputs: string[];
  endpoint: string;
  idempotency: { key: string; bodyHash: string } | null;
}

const NOT_BILLED = { billable: false, usage: null, providerCost: null } as const;
const LEFT = 'the client closed the connection before the answer';

function mediaType(b64: string): string {
  const kind = sniffImage(Buffer.from(b64.slice(0, 24), 'base64'));
  return kind ? IMAGE_MEDIA_TYPE[kind] : 'application/octet-stream';
}

export async function runImageJob(deps: ImageDeps, ctx: Context, job: ImageJob): Promise<void> {
  const started = Date.now();
  // Watched from now on: a client that leaves aborts the provider call, whenever it leaves.
  const client = watchClient(ctx);
  const { model, provider, complimentary } = job.access;
  const { req } = job;
  const images = providerFor(provider.kind, 'images');
  if (!images) throw new GatewayError('provider_unavailable', { model: model.id });
  const usageDetails = { images_requested: req.n, input_images: job.inputs.length, size: sizeLabel(req) };
  const { hold, report, key } = await beginBillableCall(deps, ctx, {
    started,
    idempotency: job.idempotency ? { scope: 'images', bodyHash: job.idempotency.bodyHash } : null,
    hold: { model: model.id, provider: provider.id, endpoint: job.endpoint, tariff: model, held: complimentary ? '0' : holdFor(job.rates, req.n, job.inputs.length), complimentary, modality: 'image' },
    details: (r) => ({ usageDetails: { ...usageDetails, ...r.usageDetails } }),
  });
  const failed = async (r: Omit<RequestReport, 'latencyMs' | 'outcome' | 'billable' | 'usage' | 'providerCost'> & { outcome?: 'cancelled' }, err: GatewayError) => {
    report({ ...NOT_BILLED, outcome: 'failed', ...r });
    if (!r.uncertain) await key.release();
    return err;
  };

  const stream = req.stream && model.capabilities.includes('streaming');
  const body = images.requestBody(
    model.upstream_model,
    {
      prompt: req.prompt,
      n: req.n,
      stream,
      partial_images: req.partial_images,
      size: req.size ?? (req.resolution || req.aspect_ratio ? sizeLabel(req) : undefined),
      quality: req.quality,
      output_format: req.output_format,
      output_compression: req.output_compression,
      background: req.background,
      seed: req.seed,
      negative_prompt: req.negative_prompt,
      guidance: req.guidance,
      steps: req.steps,
      options: req.providerOptions?.[provider.id] as Record<string, unknown> | undefined,
    },
    job.inputs,
  );
  let upstream: UpstreamResponse;
  try {
    upstream = await postUpstream(provider, job.inputs.length ? images.editsPath : images.generationsPath, body, {
      timeoutMs: deps.upstreamTimeoutMs,
      signal: client.abort.signal,
      authHeaders: (key) => providerAuthHeaders(provider.kind, key),
    });
  } catch (err) {
    if (client.gone()) return void (await failed({ outcome: 'cancelled', httpStatus: 499, error: LEFT }, new GatewayError('generation_failed')));
    const e = upstreamFailure(err, report, deps.upstreamTimeoutMs, model.id);
    // A call the provider may have received keeps its key: a retry must not run it twice.
    if (err instanceof UpstreamFailure && !err.maySent) await key.release();
    throw e;
  }
  if (upstream.statusCode !== 200) {
    const e = await upstreamRefusal(upstream, report, model.id, { message: images.errorMessage });
    await key.release();
    throw e;
  }
  ctx.set('x-gateway-request-id', hold.reservationId);
  const finish = (received: number, tokens: UpstreamImageUsage | null, cost: number | undefined, outcome: 'completed' | 'cancelled' = 'completed') => {
    const media = mediaCharge(job.rates, received, job.inputs.length, cost, provider);
    const charge = chargeOf(hold, media);
    report({
      outcome,
      billable: true,
      usage: tokens ? { prompt_tokens: tokens.input, completion_tokens: tokens.output, cached_tokens: 0, cache_write_tokens: 0, reasoning_tokens: null } : null,
      providerCost: media.billingSource === 'provider_cost' ? media.amount : null,
      media,
      usageDetails: { images_returned: received },
      httpStatus: outcome === 'cancelled' ? 499 : 200,
    });
    void key.recordResult(hold.reservationId).catch(() => {});
    return { usage: imageUsage(hold, charge, tokens), charge: charge.charge };
  };

  if (stream) return relayImageStream(ctx, upstream, { images, hold, client, finish, failed });

  let json: Record<string, unknown>;
  try {
    json = (await upstream.body.json()) as Record<string, unknown>;
  } catch (err) {
    if (client.gone()) return void (await failed({ outcome: 'cancelled', httpStatus: 499, error: LEFT }, new GatewayError('generation_failed')));
    throw await failed({ uncertain: true, httpStatus: 502, error: String(err) }, new GatewayError('provider_error', { detail: 'the connection broke while reading the answer' }));
  }
  const answer = images.parseResponse(json);
  // The provider made the images but the client left: cancelled, billed as the provider reports.
  if (client.gone()) return void finish(answer.images.length, answer.usage, answer.cost, 'cancelled');
  if (answer.images.length === 0) {
    // Nothing came back: not billed, unless the provider says it charged.
    if (answer.cost && answer.cost > 0) finish(0, answer.usage, answer.cost);
    else await failed({ httpStatus: 502, error: 'the provider returned no image' }, new GatewayError('generation_failed'));
    throw new GatewayError('generation_failed');
  }
  const { usage, charge } = finish(answer.images.length, answer.usage, answer.cost);
  ctx.set('x-gateway-cost', charge);
  ctx.body = { created: Math.floor(started / 1000), data: answer.images.map((b64) => ({ b64_json: b64, media_type: mediaType(b64) })), usage };
}

function sizeLabel(req: ImageRequest): string {
  const { width, height } = outputPixels(req);
  return `${width}x${height}`;
}

interface StreamParts {
  images: ImagesEndpoint;
  hold: Hold;
  client: ClientWatch;
  finish: (received: number, tokens: UpstreamImageUsage | null, cost: number | undefined, outcome?: 'completed' | 'cancelled') => { usage: ReturnType<typeof imageUsage> };
  failed: (r: { httpStatus: number; error: string; uncertain?: boolean; outcome?: 'cancelled' }, err: GatewayError) => Promise<GatewayError>;
}

/**
 * Previews are relayed as they come (not billed). Each completed image is held back until the
 * next one arrives, so the last one can carry the usage of everything received; then [DONE].
 * A stream that breaks after some images still delivers and bills those.
 */
async function relayImageStream(ctx: Context, upstream: UpstreamResponse, s: StreamParts): Promise<void> {
  const { res, clientGone } = openEventStream(ctx, s.hold.reservationId, s.client);
  const created = Math.floor(Date.now() / 1000);
  const send = (event: string, data: unknown) => res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  const completedEvent = (b64: string, imageIndex: number) => ({ type: 'image_generation.completed', b64_json: b64, media_type: mediaType(b64), image_index: imageIndex, created_at: created });
  let pending: { b64: string; imageIndex: number } | null = null;
  let delivered = 0;
  let received = 0;
  let tokens: UpstreamImageUsage | null = null;
  let cost: number | undefined;
  let broken = false;
  try {
    for await (const ev of sseEvents(upstream.body)) {
      const e = s.images.parseStreamEvent(ev.data);
      if (!e) continue;
      if (e.type === 'partial') {
        send('image_generation.partial_image', { type: 'image_generation.partial_image', b64_json: e.b64, media_type: mediaType(e.b64), image_index: e.imageIndex, partial_image_index: e.partialIndex, created_at: created });
        continue;
      }
      if (pending) {
        send('image_generation.completed', completedEvent(pending.b64, pending.imageIndex));
        delivered++;
      }
      pending = { b64: e.b64, imageIndex: e.imageIndex };
      received++;
      tokens = e.usage ?? tokens;
      cost = e.cost ?? cost;
    }
  } catch {
    broken = true;
  }
  if (clientGone()) {
    // Only what reached the client is billed, at the model rate.
    if (delivered > 0) s.finish(delivered, null, undefined, 'cancelled');
    // Nothing reached the client: not billed, and still an early close (spec 1 section 2.9).
    else await s.failed({ outcome: 'cancelled', httpStatus: 499, error: 'the client closed the stream before an image arrived' }, new GatewayError('generation_failed'));
    return;
  }
  if (!pending) {
    const err = await s.failed({ httpStatus: 502, uncertain: broken, error: broken ? 'the provider stream broke before an image' : 'the provider returned no image' }, new GatewayError('generation_failed'));
    send('error', err.toEnvelope());
    res.end('data: [DONE]\n\n');
    return;
  }
  const { usage } = s.finish(received, tokens, cost);
  send('image_generation.completed', { ...completedEvent(pending.b64, pending.imageIndex), usage });
  res.end('data: [DONE]\n\n');
}
