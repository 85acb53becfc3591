import type { Context } from 'koa';
import { LRUCache } from 'lru-cache';
import { z } from 'zod';
import { validate } from '../../../shared/validate';
import { GatewayError } from '../../../../domain/shared/errors';
import { toNumber } from '../../../../domain/credits/pricing';
import { providerFor } from '../../../../providers';
import type { AuthRecord } from '../../../../services/keys/auth-store';
import { findJob as findJobRow, type JobRow } from '../../../../services/media/jobs';
import type { VideoDeps } from './deps';
import { videoDetails } from './schema';
import { jobObject } from './view';

/** The job if it exists on this account; anything else is the same 404 (spec 2.7). */
async function findJob(deps: VideoDeps, auth: AuthRecord, id: string): Promise<JobRow> {
  const row = await findJobRow(deps.db, auth.accountId, id);
  if (!row) throw new GatewayError('not_found', { detail: `No video job '${id}' on this account.` });
  return row;
}

/**
 * GET /v1/videos/{id}: reads the jobs table only, so polling never makes work or charges.
 * Polls faster than one per interval per job and key get 429. The limit is kept in this
 * process (an LRU of last-poll times), not in the database: a poll stays one read.
 */
export function getVideo(deps: VideoDeps) {
  const interval = deps.videoPollIntervalMs ?? 1000;
  const lastPoll = new LRUCache<string, true>({ max: 200_000, ttl: interval, ttlAutopurge: false });
  return async (ctx: Context) => {
    const auth: AuthRecord = ctx.state.auth;
    const id = ctx.params.id as string;
    const slot = `${auth.keyId}:${id}`;
    if (lastPoll.has(slot)) {
      const wait = Math.max(1, Math.ceil(lastPoll.getRemainingTTL(slot) / 1000));
      throw new GatewayError('rate_limit_exceeded', { retry_after: wait }, { 'retry-after': String(wait) });
    }
    lastPoll.set(slot, true);
    const job = await findJob(deps, auth, id);
    ctx.set('x-gateway-request-id', job.reservation_id);
    ctx.body = jobObject(ctx, job);
  };
}

export const videoContentQuery = z.object({ index: z.string().regex(/^\d{1,4}$/, 'a whole number: which of the content items').default('0') });

/** GET /v1/videos/{id}/content?index=n: the provider's bytes streamed through, Range passed on. */
export function videoContent(deps: VideoDeps) {
  return async (ctx: Context) => {
    const auth: AuthRecord = ctx.state.auth;
    const id = ctx.params.id as string;
    const job = await findJob(deps, auth, id);
    // The content needs the key that created the job; another key sees no such job.
    if (job.key_id !== auth.keyId) throw new GatewayError('not_found', { detail: `No video job '${id}' for this API key.` });
    const index = Number(validate(videoContentQuery, ctx.query).index);
    if (index >= job.content_count) {
      throw new GatewayError('invalid_parameter', { param: 'index', detail: `an integer from 0 to ${job.content_count - 1}` });
    }
    if (job.status !== 'completed' || !job.upstream_id) throw new GatewayError('generation_not_ready', { id, status: job.status });
    const provider = await deps.catalog.provider(job.provider_id);
    const videos = provider && providerFor(provider.kind, 'videos');
    if (!provider || !videos) throw new GatewayError('provider_unavailable', { model: job.model });
    const abort = new AbortController();
    ctx.req.once('close', () => abort.abort());
    const range = ctx.get('range') || undefined;
    let res;
    try {
      res = await videos.fetchContent(provider, job.upstream_id, range, abort.signal, deps.upstreamTimeoutMs);
    } catch (err) {
      throw new GatewayError('provider_error', { detail: `content could not be fetched (${err instanceof Error ? err.message : String(err)})` });
    }
    const s = res.statusCode;
    if (s !== 200 && s !== 206) {
      await res.body.dump().catch(() => {});
      if (s === 410 || s === 404) throw new GatewayError('content_expired', { id });
      if (s === 416) throw new GatewayError('range_not_satisfiable', { detail: range ?? '' }, { 'content-range': String(res.headers['content-range'] ?? '') });
      if (s === 409) throw new GatewayError('generation_not_ready', { id, status: job.status });
      throw new GatewayError('provider_error', { detail: `HTTP ${s} for the video content` });
    }
    ctx.status = s;
    for (const h of ['content-type', 'content-length', 'content-range', 'accept-ranges']) {
      const v = res.headers[h];
      if (v !== undefined) ctx.set(h, String(v));
    }
    ctx.set('x-gateway-request-id', job.reservation_id);
    ctx.body = res.body;
  };
}

/** GET /v1/videos/models: the video models this key may call, with the fields of spec 2.8. */
export function videoModels(deps: VideoDeps) {
  return async (ctx: Context) => {
    const auth: AuthRecord = ctx.state.auth;
    const list = (await deps.catalog.allModels()).filter(
      (m) => m.active && m.capabilities.includes('video_generation') && m.tiers.includes(auth.tier) && (!auth.allowedModels || auth.allowedModels.includes(m.id)),
    );
    ctx.body = {
      object: 'list',
      data: list
        .sort((a, b) => a.id.localeCompare(b.id))
        .map((m) => {
          const d = videoDetails(m);
          return {
            id: m.id,
            object: 'model',
            owned_by: m.provider_id,
            capabilities: m.capabilities,
            supported_durations: d.supported_durations,
            default_duration: d.default_duration,
            supported_resolutions: d.supported_resolutions,
            supported_aspect_ratios: d.supported_aspect_ratios,
            generate_audio: d.generate_audio,
            // credits per second of video, by resolution
            pricing_skus: Object.fromEntries(Object.entries(d.pricing_skus).map(([k, v]) => [k, toNumber(v)])),
          };
        }),
    };
  };
}
