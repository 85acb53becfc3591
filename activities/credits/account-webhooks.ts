import { ACCOUNT_WEBHOOK_LOG } from '../../services/accounts/webhooks';
import { createWebhookDeliveryActivities, type WebhookDeliveryActivityDeps } from '../shared/webhook-delivery';

// The activities of account webhook delivery (workflows/credits/account-webhook.ts): the shared
// factory over the account webhook log, under this workflow's activity names.

export type AccountWebhookActivityDeps = WebhookDeliveryActivityDeps;

export function createAccountWebhookActivities(deps: AccountWebhookActivityDeps) {
  const delivery = createWebhookDeliveryActivities(ACCOUNT_WEBHOOK_LOG, deps);
  return { attemptAccountWebhook: delivery.attempt, failAccountWebhook: delivery.fail };
}

export type AccountWebhookActivities = ReturnType<typeof createAccountWebhookActivities>;
