import { executeChild, proxyLocalActivities } from '@temporalio/workflow';
import type { BackupOpActivities } from '../../../activities/panel/backups/backup-ops';
import { backupOpSearchAttributes } from '../../../domain/panel/backups';
import { backupOpWorkflow, type BackupOpResult } from './backup-op';
import type { BackupOpInput, ScheduledBackupInput } from '../../../domain/panel/workflows';

// Run by a site's backup schedule (`backup-schedule-<site_id>`, a Temporal schedule, daily or
// hourly): queues a restore point of the site as an operation for its node and runs it as a child
// (`node-op-<op_id>`), then deletes the restore points beyond the newest `keep` the same way.

const { queueScheduledBackup, restorePointsBeyond } = proxyLocalActivities<BackupOpActivities>({
  startToCloseTimeout: '15 seconds',
  retry: { initialInterval: '500 milliseconds', backoffCoefficient: 2, maximumInterval: '10 seconds' },
});

export interface ScheduledBackupResult {
  /** why no backup was taken (the site is gone, not served, or its node keeps no backups) */
  skipped?: string;
  backup?: BackupOpResult;
  deleted: string[];
}

const child = (op: Omit<BackupOpInput, 'timeoutMs' | 'pollMs'>, input: ScheduledBackupInput) =>
  executeChild(backupOpWorkflow, {
    workflowId: `node-op-${op.opId}`,
    args: [{ ...op, timeoutMs: input.timeoutMs, pollMs: input.pollMs }],
    typedSearchAttributes: backupOpSearchAttributes(op),
    memo: { what: `${op.kind} of site ${op.siteId} (restore point ${op.restorePointId}) on node ${op.node}, by its backup schedule` },
  });

export async function scheduledBackupWorkflow(input: ScheduledBackupInput): Promise<ScheduledBackupResult> {
  const queued = await queueScheduledBackup(input.siteId);
  if ('skipped' in queued) return { skipped: queued.skipped, deleted: [] };
  const backup = await child(queued, input);
  const deleted: string[] = [];
  for (const op of await restorePointsBeyond(input.siteId, input.keep)) {
    await child(op, input);
    deleted.push(op.restorePointId);
  }
  return { backup, deleted };
}
