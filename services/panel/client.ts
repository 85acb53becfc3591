import { ScheduleAlreadyRunning, ScheduleNotFoundError, ScheduleOverlapPolicy, WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError, type Client, type ScheduleOptions } from '@temporalio/client';
import { backupOpSearchAttributes } from '../../domain/panel/backups';
import { nodeOpReportedSignal } from '../../domain/panel/node-ops';
import { SA } from '../../domain/shared/search-attributes';
import type { alertEvalWorkflow, webhookDeliveryWorkflow } from '../../workflows/panel/alerts/alerts';
import type { BackupOpInput, backupOpWorkflow } from '../../workflows/panel/backups/backup-op';
import type { DatabaseOpInput, databaseOpWorkflow } from '../../workflows/panel/databases/database-op';
import type { NodeOpInput, nodeOpWorkflow } from '../../workflows/panel/sites/node-op';
import type { ReconcileInput, reconcileWorkflow } from '../../workflows/panel/reconcile/reconcile';
import type { ImportInput, importWorkflow } from '../../workflows/panel/imports/import';

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

// ---- reconciliation passes (`reconcile-<pass_id>`) and their schedule ----

export const reconcileWorkflowId = (passId: string): string => `reconcile-${passId}`;
export const RECONCILE_SCHEDULE_ID = 'reconcile-schedule';

/** How passes run: `-reconcile` (null: off), the schedule's interval, the batch per activity. */
export interface ReconcileSettings {
  mode: 'dry-run' | 'on' | null;
  intervalMs: number;
  batchSize: number;
  heartbeatTimeoutMs: number;
  taskQueue: string;
}

export const RECONCILE_DEFAULTS: Omit<ReconcileSettings, 'mode'> = { intervalMs: 15 * 60_000, batchSize: 100, heartbeatTimeoutMs: 60_000, taskQueue: PANEL_TASK_QUEUE };

const reconcileInput = (s: ReconcileSettings, trigger: ReconcileInput['trigger'], passId?: string): ReconcileInput => ({
  ...(passId ? { passId } : {}),
  mode: s.mode ?? 'dry-run',
  trigger,
  batchSize: s.batchSize,
  heartbeatTimeoutMs: s.heartbeatTimeoutMs,
});

const reconcileMemo = (mode: string | null, trigger: string) => ({
  what: `reconciliation pass over every site on the hosting node (${mode === 'on' ? 'remediating opted-in sites' : 'observe and report only'}), started by ${trigger === 'schedule' ? 'the schedule' : 'POST /v1/reconcile/run'}`,
});

/** Starts pass `passId` now (its pass row exists already: services/panel/reconcile/run). */
export async function startReconcilePass(temporal: Client, s: ReconcileSettings, passId: string): Promise<void> {
  await startOnce(() =>
    temporal.workflow.start<typeof reconcileWorkflow>('reconcileWorkflow', {
      taskQueue: s.taskQueue,
      workflowId: reconcileWorkflowId(passId),
      args: [reconcileInput(s, 'manual', passId)],
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      typedSearchAttributes: [
        { key: SA.NodeName, value: 'hosting' },
        { key: SA.Kind, value: 'reconcile' },
        { key: SA.Status, value: 'running' },
      ],
      memo: { ...reconcileMemo(s.mode, 'manual'), pass_id: passId },
    }),
  );
}

/** Whether pass `passId`'s workflow is still running (false: finished, failed or never started). */
export async function reconcilePassRunning(temporal: Client, passId: string): Promise<boolean> {
  try {
    return (await temporal.workflow.getHandle(reconcileWorkflowId(passId)).describe()).status.name === 'RUNNING';
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return false;
    throw err;
  }
}

/**
 * The schedule of passes (`-reconcile dry-run|on`): created, or updated to the current mode and
 * interval; with `-reconcile off` it is deleted. Its runs are `reconcile-scheduled-<time>`.
 */
export async function ensureReconcileSchedule(temporal: Client, s: ReconcileSettings): Promise<void> {
  const handle = temporal.schedule.getHandle(RECONCILE_SCHEDULE_ID);
  if (s.mode === null) {
    try {
      await handle.delete();
    } catch (err) {
      if (!(err instanceof ScheduleNotFoundError)) throw err;
    }
    return;
  }
  const action = {
    type: 'startWorkflow' as const,
    workflowType: 'reconcileWorkflow',
    taskQueue: s.taskQueue,
    args: [reconcileInput(s, 'schedule')],
    workflowId: reconcileWorkflowId('scheduled'),
    typedSearchAttributes: [{ key: SA.Kind, value: 'reconcile' }],
    memo: reconcileMemo(s.mode, 'schedule'),
  };
  const spec = { intervals: [{ every: s.intervalMs }] };
  try {
    await temporal.schedule.create({ scheduleId: RECONCILE_SCHEDULE_ID, spec, policies: { overlap: ScheduleOverlapPolicy.SKIP }, action, memo: { purpose: 'runs reconciliation passes of the hosting node' } });
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
    await handle.update((prev) => ({ ...prev, spec, action }));
  }
}

/** When the schedule starts the next pass; null: no schedule. */
export async function nextReconcilePass(temporal: Client): Promise<Date | null> {
  try {
    return (await temporal.schedule.getHandle(RECONCILE_SCHEDULE_ID).describe()).info.nextActionTimes[0] ?? null;
  } catch (err) {
    if (err instanceof ScheduleNotFoundError) return null;
    throw err;
  }
}

/** Starts a backup operation's workflow (`node-op-<op_id>`: a restore point taken, deleted or restored on its node). */
export async function startBackupOp(temporal: Client, settings: NodeOpSettings, s: Omit<BackupOpInput, 'timeoutMs' | 'pollMs'> & { domain: string }): Promise<void> {
  const { domain, ...input } = s;
  await startOnce(() =>
    temporal.workflow.start<typeof backupOpWorkflow>('backupOpWorkflow', {
      taskQueue: settings.taskQueue,
      workflowId: nodeOpWorkflowId(input.opId),
      args: [{ ...input, timeoutMs: settings.timeoutMs, pollMs: settings.pollMs }],
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      typedSearchAttributes: backupOpSearchAttributes(input),
      memo: { what: `${input.kind} of ${domain} (restore point ${input.restorePointId}) on node ${input.node}`, op_id: input.opId, site_id: input.siteId, restore_point_id: input.restorePointId, domain },
    }),
  );
}

export { removeInspectionSignal } from '../../domain/panel/backups';

/** The workflow that keeps a restore point extracted for inspection and removes it (`inspection-<id>`). */
export const inspectionWorkflowId = (inspectionId: string): string => `inspection-${inspectionId}`;

/** Without -metrics-interval nothing is sampled: the schedule of an earlier start is removed. */
export async function removeAlertEvalSchedule(temporal: Client): Promise<void> {
  try {
    await temporal.schedule.getHandle(ALERT_EVAL_SCHEDULE_ID).delete();
  } catch (err) {
    if (!(err instanceof ScheduleNotFoundError)) throw err;
  }
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
