import type { Context } from 'koa';
import type { JobRow } from '../../../../services/media/jobs';
import { sub, toNumber } from '../../../../domain/credits/pricing';

// The job object of spec 1 section 2.7, from a video_jobs row joined with its reservation.

export const pollingUrl = (ctx: Context, id: string) => `${ctx.protocol}://${ctx.host}/v1/videos/${id}`;

/** The 202 of POST /v1/videos (also a replay under the same Idempotency-Key). */
export function accepted(ctx: Context, id: string, status: string) {
  return { id, object: 'video.generation', polling_url: pollingUrl(ctx, id), status };
}

export function jobObject(ctx: Context, j: JobRow) {
  const charged = j.r_status !== 'held';
  const charge = j.charge ?? '0';
  return {
    id: j.id,
    object: 'video.generation',
    polling_url: pollingUrl(ctx, j.id),
    status: j.status,
    model: j.model,
    duration: j.duration,
    resolution: j.resolution,
    created_at: Math.floor(j.created_at.getTime() / 1000),
    completed_at: j.finished_at ? Math.floor(j.finished_at.getTime() / 1000) : null,
    ...(j.status === 'completed'
      ? { unsigned_urls: Array.from({ length: j.content_count }, (_, n) => `${pollingUrl(ctx, j.id)}/content?index=${n}`) }
      : {}),
    ...(j.status === 'failed' ? { error: j.error ?? 'the provider reported a failure' } : {}),
    // Only once the final charge is set (spec 2.7): until then read again shortly after.
    ...(charged
      ? {
          usage: {
            cost: toNumber(charge),
            cost_details: { billing_source: j.billing_source, is_estimate: Boolean(j.is_estimate), reserved_credits: toNumber(j.held_credits) },
            balance: { before: toNumber(j.balance_before), after: toNumber(sub(j.balance_before, charge)), reserved_credits: toNumber(j.held_credits) },
          },
        }
      : {}),
  };
}
