import { ScheduleAlreadyRunning, ScheduleNotFoundError, ScheduleOverlapPolicy, type Client, type ScheduleOptions } from '@temporalio/client';
import type { WorkflowOf } from '../../../domain/shared/workflow-of';
import { ALERT_EVAL_SCHEDULE_ID, webhookWorkflowId, type AlertEvalInput } from '../../../domain/panel/workflows';
import type { WebhookDeliveryInput, WebhookDeliveryRetry } from '../../../domain/shared/webhooks';
import { SA } from '../../../domain/shared/search-attributes';
import { startOnce } from '../shared/start-once';

// The one place that starts the alerts area's workflows: alert evaluation (a schedule at the
// metrics interval, `alert-eval`) and webhook deliveries (`webhook-<delivery_id>`). A repeated
// start is not an error; the schedule is created or brought up to date.

export interface WebhookSettings {
  taskQueue: string;
  retry: WebhookDeliveryRetry;
}

/** Starts a delivery's workflow (`webhook-<delivery_id>`); a repeated start is not an error. */
export async function startWebhookDelivery(temporal: Client, settings: WebhookSettings, deliveryId: string, orgId: string): Promise<void> {
  await startOnce(() =>
    temporal.workflow.start<WorkflowOf<WebhookDeliveryInput>>('webhookDeliveryWorkflow', {
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
      workflowType: 'alertEvalWorkflow',
      taskQueue: webhooks.taskQueue,
      args: [{ webhooks } satisfies AlertEvalInput],
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
