import { Context } from '@temporalio/activity';
import type { Db } from '../../../platform/db';
import type { WebhookSettings } from '../../../services/panel/alerts/client';
import { evaluateAlerts } from '../../../services/panel/alerts/evaluate';
import { allowList, guardedAgent } from '../../../services/shared/webhook-targets';
import { attemptDelivery, failDelivery, startPendingDeliveries } from '../../../services/panel/alerts/webhooks';

// The activities of alert evaluation and webhook delivery (workflows/panel/alerts/alerts.ts).

export interface AlertActivityDeps {
  db: Db;
  /** seals webhook signing secrets (the panel's sealing key) */
  sealingKey: Buffer;
  /** internal addresses the operator allows as webhook targets (PANEL_WEBHOOK_ALLOW_TARGETS) */
  webhookAllowTargets: string[];
}

export function createAlertActivities(deps: AlertActivityDeps) {
  const allowed = allowList(deps.webhookAllowTargets);
  const dispatcher = guardedAgent(allowed);
  const webhooks = { db: deps.db, sealingKey: deps.sealingKey, allowed };
  return {
    /** Samples, evaluates every rule, then starts the workflows of the deliveries that recorded. */
    async evaluateAlerts(settings: WebhookSettings) {
      const result = await evaluateAlerts(deps.db);
      const deliveries = await startPendingDeliveries(deps.db, Context.current().client, settings);
      return { ...result, deliveries_started: deliveries };
    },
    attemptWebhookDelivery: (deliveryId: string, attempt: number) => attemptDelivery(webhooks, dispatcher, deliveryId, attempt),
    failWebhookDelivery: (deliveryId: string) => failDelivery(deps.db, deliveryId),
  };
}

export type AlertActivities = ReturnType<typeof createAlertActivities>;
