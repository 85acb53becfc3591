import { proxyActivities, sleep, upsertSearchAttributes } from '@temporalio/workflow';
import type { AccountWebhookActivities } from '../../activities/credits/account-webhooks';
import { SA } from '../../domain/shared/search-attributes';

// Delivery of one account event (`account-webhook-<delivery_id>`, issue 23 feature 5), as the
// panel's `webhook-<id>`: a signed POST until the receiver answers 2xx, sleeping exponentially
// longer between attempts (durable timers), given up after giveUpAfterMs.

// One HTTP attempt (10 s at most) and its row; retried only when recording it failed.
const { attemptAccountWebhook, failAccountWebhook } = proxyActivities<AccountWebhookActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 5 },
});

export interface AccountWebhookInput {
  deliveryId: string;
  initialMs: number;
  maxMs: number;
  giveUpAfterMs: number;
}

export async function accountWebhookWorkflow(input: AccountWebhookInput): Promise<{ delivered: boolean; attempts: number }> {
  const started = Date.now();
  for (let attempt = 1; ; attempt++) {
    const r = await attemptAccountWebhook(input.deliveryId, attempt);
    if (r.done) {
      upsertSearchAttributes([{ key: SA.Status, value: r.delivered ? 'delivered' : 'gone' }]);
      return { delivered: r.delivered, attempts: attempt };
    }
    const wait = Math.min(input.initialMs * 2 ** (attempt - 1), input.maxMs);
    if (Date.now() + wait - started > input.giveUpAfterMs) {
      await failAccountWebhook(input.deliveryId);
      upsertSearchAttributes([{ key: SA.Status, value: 'failed' }]);
      return { delivered: false, attempts: attempt };
    }
    await sleep(wait);
  }
}
