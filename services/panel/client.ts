import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError, type Client } from '@temporalio/client';
import { nodeOpReportedSignal } from '../../domain/panel/node-ops';
import { SA } from '../../domain/shared/search-attributes';
import type { DatabaseOpInput, databaseOpWorkflow } from '../../workflows/panel/database-op';
import type { NodeOpInput, nodeOpWorkflow } from '../../workflows/panel/node-op';
import type { ImportInput, importWorkflow } from '../../workflows/panel/import';

// The one place that starts (and signals) the panel's workflows: site operations (`node-op-<op_id>`)
// and database operations (`database-op-<op_id>`, PANEL.md section 4) on the panel task queue. A
// start repeated for the same operation is not an error.

export const PANEL_TASK_QUEUE = 'panel';

export const nodeOpWorkflowId = (opId: string): string => `node-op-${opId}`;
export const databaseOpWorkflowId = (opId: string): string => `database-op-${opId}`;

/**
 * Tells the workflow waiting for an operation that its node's result is recorded (site operations
 * run in node-op-<op_id>, database ones in database-op-<op_id>). A workflow that is gone or not
 * started yet reads the result at its next poll, so a failed signal changes nothing.
 */
export async function signalOperationReported(temporal: Client, opId: string, kind: string): Promise<void> {
  const id = kind.startsWith('database.') ? databaseOpWorkflowId(opId) : nodeOpWorkflowId(opId);
  try {
    await temporal.workflow.getHandle(id).signal(nodeOpReportedSignal);
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
  }
}

/** Where and how node operations run: the panel worker's task queue and the agent wait. */
export interface NodeOpSettings {
  taskQueue: string;
  /** how long an agent node has to report an operation's result before it expires (default 2 min) */
  timeoutMs: number;
  /** how often a waiting operation's status is read (default 1 s) */
  pollMs: number;
}

export const NODE_OP_DEFAULTS: NodeOpSettings = { taskQueue: PANEL_TASK_QUEUE, timeoutMs: 120_000, pollMs: 1000 };

export interface NodeOpStart {
  input: Omit<NodeOpInput, 'timeoutMs' | 'pollMs'>;
  /** what a human reading the Temporal UI needs */
  domain: string;
}

/** Starts a workflow; resolves once Temporal has it (an already started one counts: a repeated start is not an error). */
async function startOnce(start: () => Promise<unknown>): Promise<void> {
  try {
    await start();
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
}

/** Starts a site operation's workflow (`node-op-<op_id>`). */
export async function startNodeOp(temporal: Client, settings: NodeOpSettings, s: NodeOpStart): Promise<void> {
  const { input } = s;
  await startOnce(() =>
    temporal.workflow.start<typeof nodeOpWorkflow>('nodeOpWorkflow', {
      taskQueue: settings.taskQueue,
      workflowId: nodeOpWorkflowId(input.opId),
      args: [{ ...input, timeoutMs: settings.timeoutMs, pollMs: settings.pollMs }],
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      typedSearchAttributes: [
        { key: SA.OrgId, value: input.orgId },
        { key: SA.NodeName, value: input.node },
        { key: SA.SiteId, value: input.siteId },
        { key: SA.Kind, value: input.kind },
        { key: SA.Status, value: 'pending' },
      ],
      memo: { what: `${input.kind} of ${s.domain} (generation ${input.generation}) on node ${input.node}`, op_id: input.opId, site_id: input.siteId, domain: s.domain },
    }),
  );
}

/** Starts a database operation's workflow (`database-op-<op_id>`). */
export async function startDatabaseOp(temporal: Client, settings: NodeOpSettings, input: Omit<DatabaseOpInput, 'timeoutMs' | 'pollMs'>, name: string): Promise<void> {
  await startOnce(() =>
    temporal.workflow.start<typeof databaseOpWorkflow>('databaseOpWorkflow', {
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

export const importWorkflowId = (importId: string): string => `import-${importId}`;

/** Starts a run of a legacy import (`import-<import_id>`); a run still going is not started twice, a finished or failed one may run again. */
export async function startImport(temporal: Client, taskQueue: string, input: ImportInput, archive: string): Promise<void> {
  await startOnce(() =>
    temporal.workflow.start<typeof importWorkflow>('importWorkflow', {
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
