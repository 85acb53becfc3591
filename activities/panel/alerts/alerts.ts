import { Context } from '@temporalio/activity';
import type { Db } from '../../../platform/db';
import type { WebhookSettings } from '../../../services/panel/alerts/client';
import { evaluateAlerts } from '../../../services/panel/alerts/evaluate';
import { PANEL_WEBHOOK_LOG, startPendingDeliveries } from '../../../services/panel/alerts/webhooks';
import { createWebhookDeliveryActivities } from '../../shared/webhook-delivery';

// The activities of alert evaluation and webhook delivery (workflows/panel/alerts/alerts.ts).

export interface AlertActivityDeps {
  db: Db;
  /** seals webhook signing secrets (the panel's sealing key) */
  sealingKey: Buffer;
  /** internal addresses the operator allows as webhook targets (PANEL_WEBHOOK_ALLOW_TARGETS) */
  webhookAllowTargets: string[];
}

export function createAlertActivities(deps: AlertActivityDeps) {
  const delivery = createWebhookDeliveryActivities(PANEL_WEBHOOK_LOG, { db: deps.db, sealingKey: deps.sealingKey, allowTargets: deps.webhookAllowTargets });
  return {
    /** Samples, evaluates every rule, then starts the workflows of the deliveries that recorded. */
    async evaluateAlerts(settings: WebhookSettings) {
      const result = await evaluateAlerts(deps.db);
      const deliveries = await startPendingDeliveries(deps.db, Context.current().client, settings);
      return { ...result, deliveries_started: deliveries };
    },
    attemptWebhookDelivery: delivery.attempt,
    failWebhookDelivery: delivery.fail,
  };
}

export type AlertActivities = ReturnType<typeof createAlertActivities>;
