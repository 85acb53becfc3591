import { ScheduleAlreadyRunning, ScheduleNotFoundError, ScheduleOverlapPolicy, WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { WorkflowOf } from '../../../domain/shared/workflow-of';
import { backupScheduleId, inspectionWorkflowId, nodeOpWorkflowId, type BackupOpInput, type InspectionInput, type ScheduledBackupInput } from '../../../domain/panel/workflows';
import { backupOpSearchAttributes, removeInspectionSignal } from '../../../domain/panel/backups';
import type { NodeOpSettings } from '../sites/client';
import { startOnce } from '../shared/start-once';

// The one place that starts the backups area's workflows and schedules: a backup operation
// (`node-op-<op_id>`: a restore point taken, deleted or restored on its node), a site's backup
// schedule (`backup-schedule-<site_id>`), and an inspection (`inspection-<id>`) with its "Remove now".

/** Starts a backup operation's workflow (`node-op-<op_id>`); a repeated start is not an error. */
export async function startBackupOp(temporal: Client, settings: NodeOpSettings, s: Omit<BackupOpInput, 'timeoutMs' | 'pollMs'> & { domain: string }): Promise<void> {
  const { domain, ...input } = s;
  await startOnce(() =>
    temporal.workflow.start<WorkflowOf<BackupOpInput>>('backupOpWorkflow', {
      taskQueue: settings.taskQueue,
      workflowId: nodeOpWorkflowId(input.opId),
      args: [{ ...input, timeoutMs: settings.timeoutMs, pollMs: settings.pollMs }],
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      typedSearchAttributes: backupOpSearchAttributes(input),
      memo: { what: `${input.kind} of ${domain} (restore point ${input.restorePointId}) on node ${input.node}`, op_id: input.opId, site_id: input.siteId, restore_point_id: input.restorePointId, domain },
    }),
  );
}

/**
 * Creates a site's backup schedule (or updates it to this interval and count): each due run is
 * `scheduled-backup-<site_id>` on the node operations' queue. Returns its next run times.
 */
export async function ensureBackupSchedule(temporal: Client, settings: NodeOpSettings, siteId: string, row: { every: 'hourly' | 'daily'; keep: number }): Promise<Date[]> {
  const args: ScheduledBackupInput[] = [{ siteId, keep: row.keep, timeoutMs: settings.timeoutMs, pollMs: settings.pollMs }];
  const options = {
    spec: { intervals: [{ every: row.every === 'hourly' ? '1 hour' : '1 day' }] },
    policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: '1 hour' },
    action: { type: 'startWorkflow' as const, workflowType: 'scheduledBackupWorkflow', taskQueue: settings.taskQueue, args, workflowId: `scheduled-backup-${siteId}` },
  };
  const handle = temporal.schedule.getHandle(backupScheduleId(siteId));
  try {
    await temporal.schedule.create({ scheduleId: backupScheduleId(siteId), ...options, memo: { what: `backups of site ${siteId}, ${row.every}, keeping ${row.keep}` } });
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
    await handle.update((prev) => ({ ...prev, ...options }));
  }
  const described = await handle.describe();
  return described.info.nextActionTimes;
}

/** The next run times of a site's backup schedule; none when Temporal does not have it. */
export async function backupScheduleNextRuns(temporal: Client, siteId: string): Promise<Date[]> {
  const described = await temporal.schedule.getHandle(backupScheduleId(siteId)).describe().catch(() => null);
  return described?.info.nextActionTimes ?? [];
}

/** Deletes a site's backup schedule; one already gone is not an error. */
export async function deleteBackupScheduleOf(temporal: Client, siteId: string): Promise<void> {
  try {
    await temporal.schedule.getHandle(backupScheduleId(siteId)).delete();
  } catch (err) {
    if (!(err instanceof ScheduleNotFoundError)) throw err;
  }
}

/** Starts the inspection's workflow (`inspection-<id>`): it extracts the restore point and removes it when its time is up. */
export async function startInspection(temporal: Client, taskQueue: string, input: InspectionInput, expiresAt: Date): Promise<void> {
  await temporal.workflow.start<WorkflowOf<InspectionInput>>('inspectionWorkflow', {
    taskQueue,
    workflowId: inspectionWorkflowId(input.inspectionId),
    args: [input],
    memo: { what: `restore point ${input.restorePointId} extracted for inspection until ${expiresAt.toISOString()}` },
  });
}

/** "Remove now": signals the inspection's workflow; one that is gone has removed the folder already. */
export async function signalRemoveInspection(temporal: Client, inspectionId: string): Promise<void> {
  try {
    await temporal.workflow.getHandle(inspectionWorkflowId(inspectionId)).signal(removeInspectionSignal);
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
  }
}
