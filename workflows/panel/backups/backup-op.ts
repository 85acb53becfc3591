import { ActivityFailure, proxyActivities, proxyLocalActivities, upsertSearchAttributes } from '@temporalio/workflow';
import type { BackupOpActivities } from '../../../activities/panel/backups/backup-ops';
import { HOSTING_NODE, type OperationResult } from '../../../domain/panel/node-ops';
import { SA } from '../../../domain/shared/search-attributes';
import { waitForAgent } from '../sites/node-op';
import type { BackupOpInput } from '../../../domain/panel/workflows';

// One per backup operation on a node (`node-op-<op_id>`, PANEL.md section 4): takes, deletes or
// restores a restore point on the panel's own hosting node directly, or waits for the node's agent
// to pull and report it (the deadline expires it). Either way it ends by recording the outcome
// (restore point ready or failed; restored site and databases active or failed), so nothing is
// left pending for good. Database passwords of a restore never pass through here.

/**
 * Writing or reading a whole site's archive (and dumping or loading its databases): minutes for a
 * large site, so a long timeout and few retries; it heartbeats every second, so a dead worker's
 * attempt is retried within seconds, not after the hour.
 */
const { applyBackupOnHostingNode } = proxyActivities<BackupOpActivities>({
  startToCloseTimeout: '60 minutes',
  heartbeatTimeout: '20 seconds',
  retry: { initialInterval: '5 seconds', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 3 },
});

// conditional updates of our own rows: short and idempotent
const { finishBackupOp } = proxyLocalActivities<BackupOpActivities>({
  startToCloseTimeout: '15 seconds',
  retry: { initialInterval: '500 milliseconds', backoffCoefficient: 2, maximumInterval: '10 seconds' },
});

export interface BackupOpResult {
  opId: string;
  result: OperationResult;
  status: string;
}

export async function backupOpWorkflow(input: BackupOpInput): Promise<BackupOpResult> {
  const result = input.node === HOSTING_NODE ? await applyDirectly(input.opId) : await waitForAgent(input);
  const { status } = await finishBackupOp({ opId: input.opId, kind: input.kind, restorePointId: input.restorePointId, siteId: input.siteId, result });
  upsertSearchAttributes([{ key: SA.Status, value: result.ok ? 'done' : 'failed' }]);
  return { opId: input.opId, result, status };
}

async function applyDirectly(opId: string): Promise<OperationResult> {
  try {
    return await applyBackupOnHostingNode(opId);
  } catch (err) {
    const cause = err instanceof ActivityFailure && err.cause ? err.cause.message : String(err);
    return { ok: false, refused: false, error: `the hosting node failed to apply the operation: ${cause}` };
  }
}
