import { proxyActivities, sleep, upsertSearchAttributes } from '@temporalio/workflow';
import type { AlertActivities } from '../../../activities/panel/alerts/alerts';
import { SA } from '../../../domain/shared/search-attributes';
import type { AlertEvalInput, WebhookDeliveryInput } from '../../../domain/panel/workflows';

// Alert evaluation (`alert-eval`, run by a schedule at the metrics interval) and webhook delivery
// (`webhook-<delivery_id>`, PANEL.md section 4). Evaluation is one activity: set-based SQL over
// every node (services/panel/alerts/evaluate.ts), then it hands new deliveries to Temporal. A
// delivery attempts a signed POST until the receiver answers 2xx, sleeping exponentially longer
// between attempts (durable timers) and giving up after giveUpAfterMs (24 h by default).

const { evaluateAlerts } = proxyActivities<AlertActivities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '10 seconds', maximumAttempts: 3 },
});

// One HTTP attempt (10 s at most) and its row; retried only when recording it failed.
const { attemptWebhookDelivery, failWebhookDelivery } = proxyActivities<AlertActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 5 },
});

export async function alertEvalWorkflow(input: AlertEvalInput) {
  return evaluateAlerts(input.webhooks);
}

export async function webhookDeliveryWorkflow(input: WebhookDeliveryInput): Promise<{ delivered: boolean; attempts: number }> {
  const started = Date.now();
  for (let attempt = 1; ; attempt++) {
    const r = await attemptWebhookDelivery(input.deliveryId, attempt);
    if (r.done) {
      upsertSearchAttributes([{ key: SA.Status, value: r.delivered ? 'delivered' : 'gone' }]);
      return { delivered: r.delivered, attempts: attempt };
    }
    const wait = Math.min(input.initialMs * 2 ** (attempt - 1), input.maxMs);
    if (Date.now() + wait - started > input.giveUpAfterMs) {
      await failWebhookDelivery(input.deliveryId);
      upsertSearchAttributes([{ key: SA.Status, value: 'failed' }]);
      return { delivered: false, attempts: attempt };
    }
    await sleep(wait);
  }
}
