import { proxyActivities } from '@temporalio/workflow';
import type { AccountWebhookActivities } from '../../activities/credits/account-webhooks';
import type { WebhookDeliveryInput } from '../../domain/shared/webhooks';
import { deliverWebhook, WEBHOOK_ATTEMPT_OPTIONS } from '../shared/webhook-delivery';

// Delivery of one account event (`account-webhook-<delivery_id>`, issue 23 feature 5): the shared
// delivery loop (workflows/shared/webhook-delivery.ts) over this product's activities.

const { attemptAccountWebhook, failAccountWebhook } = proxyActivities<AccountWebhookActivities>(WEBHOOK_ATTEMPT_OPTIONS);

export type AccountWebhookInput = WebhookDeliveryInput;

export async function accountWebhookWorkflow(input: AccountWebhookInput): Promise<{ delivered: boolean; attempts: number }> {
  return deliverWebhook({ attempt: attemptAccountWebhook, fail: failAccountWebhook }, input);
}
