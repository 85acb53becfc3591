import type { Db } from '../../platform/db';
import { attemptDelivery, type WebhookLog } from '../../services/shared/webhook-delivery';
import { allowList, guardedAgent } from '../../services/shared/webhook-targets';

// The one factory of webhook delivery activities, for both products: an attempt and the give-up,
// over the product's delivery log, posting only to targets the operator allows. Each product
// registers them under its workflow's activity names (activities/credits, activities/panel).

export interface WebhookDeliveryActivityDeps {
  db: Db;
  /** opens the endpoints' sealed signing secrets */
  sealingKey: Buffer;
  /** internal addresses the operator allows as targets */
  allowTargets: string[];
}

export function createWebhookDeliveryActivities(log: WebhookLog, deps: WebhookDeliveryActivityDeps) {
  const dispatcher = guardedAgent(allowList(deps.allowTargets));
  return {
    attempt: (deliveryId: string, attempt: number) => attemptDelivery(log, deps, dispatcher, deliveryId, attempt),
    fail: (deliveryId: string) => log.fail(deps.db, deliveryId),
  };
}
