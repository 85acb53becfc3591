import { sleep, upsertSearchAttributes, type ActivityOptions } from '@temporalio/workflow';
import { SA } from '../../domain/shared/search-attributes';
import { retryWait, type AttemptOutcome, type WebhookDeliveryInput } from '../../domain/shared/webhooks';

// The one delivery loop of both products' webhook workflows (credits/account-webhook.ts,
// panel/alerts.ts): a signed POST until the receiver answers 2xx, sleeping exponentially longer
// between attempts (durable timers), given up after giveUpAfterMs. The workflow types keep their
// own names and activity names, so running histories replay unchanged.

/** One HTTP attempt (10 s at most) and its row; retried only when recording it failed. */
export const WEBHOOK_ATTEMPT_OPTIONS: ActivityOptions = {
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 5 },
};

/** A product's two delivery activities, as proxied by its workflow. */
export interface DeliverySteps {
  attempt(deliveryId: string, attempt: number): Promise<AttemptOutcome>;
  fail(deliveryId: string): Promise<void>;
}

export async function deliverWebhook(steps: DeliverySteps, input: WebhookDeliveryInput): Promise<{ delivered: boolean; attempts: number }> {
  const started = Date.now();
  for (let attempt = 1; ; attempt++) {
    const r = await steps.attempt(input.deliveryId, attempt);
    if (r.done) {
      upsertSearchAttributes([{ key: SA.Status, value: r.delivered ? 'delivered' : 'gone' }]);
      return { delivered: r.delivered, attempts: attempt };
    }
    const wait = retryWait(input, attempt);
    if (Date.now() + wait - started > input.giveUpAfterMs) {
      await steps.fail(input.deliveryId);
      upsertSearchAttributes([{ key: SA.Status, value: 'failed' }]);
      return { delivered: false, attempts: attempt };
    }
    await sleep(wait);
  }
}
