// The panel's task queues and the ids of its workflows and schedules, as the gateway's stand in
// domain/: the area clients start under these ids, the agent routes, workers and tests find them.
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
