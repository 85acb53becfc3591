import { condition, continueAsNew, proxyActivities, proxyLocalActivities, setHandler, sleep, upsertSearchAttributes } from '@temporalio/workflow';
import type { SettlementActivities } from '../../activities/credits/settlement';
import type { VideoActivities } from '../../activities/media/video';
import type { RequestReport, SettlementResult } from '../../domain/credits/reservation';
import { SA } from '../../domain/shared/search-attributes';
import { isTerminal, videoCreatedSignal, type CreateOutcome, type ProviderVideo, type VideoCarry, type VideoJobInput, type VideoStatus } from '../../domain/media/video';

// Polls and state records are short and idempotent: local activities, so each poll costs a timer
// and a marker in the history instead of three activity events.
const { pollVideo, recordVideoStatus } = proxyLocalActivities<VideoActivities>({
  startToCloseTimeout: '15 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});

const { settleReservation } = proxyActivities<SettlementActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});

export interface VideoJobResult {
  jobId: string;
  status: VideoStatus;
  settlement: SettlementResult;
}

/**
 * One per video job (`video-<job_id>`): waits for the provider to accept the job, polls it with
 * durable timers and a growing interval, records every state change, and on a final state sets
 * the final charge once (provider cost, else the estimate for a completed job, else nothing).
 */
export async function videoWorkflow(input: VideoJobInput): Promise<VideoJobResult> {
  const p = input.polling;
  let carry: VideoCarry | undefined = input.carry;
  if (!carry) {
    let created: CreateOutcome | undefined;
    setHandler(videoCreatedSignal, (o) => {
      created ??= o;
    });
    await condition(() => created !== undefined, p.createWaitMs);
    const outcome: CreateOutcome = created ?? { ok: false, error: 'the API did not report the provider answer to the create in time' };
    if (!outcome.ok) {
      await changeStatus(input.jobId, 'failed', outcome.error);
      return settle(input, 'failed', outcome.error, null, null);
    }
    carry = { upstreamId: outcome.upstreamId, status: 'pending', delayMs: p.initialMs };
  }
  let polls = 0;
  let last: ProviderVideo | null = null;
  const next = (): VideoJobInput => ({ ...input, carry });
  while (!isTerminal(carry.status)) {
    if (polls >= p.pollsPerRun) return continueAsNew<typeof videoWorkflow>(next());
    await sleep(carry.delayMs);
    last = await pollVideo(input.providerId, carry.upstreamId);
    polls++;
    if (last.status !== carry.status) {
      await changeStatus(input.jobId, last.status, last.error);
      carry.status = last.status;
    }
    carry.delayMs = Math.min(Math.round(carry.delayMs * p.factor), p.maxMs);
  }
  // A provider may record its cost a while after the final state: wait for it within a limit.
  last ??= await pollVideo(input.providerId, carry.upstreamId);
  let cost = last.cost;
  const costWait = carry.status === 'completed' ? p.lateCostWaitMs : p.unbilledCostWaitMs;
  carry.finalAt ??= Date.now(); // workflow time: deterministic, and survives continue-as-new in carry
  let delay = p.initialMs;
  while (cost === null && Date.now() - carry.finalAt < costWait) {
    if (polls >= p.pollsPerRun) return continueAsNew<typeof videoWorkflow>(next());
    await sleep(Math.min(delay, costWait - (Date.now() - carry.finalAt)));
    delay = Math.min(Math.round(delay * p.factor), p.maxMs);
    cost = (await pollVideo(input.providerId, carry.upstreamId)).cost;
    polls++;
  }
  return settle(input, carry.status, last.error, cost, carry.upstreamId);
}

async function changeStatus(jobId: string, status: VideoStatus, error: string | null): Promise<void> {
  await recordVideoStatus(jobId, status, error);
  upsertSearchAttributes([{ key: SA.Status, value: status }]);
}

/** The final charge, exactly once (settleReservation is guarded by status = 'held'). */
async function settle(input: VideoJobInput, status: VideoStatus, error: string | null, cost: string | null, upstreamId: string | null): Promise<VideoJobResult> {
  const report: RequestReport = {
    outcome: status === 'completed' ? 'completed' : status === 'cancelled' ? 'cancelled' : 'failed',
    // failed, cancelled and expired jobs are billed only when the provider charged for them
    billable: status === 'completed' || cost !== null,
    usage: null,
    providerCost: cost,
    httpStatus: 200,
    bodyId: input.jobId,
    error: status === 'completed' ? null : error ?? status,
    media: cost !== null ? { billingSource: 'provider_cost', amount: cost } : { billingSource: 'estimate', amount: input.estimate },
    usageDetails: { seconds: input.duration, resolution: input.resolution, status, ...(upstreamId ? { upstream_id: upstreamId } : {}) },
  };
  const settlement = await settleReservation(input.reservationId, report);
  upsertSearchAttributes([{ key: SA.BillingSource, value: settlement.billingSource }]);
  return { jobId: input.jobId, status, settlement };
}
