import { ActivityFailure, proxyActivities, proxyLocalActivities, upsertSearchAttributes } from '@temporalio/workflow';
import type { DatabaseOpActivities, DatabaseOpOutcome } from '../../../activities/panel/databases/database-ops';
import { HOSTING_NODE, type OperationResult } from '../../../domain/panel/node-ops';
import { SA } from '../../../domain/shared/search-attributes';
import { waitForAgent } from '../sites/node-op';
import type { DatabaseOpInput } from '../../../domain/panel/workflows';

// One per operation on a customer database (`database-op-<op_id>`, PANEL.md section 4): creates,
// drops it or sets its user's new password on the panel's own hosting node directly, or waits for the node's agent to pull and
// report it (the deadline expires it). Either way it ends by recording the outcome on the database
// (active, failed, or gone), so a database is never left pending. The password never passes through
// here: the activities read it from the queued operation, whose row loses it once it ends.

/** The hosting node's MariaDB statements, retried a few times; heartbeating, so a dead worker is noticed within seconds. */
const { applyDatabaseOnHostingNode } = proxyActivities<DatabaseOpActivities>({
  startToCloseTimeout: '2 minutes',
  heartbeatTimeout: '20 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '10 seconds', maximumAttempts: 4 },
});

// A conditional update of our own rows: short and idempotent, so a local activity.
const { finishDatabaseOp } = proxyLocalActivities<DatabaseOpActivities>({
  startToCloseTimeout: '15 seconds',
  retry: { initialInterval: '500 milliseconds', backoffCoefficient: 2, maximumInterval: '10 seconds' },
});

export interface DatabaseOpResult {
  opId: string;
  result: OperationResult;
  database: DatabaseOpOutcome;
}

export async function databaseOpWorkflow(input: DatabaseOpInput): Promise<DatabaseOpResult> {
  const result = input.node === HOSTING_NODE ? await applyDirectly(input) : await waitForAgent(input);
  const database = await finishDatabaseOp({ databaseId: input.databaseId, opId: input.opId, kind: input.kind, result });
  upsertSearchAttributes([{ key: SA.Status, value: result.ok ? 'done' : 'failed' }]);
  return { opId: input.opId, result, database };
}

async function applyDirectly(input: DatabaseOpInput): Promise<OperationResult> {
  try {
    return await applyDatabaseOnHostingNode(input.opId);
  } catch (err) {
    const cause = err instanceof ActivityFailure && err.cause ? err.cause.message : String(err);
    return { ok: false, refused: false, error: `the hosting node failed to apply the operation: ${cause}` };
  }
}
