import type { Client } from '@temporalio/client';
import type { WorkflowOf } from '../../../domain/shared/workflow-of';
import { importWorkflowId, type ImportInput } from '../../../domain/panel/workflows';
import { SA } from '../../../domain/shared/search-attributes';
import { startOnce } from '../shared/start-once';

// The one place that starts the imports area's workflows: a run of a legacy import
// (`import-<import_id>`). A run still going is not started twice; a finished or failed one may run again.

/** Starts a run of a legacy import (`import-<import_id>`). */
export async function startImport(temporal: Client, taskQueue: string, input: ImportInput, archive: string): Promise<void> {
  await startOnce(() =>
    temporal.workflow.start<WorkflowOf<ImportInput>>('importWorkflow', {
      taskQueue,
      workflowId: importWorkflowId(input.importId),
      args: [input],
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
      typedSearchAttributes: [
        { key: SA.ImportId, value: [input.importId] },
        { key: SA.OrgId, value: input.orgId },
      ],
      memo: { what: `legacy import of ${archive} (run ${input.run}) into account ${input.orgId}`, import_id: input.importId, archive },
    }),
  );
}
