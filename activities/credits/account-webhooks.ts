import type { Db } from '../../platform/db';
import { allowList, guardedAgent } from '../../services/shared/webhook-targets';
import { attemptDelivery, failDelivery } from '../../services/accounts/webhooks';

// The activities of account webhook delivery (workflows/credits/account-webhook.ts).

export interface AccountWebhookActivityDeps {
  db: Db;
  /** opens the endpoints' sealed signing secrets */
  sealingKey: Buffer;
  /** internal addresses the operator allows as targets (GATEWAY_WEBHOOK_ALLOW_TARGETS) */
  allowTargets: string[];
}

export function createAccountWebhookActivities(deps: AccountWebhookActivityDeps) {
  const allowed = allowList(deps.allowTargets);
  const dispatcher = guardedAgent(allowed);
  const d = { db: deps.db, sealingKey: deps.sealingKey, allowed };
  return {
    attemptAccountWebhook: (deliveryId: string, attempt: number) => attemptDelivery(d, dispatcher, deliveryId, attempt),
    failAccountWebhook: (deliveryId: string) => failDelivery(deps.db, deliveryId),
  };
}

export type AccountWebhookActivities = ReturnType<typeof createAccountWebhookActivities>;
