import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { nodeOpReportedSignal } from '../../../domain/panel/node-ops';
import { databaseOpWorkflowId, nodeOpWorkflowId } from '../../../domain/panel/workflows';

// The nodes area's one Temporal call: an agent node's report wakes the workflow waiting for that
// operation (site and backup operations run in node-op-<op_id>, database ones in
// database-op-<op_id>). The nodes area starts no workflow of its own.

/**
 * Tells the workflow waiting for an operation that its node's result is recorded. A workflow that
 * is gone or not started yet reads the result at its next poll, so a failed signal changes nothing.
 */
export async function signalOperationReported(temporal: Client, opId: string, kind: string): Promise<void> {
  const id = kind.startsWith('database.') ? databaseOpWorkflowId(opId) : nodeOpWorkflowId(opId);
  try {
    await temporal.workflow.getHandle(id).signal(nodeOpReportedSignal);
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
  }
}
