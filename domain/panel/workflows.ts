import type { BackupOperation, DatabaseOpKind } from './node-ops';
import type { ReconcileMode } from './reconcile';
import type { WebhookDeliveryRetry } from '../shared/webhooks';

// The panel's task queues, the ids of its workflows and schedules, and what each workflow is started
// with, as the gateway's stand in domain/: the area clients start under these ids with these inputs
// (naming no workflow code), the workflows take them, the agent routes, workers and tests find them.
// An id is a pure function of the row it works on, so a repeated start finds the running one.

/** The panel worker's queue: node, database and backup operations, alerts, reconciliation, imports. */
export const PANEL_TASK_QUEUE = 'panel';
/** The billing worker's queue (the process that runs with -billing-meter). */
export const BILLING_TASK_QUEUE = 'panel-billing';

/** Site operations (and backup operations, which share the node's op ids). */
export const nodeOpWorkflowId = (opId: string): string => `node-op-${opId}`;
export const databaseOpWorkflowId = (opId: string): string => `database-op-${opId}`;
/** The workflow that keeps a restore point extracted for inspection and removes it. */
export const inspectionWorkflowId = (inspectionId: string): string => `inspection-${inspectionId}`;
export const backupScheduleId = (siteId: string): string => `backup-schedule-${siteId}`;

export const ALERT_EVAL_SCHEDULE_ID = 'alert-eval';
export const webhookWorkflowId = (deliveryId: string): string => `webhook-${deliveryId}`;

export const reconcileWorkflowId = (passId: string): string => `reconcile-${passId}`;
export const RECONCILE_SCHEDULE_ID = 'reconcile-schedule';

export const importWorkflowId = (importId: string): string => `import-${importId}`;

export const METER_SCHEDULE_ID = 'panel-billing-meter';
export const monthCloseWorkflowId = (orgId: string, period: string): string => `month-close-${orgId}-${period}`;


// ---- what each workflow is started with --------------------------------------------------------

export interface NodeOpInput {
  opId: string;
  node: string;
  siteId: string;
  orgId: string;
  kind: 'site.apply' | 'site.delete';
  /** the site's generation this operation carries */
  generation: number;
  /** how long an agent node has to report the result before the operation expires */
  timeoutMs: number;
  /** how often the operation's status is read while waiting for an agent */
  pollMs: number;
}

export interface DatabaseOpInput {
  opId: string;
  node: string;
  databaseId: string;
  orgId: string;
  kind: DatabaseOpKind;
  /** how long an agent node has to report the result before the operation expires */
  timeoutMs: number;
  /** how often the operation's status is read while waiting for an agent */
  pollMs: number;
}

export interface BackupOpInput {
  opId: string;
  node: string;
  siteId: string;
  orgId: string;
  kind: BackupOperation['kind'];
  restorePointId: string;
  /** how long an agent node has to report the result before the operation expires */
  timeoutMs: number;
  /** how often the operation's status is read while waiting for an agent */
  pollMs: number;
}

export interface ScheduledBackupInput {
  siteId: string;
  keep: number;
  /** the agent wait of the node operations (NodeOpSettings) */
  timeoutMs: number;
  pollMs: number;
}

export interface InspectionInput {
  inspectionId: string;
  restorePointId: string;
  /** how long the folder stays */
  durationMs: number;
}

export interface AlertEvalInput {
  webhooks: { taskQueue: string; retry: WebhookDeliveryRetry };
}

export interface ReconcileInput {
  /** absent: taken from the workflow id (a schedule's runs get `reconcile-scheduled-<time>`) */
  passId?: string;
  mode: ReconcileMode;
  trigger: 'schedule' | 'manual';
  /** sites per activity */
  batchSize: number;
  /** how long a batch may go without a heartbeat before it is retried (on another worker) */
  heartbeatTimeoutMs: number;
}

export interface ImportInput {
  importId: string;
  orgId: string;
  /** the run's number (1 for the first): memo and history only */
  run: number;
}

export interface MonthCloseInput {
  orgId: string;
  period: string;
}

/** The closed statement Close month returns (the same for a close run again). */
export interface MonthCloseResult {
  orgId: string;
  period: string;
  meteredHours: number;
  totals: Record<string, string>;
  closedAt: string;
}
