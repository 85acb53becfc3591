import type { Client } from '@temporalio/client';
import type { WorkflowOf } from '../../../domain/shared/workflow-of';
import { nodeOpWorkflowId, PANEL_TASK_QUEUE, type NodeOpInput } from '../../../domain/panel/workflows';
import { SA } from '../../../domain/shared/search-attributes';
import { startOnce } from '../shared/start-once';

// The one place that starts the sites area's workflows: a site operation (`node-op-<op_id>`,
// PANEL.md section 4) on the panel task queue. A start repeated for the same operation is not an
// error. Its settings (queue and agent wait) are those of every node operation (databases, backups).

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

/** Starts a site operation's workflow (`node-op-<op_id>`). */
export async function startNodeOp(temporal: Client, settings: NodeOpSettings, s: NodeOpStart): Promise<void> {
  const { input } = s;
  await startOnce(() =>
    temporal.workflow.start<WorkflowOf<NodeOpInput>>('nodeOpWorkflow', {
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
