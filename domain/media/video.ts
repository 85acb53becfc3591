// Video jobs (spec 1 sections 2.7, 3.1): ids, states and the input of the job workflow.
// Pure and deterministic: imported by the API, the activities and the workflow.
import { defineSignal } from '@temporalio/workflow';

export const MEDIA_TASK_QUEUE = 'media';

export const videoWorkflowId = (jobId: string) => `video-${jobId}`;

export type VideoStatus = 'pending' | 'in_progress' | 'completed' | 'failed' | 'cancelled' | 'expired';

export const TERMINAL_STATUSES: readonly VideoStatus[] = ['completed', 'failed', 'cancelled', 'expired'];

export const isTerminal = (s: VideoStatus): boolean => TERMINAL_STATUSES.includes(s);

export const VIDEO_JOB_ID = /^gen-vid-\d+-[A-Za-z0-9]+$/;

/** How the workflow polls the provider; tests shorten every interval. */
export interface VideoPolling {
  /** first poll this long after the provider accepted the job */
  initialMs: number;
  /** each wait is the previous × factor, at most maxMs */
  factor: number;
  maxMs: number;
  /** how long the API may take to report the provider's answer to the create */
  createWaitMs: number;
  /** completed without a cost yet: wait this long for a late provider cost, then charge the estimate */
  lateCostWaitMs: number;
  /** failed/cancelled/expired without a cost: wait this long for one, then bill nothing */
  unbilledCostWaitMs: number;
  /** continue-as-new after this many polls in one run (bounds history and replay cost) */
  pollsPerRun: number;
}

export const DEFAULT_VIDEO_POLLING: VideoPolling = {
  initialMs: 2_000,
  factor: 1.5,
  maxMs: 15_000,
  createWaitMs: 180_000,
  lateCostWaitMs: 10 * 60_000,
  unbilledCostWaitMs: 60_000,
  pollsPerRun: 200,
};

export interface VideoJobInput {
  jobId: string;
  reservationId: string;
  providerId: string;
  /** seconds of video, for usage_details */
  duration: number;
  resolution: string;
  /** the estimate of spec 2.1: duration × the resolution's price; equals the hold */
  estimate: string;
  polling: VideoPolling;
  /** carried over by continue-as-new */
  carry?: VideoCarry;
}

export interface VideoCarry {
  upstreamId: string;
  status: VideoStatus;
  delayMs: number;
  /** workflow time (ms) the final state was seen; the wait for a late cost counts from it */
  finalAt?: number;
}

/** What the API tells the workflow after forwarding the create. */
export type CreateOutcome = { ok: true; upstreamId: string } | { ok: false; error: string };

/** The API's report of the provider's answer to the create (sent right after forwarding it). */
export const videoCreatedSignal = defineSignal<[CreateOutcome]>('videoCreated');

/** The provider's view of a job at one poll. */
export interface ProviderVideo {
  status: VideoStatus;
  error: string | null;
  /** the provider's cost converted to credits; null while none is visible */
  cost: string | null;
}
