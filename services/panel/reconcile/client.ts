import { ScheduleAlreadyRunning, ScheduleNotFoundError, ScheduleOverlapPolicy, WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { WorkflowOf } from '../../../domain/shared/workflow-of';
import { PANEL_TASK_QUEUE, RECONCILE_SCHEDULE_ID, reconcileWorkflowId, type ReconcileInput } from '../../../domain/panel/workflows';
import { SA } from '../../../domain/shared/search-attributes';
import { startOnce } from '../shared/start-once';

// The one place that starts the reconcile area's workflows: a pass started now
// (`reconcile-<pass_id>`) and the schedule of passes (`-reconcile dry-run|on`). A repeated start is
// not an error; the schedule follows the current mode (deleted with `-reconcile off`).

/** How passes run: `-reconcile` (null: off), the schedule's interval, the batch per activity. */
export interface ReconcileSettings {
  mode: 'dry-run' | 'on' | null;
  intervalMs: number;
  batchSize: number;
  heartbeatTimeoutMs: number;
  taskQueue: string;
}

export const RECONCILE_DEFAULTS: Omit<ReconcileSettings, 'mode'> = { intervalMs: 15 * 60_000, batchSize: 100, heartbeatTimeoutMs: 60_000, taskQueue: PANEL_TASK_QUEUE };

const reconcileInput = (s: ReconcileSettings, trigger: ReconcileInput['trigger'], passId?: string): ReconcileInput => ({
  ...(passId ? { passId } : {}),
  mode: s.mode ?? 'dry-run',
  trigger,
  batchSize: s.batchSize,
  heartbeatTimeoutMs: s.heartbeatTimeoutMs,
});

const reconcileMemo = (mode: string | null, trigger: string) => ({
  what: `reconciliation pass over every site on the hosting node (${mode === 'on' ? 'remediating opted-in sites' : 'observe and report only'}), started by ${trigger === 'schedule' ? 'the schedule' : 'POST /v1/reconcile/run'}`,
});

/** Starts pass `passId` now (its pass row exists already: services/panel/reconcile/run). */
export async function startReconcilePass(temporal: Client, s: ReconcileSettings, passId: string): Promise<void> {
  await startOnce(() =>
    temporal.workflow.start<WorkflowOf<ReconcileInput>>('reconcileWorkflow', {
      taskQueue: s.taskQueue,
      workflowId: reconcileWorkflowId(passId),
      args: [reconcileInput(s, 'manual', passId)],
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      typedSearchAttributes: [
        { key: SA.NodeName, value: 'hosting' },
        { key: SA.Kind, value: 'reconcile' },
        { key: SA.Status, value: 'running' },
      ],
      memo: { ...reconcileMemo(s.mode, 'manual'), pass_id: passId },
    }),
  );
}

/** Whether pass `passId`'s workflow is still running (false: finished, failed or never started). */
export async function reconcilePassRunning(temporal: Client, passId: string): Promise<boolean> {
  try {
    return (await temporal.workflow.getHandle(reconcileWorkflowId(passId)).describe()).status.name === 'RUNNING';
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return false;
    throw err;
  }
}

/**
 * The schedule of passes (`-reconcile dry-run|on`): created, or updated to the current mode and
 * interval; with `-reconcile off` it is deleted. Its runs are `reconcile-scheduled-<time>`.
 */
export async function ensureReconcileSchedule(temporal: Client, s: ReconcileSettings): Promise<void> {
  const handle = temporal.schedule.getHandle(RECONCILE_SCHEDULE_ID);
  if (s.mode === null) {
    try {
      await handle.delete();
    } catch (err) {
      if (!(err instanceof ScheduleNotFoundError)) throw err;
    }
    return;
  }
  const action = {
    type: 'startWorkflow' as const,
    workflowType: 'reconcileWorkflow',
    taskQueue: s.taskQueue,
    args: [reconcileInput(s, 'schedule')],
    workflowId: reconcileWorkflowId('scheduled'),
    typedSearchAttributes: [{ key: SA.Kind, value: 'reconcile' }],
    memo: reconcileMemo(s.mode, 'schedule'),
  };
  const spec = { intervals: [{ every: s.intervalMs }] };
  try {
    await temporal.schedule.create({ scheduleId: RECONCILE_SCHEDULE_ID, spec, policies: { overlap: ScheduleOverlapPolicy.SKIP }, action, memo: { purpose: 'runs reconciliation passes of the hosting node' } });
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
    await handle.update((prev) => ({ ...prev, spec, action }));
  }
}

/** When the schedule starts the next pass; null: no schedule. */
export async function nextReconcilePass(temporal: Client): Promise<Date | null> {
  try {
    return (await temporal.schedule.getHandle(RECONCILE_SCHEDULE_ID).describe()).info.nextActionTimes[0] ?? null;
  } catch (err) {
    if (err instanceof ScheduleNotFoundError) return null;
    throw err;
  }
}
