import { proxyActivities } from '@temporalio/workflow';
import type { AlertActivities } from '../../../activities/panel/alerts/alerts';
import type { AlertEvalInput } from '../../../domain/panel/workflows';
import type { WebhookDeliveryInput } from '../../../domain/shared/webhooks';
import { deliverWebhook, WEBHOOK_ATTEMPT_OPTIONS } from '../../shared/webhook-delivery';

// Alert evaluation (`alert-eval`, run by a schedule at the metrics interval) and webhook delivery
// (`webhook-<delivery_id>`, PANEL.md section 4). Evaluation is one activity: set-based SQL over
// every node (services/panel/alerts/evaluate.ts), then it hands new deliveries to Temporal. A
// delivery is the shared delivery loop (workflows/shared/webhook-delivery.ts) over the panel's
// activities, given up after giveUpAfterMs (24 h by default).

const { evaluateAlerts } = proxyActivities<AlertActivities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '10 seconds', maximumAttempts: 3 },
});

const { attemptWebhookDelivery, failWebhookDelivery } = proxyActivities<AlertActivities>(WEBHOOK_ATTEMPT_OPTIONS);

export async function alertEvalWorkflow(input: AlertEvalInput) {
  return evaluateAlerts(input.webhooks);
}

export async function webhookDeliveryWorkflow(input: WebhookDeliveryInput): Promise<{ delivered: boolean; attempts: number }> {
  return deliverWebhook({ attempt: attemptWebhookDelivery, fail: failWebhookDelivery }, input);
}
