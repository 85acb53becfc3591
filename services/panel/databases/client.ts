import type { Client } from '@temporalio/client';
import type { WorkflowOf } from '../../../domain/shared/workflow-of';
import { databaseOpWorkflowId, type DatabaseOpInput } from '../../../domain/panel/workflows';
import { SA } from '../../../domain/shared/search-attributes';
import type { NodeOpSettings } from '../sites/client';
import { startOnce } from '../shared/start-once';

// The one place that starts the databases area's workflows: a database operation
// (`database-op-<op_id>`, PANEL.md section 4) on the node operations' queue. A start repeated for
// the same operation is not an error.

/** Starts a database operation's workflow (`database-op-<op_id>`). */
export async function startDatabaseOp(temporal: Client, settings: NodeOpSettings, input: Omit<DatabaseOpInput, 'timeoutMs' | 'pollMs'>, name: string): Promise<void> {
  await startOnce(() =>
    temporal.workflow.start<WorkflowOf<DatabaseOpInput>>('databaseOpWorkflow', {
      taskQueue: settings.taskQueue,
      workflowId: databaseOpWorkflowId(input.opId),
      args: [{ ...input, timeoutMs: settings.timeoutMs, pollMs: settings.pollMs }],
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      typedSearchAttributes: [
        { key: SA.OrgId, value: input.orgId },
        { key: SA.NodeName, value: input.node },
        { key: SA.Kind, value: input.kind },
        { key: SA.Status, value: 'pending' },
      ],
      memo: { what: `${input.kind} of database ${name} on node ${input.node}`, op_id: input.opId, database_id: input.databaseId, database: name },
    }),
  );
}
