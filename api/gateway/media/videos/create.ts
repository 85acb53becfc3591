import { randomBytes } from 'node:crypto';
import type { Context } from 'koa';
import { GatewayError } from '../../../../domain/shared/errors';
import { DEFAULT_VIDEO_POLLING, MEDIA_TASK_QUEUE, videoWorkflowId, type VideoJobInput } from '../../../../domain/media/video';
import { providerAuthHeaders, providerFor } from '../../../../providers';
import type { VideoCreate, VideosEndpoint } from '../../../../providers/endpoints';
import { postUpstream } from '../../../../providers/upstream';
import { startVideoJob } from '../../../../services/media/client';
import type { AuthRecord } from '../../../../services/keys/auth-store';
import { completedUpstreamId, insertJob, jobSummary, setUpstreamId } from '../../../../services/media/jobs';
import { readJsonObject } from '../../../shared/http';
import { validate } from '../../../shared/validate';
import { checkAccess } from '../../shared/access';
import { contentHash, stableJson } from '../../../../services/idempotency/claims';
import { claimRequestKey, takeHold } from '../../shared/billable-call';
import { upstreamFailure, upstreamRefusal } from '../../shared/upstream-failure';
import type { VideoDeps } from './deps';
import { planVideo, videoCreateSchema } from './schema';
import { accepted } from './view';

const ENDPOINT = 'POST /v1/videos';

const newJobId = () => `gen-vid-${Date.now()}-${randomBytes(10).toString('hex')}`;


/**
 * POST /v1/videos: validate (nothing held on a 400), hold duration × resolution price, write the
 * job row, start `video-<job_id>` (which owns the hold), forward the create, tell the workflow
 * the provider's answer, and answer 202. Polling and the final charge are the workflow's.
 */
export function createVideo(deps: VideoDeps) {
  return async (ctx: Context) => {
    const body = await readJsonObject(ctx);
    const req = validate(videoCreateSchema, body);
    const auth: AuthRecord = ctx.state.auth;
    const { model, provider, complimentary } = await checkAccess(deps.catalog, auth, req.model, 'video_generation', ENDPOINT);
    const plan = planVideo(req, model);
    const videos = providerFor(provider.kind, 'videos');
    if (!videos) throw new GatewayError('provider_unavailable', { model: model.id });
    let previousUpstream: string | null = null;
    if (req.previous_job_id) {
      previousUpstream = await completedUpstreamId(deps.db, auth.accountId, req.previous_job_id, model.id);
      if (previousUpstream === null) {
        throw new GatewayError('invalid_parameter', { param: 'previous_job_id', detail: `not a completed ${model.id} job of this account` });
      }
    }

    // Creation ends with the provider's answer or its timeout; a claim older than that (plus
    // slack for the hold and the workflow start) was left by a process that died.
    const claim = await claimRequestKey(deps.db, ctx, { scope: 'video', bodyHash: contentHash(stableJson(body)), staleAfterMs: deps.upstreamTimeoutMs + 30_000 });
    if (claim.replay) {
      // A repeated create answers the job it made (spec 4.9), not 409.
      if (!claim.resultId) throw new GatewayError('idempotent_request_in_progress', { retry_after: 1 }, { 'retry-after': '1' });
      const job = await jobSummary(deps.db, claim.resultId);
      ctx.set('x-gateway-request-id', job.reservation_id);
      ctx.status = 202;
      ctx.body = accepted(ctx, job.id, job.status);
      return;
    }

    const jobId = newJobId();
    // The hold belongs to the job's workflow (ownerWorkflowId): it settles it, no report is sent.
    const hold = await takeHold(
      deps.reservations,
      ctx,
      {
        model: model.id,
        provider: provider.id,
        endpoint: ENDPOINT,
        tariff: model,
        held: complimentary ? '0' : plan.estimate,
        complimentary,
        modality: 'video',
        ownerWorkflowId: videoWorkflowId(jobId),
      },
      claim.key,
    );
    let recorded = false;
    try {
      await insertJob(deps.db, {
        id: jobId,
        accountId: auth.accountId,
        keyId: auth.keyId,
        reservationId: hold.reservationId,
        model: model.id,
        providerId: provider.id,
        duration: plan.duration,
        resolution: plan.resolution,
      });
      const input: VideoJobInput = {
        jobId,
        reservationId: hold.reservationId,
        providerId: provider.id,
        duration: plan.duration,
        resolution: plan.resolution,
        estimate: plan.estimate,
        polling: { ...DEFAULT_VIDEO_POLLING, ...deps.videoPolling },
      };
      // Requested before forwarding, so the job's workflow exists even if this process dies now.
      const job = startVideoJob(
        deps.temporal,
        { input, taskQueue: deps.mediaTaskQueue ?? MEDIA_TASK_QUEUE, accountId: auth.accountId, keyId: auth.keyId, model: model.id, held: hold.held },
        (err) => ctx.state.log.warn({ err, job: jobId }, 'video workflow start failed; the report will signal-with-start'),
      );
      const outcome = await forwardCreate(deps, ctx, { ...req, duration: plan.duration, resolution: plan.resolution }, model.upstream_model, provider, videos, previousUpstream);
      if (outcome.ok) await setUpstreamId(deps.db, jobId, outcome.upstreamId);
      await job.tell(outcome.ok ? outcome : { ok: false, error: outcome.error.message });
      if (!outcome.ok) throw outcome.error;
      await claim.key.recordResult(jobId);
      recorded = true;
      ctx.set('x-gateway-request-id', hold.reservationId);
      ctx.status = 202;
      ctx.body = accepted(ctx, jobId, 'pending');
    } catch (err) {
      if (!recorded) await claim.key.release();
      throw err;
    }
  };
}

type Forwarded = { ok: true; upstreamId: string } | { ok: false; error: GatewayError };

async function forwardCreate(
  deps: VideoDeps,
  ctx: Context,
  req: VideoCreate,
  upstreamModel: string,
  provider: Parameters<typeof postUpstream>[0],
  videos: VideosEndpoint,
  previousUpstream: string | null,
): Promise<Forwarded> {
  try {
    const res = await postUpstream(provider, videos.createPath, videos.createBody(req, upstreamModel, previousUpstream), {
      timeoutMs: deps.upstreamTimeoutMs,
      authHeaders: (key) => providerAuthHeaders(provider.kind, key),
    });
    const s = res.statusCode;
    // The job's workflow is told the outcome (tell), so nothing is reported here.
    if (s !== 200 && s !== 201 && s !== 202) return { ok: false, error: await upstreamRefusal(res, () => {}, upstreamModel) };
    const json = (await res.body.json().catch(() => null)) as Record<string, unknown> | null;
    try {
      return { ok: true, upstreamId: videos.parseJob(json ?? {}).id };
    } catch {
      return { ok: false, error: new GatewayError('generation_failed') };
    }
  } catch (err) {
    ctx.state.log.warn({ err }, 'video create forward failed');
    // Without the provider's job id nothing can be polled or charged: the hold returns.
    return { ok: false, error: upstreamFailure(err, () => {}, deps.upstreamTimeoutMs, upstreamModel) };
  }
}
