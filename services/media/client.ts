import { WorkflowExecutionAlreadyStartedError, type Client, type WorkflowStartOptions } from '@temporalio/client';
import { GatewayError } from '../../domain/shared/errors';
import { SA } from '../../domain/shared/search-attributes';
import { videoCreatedSignal, videoWorkflowId, type CreateOutcome, type VideoJobInput } from '../../domain/media/video';
import type { WorkflowOf } from '../../domain/shared/workflow-of';

// The one place that starts video job workflows (`video-<job_id>`) and tells them the provider's
// answer to the create.

/** The video job workflow as this client starts it (named, never imported: workflows/media/video.ts). */
type VideoWorkflow = WorkflowOf<VideoJobInput>;
type StartOptions = WorkflowStartOptions<VideoWorkflow>;

export interface VideoJobStart {
  input: VideoJobInput;
  taskQueue: string;
  accountId: string;
  keyId: string;
  model: string;
  held: string;
}

/** A started (or being started) video job workflow. */
export interface VideoJobHandle {
  /** resolves false when the start did not go through (tell() then signal-with-starts) */
  started: Promise<boolean>;
  /** Signals the provider's answer; signal-with-start when the start did not go through. */
  tell(outcome: CreateOutcome): Promise<void>;
}

/**
 * Requests the job's workflow start at once (before forwarding, so it exists even if this
 * process dies) without waiting for it; `onStartFailed` hears why a start failed.
 */
export function startVideoJob(temporal: Client, s: VideoJobStart, onStartFailed: (err: unknown) => void): VideoJobHandle {
  const { input } = s;
  const options: StartOptions = {
    taskQueue: s.taskQueue,
    workflowId: videoWorkflowId(input.jobId),
    args: [input],
    // a finished job is never started again by a late signal-with-start
    workflowIdReusePolicy: 'REJECT_DUPLICATE',
    typedSearchAttributes: [
      { key: SA.AccountId, value: s.accountId },
      { key: SA.KeyId, value: s.keyId },
      { key: SA.Model, value: s.model },
      { key: SA.Kind, value: 'video' },
      { key: SA.Status, value: 'pending' },
    ],
    memo: { job_id: input.jobId, model: s.model, duration: input.duration, resolution: input.resolution, held: s.held },
  };
  const started = temporal.workflow.start<VideoWorkflow>('videoWorkflow', options).then(
    () => true,
    (err) => {
      onStartFailed(err);
      return false;
    },
  );
  return { started, tell: (outcome) => tell(temporal, options, started, outcome) };
}

async function tell(temporal: Client, options: StartOptions, started: Promise<boolean>, outcome: CreateOutcome): Promise<void> {
  let ok = await started;
  for (let attempt = 0; ; attempt++) {
    try {
      if (ok) await temporal.workflow.getHandle(options.workflowId).signal(videoCreatedSignal, outcome);
      else await temporal.workflow.signalWithStart<VideoWorkflow, [CreateOutcome]>('videoWorkflow', { ...options, signal: videoCreatedSignal, signalArgs: [outcome] });
      return;
    } catch (err) {
      if (err instanceof WorkflowExecutionAlreadyStartedError) {
        ok = true;
        continue;
      }
      // The workflow gives up waiting after createWaitMs and returns the hold (not billed).
      if (attempt >= 4) throw new GatewayError('service_unavailable', { detail: 'the video job could not be recorded; retry later' });
      ok = false;
      await new Promise((r) => setTimeout(r, 100 * 2 ** attempt));
    }
  }
}
