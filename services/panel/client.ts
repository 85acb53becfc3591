import { ScheduleAlreadyRunning, ScheduleNotFoundError, ScheduleOverlapPolicy, WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError, type Client, type ScheduleOptions } from '@temporalio/client';
import { nodeOpReportedSignal } from '../../domain/panel/node-ops';
import { SA } from '../../domain/shared/search-attributes';
import type { alertEvalWorkflow, webhookDeliveryWorkflow } from '../../workflows/panel/alerts';
import type { DatabaseOpInput, databaseOpWorkflow } from '../../workflows/panel/database-op';
import type { NodeOpInput, nodeOpWorkflow } from '../../workflows/panel/node-op';

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

// ---------------------------------------------------------------------------------------------
// Alert evaluation (a schedule at the metrics interval) and webhook deliveries (`webhook-<delivery_id>`)

export const ALERT_EVAL_SCHEDULE_ID = 'alert-eval';
export const webhookWorkflowId = (deliveryId: string): string => `webhook-${deliveryId}`;

/** Retries of a webhook delivery: exponential from initialMs, at most maxMs apart, given up after giveUpAfterMs. */
export interface WebhookRetry {
  initialMs: number;
  maxMs: number;
  giveUpAfterMs: number;
}

export interface WebhookSettings {
  taskQueue: string;
  retry: WebhookRetry;
}

export const WEBHOOK_RETRY_DEFAULTS: WebhookRetry = { initialMs: 10_000, maxMs: 3_600_000, giveUpAfterMs: 86_400_000 };

/** Starts a delivery's workflow (`webhook-<delivery_id>`); a repeated start is not an error. */
export async function startWebhookDelivery(temporal: Client, settings: WebhookSettings, deliveryId: string, orgId: string): Promise<void> {
  await startOnce(() =>
    temporal.workflow.start<typeof webhookDeliveryWorkflow>('webhookDeliveryWorkflow', {
      taskQueue: settings.taskQueue,
      workflowId: webhookWorkflowId(deliveryId),
      args: [{ deliveryId, ...settings.retry }],
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      typedSearchAttributes: [
        { key: SA.OrgId, value: orgId },
        { key: SA.Kind, value: 'webhook' },
      ],
      memo: { what: `webhook delivery ${deliveryId}: signed POST of one event, retried for ${Math.round(settings.retry.giveUpAfterMs / 3_600_000)} h`, delivery_id: deliveryId },
    }),
  );
}

/**
 * Creates (or, when it exists, updates to this interval and task queue) the schedule that runs
 * `alert-eval` at the metrics interval; overlapping runs are skipped.
 */
export async function ensureAlertEvalSchedule(temporal: Client, intervalMs: number, webhooks: WebhookSettings): Promise<void> {
  const options: Omit<ScheduleOptions, 'scheduleId'> = {
    spec: { intervals: [{ every: intervalMs }] },
    policies: { overlap: ScheduleOverlapPolicy.SKIP },
    action: {
      type: 'startWorkflow',
      workflowType: 'alertEvalWorkflow' satisfies keyof { alertEvalWorkflow: typeof alertEvalWorkflow },
      taskQueue: webhooks.taskQueue,
      args: [{ webhooks }],
      workflowId: 'alert-eval',
      // a run stuck without a worker gives way (overlapping runs are skipped), never blocking the schedule
      workflowRunTimeout: Math.max(intervalMs * 5, 300_000),
      memo: { what: 'alert evaluation: samples node metrics, evaluates the alert rules, hands new webhook deliveries to Temporal' },
    },
    memo: { purpose: 'takes node metric samples and evaluates the alert rules (opens, re-opens and resolves alerts, emits alert.fired / alert.resolved)' },
  };
  try {
    await temporal.schedule.create({ scheduleId: ALERT_EVAL_SCHEDULE_ID, ...options });
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
    await temporal.schedule.getHandle(ALERT_EVAL_SCHEDULE_ID).update((prev) => ({ ...prev, spec: options.spec, action: options.action, policies: { ...prev.policies, overlap: ScheduleOverlapPolicy.SKIP } }));
  }
}

/** Without -metrics-interval nothing is sampled: the schedule of an earlier start is removed. */
export async function removeAlertEvalSchedule(temporal: Client): Promise<void> {
  try {
    await temporal.schedule.getHandle(ALERT_EVAL_SCHEDULE_ID).delete();
  } catch (err) {
    if (!(err instanceof ScheduleNotFoundError)) throw err;
  }
}
