import { Client as PgClient } from 'pg';
import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import { SA } from '../../domain/shared/search-attributes';
import { WEBHOOK_RETRY_DEFAULTS, type WebhookDeliveryInput, type WebhookDeliveryRetry } from '../../domain/shared/webhooks';
import type { WorkflowOf } from '../../domain/shared/workflow-of';
import type { Db } from '../../platform/db';
import type { Logger } from '../../platform/logger';
import { EVENTS_CHANNEL } from './event-sql';
import { claimUnstarted, unclaim } from './webhooks';

// Hands the account-event deliveries settlement records to Temporal (runs in the credits worker,
// beside the settlement relay): woken by NOTIFY, with a poll as a fallback. A delivery's start
// that fails is given back and retried on the next pass; a repeated start is not an error.

export const accountWebhookWorkflowId = (deliveryId: string) => `account-webhook-${deliveryId}`;


export interface EventRelayOptions {
  db: Db;
  databaseUrl: string;
  temporal: Client;
  taskQueue: string;
  logger: Logger;
  retry?: WebhookDeliveryRetry;
  pollMs?: number;
}

async function startDelivery(o: EventRelayOptions, d: { id: string; account_id: string }): Promise<void> {
  try {
    await o.temporal.workflow.start<WorkflowOf<WebhookDeliveryInput>>('accountWebhookWorkflow', {
      taskQueue: o.taskQueue,
      workflowId: accountWebhookWorkflowId(d.id),
      args: [{ deliveryId: d.id, ...(o.retry ?? WEBHOOK_RETRY_DEFAULTS) }],
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
      typedSearchAttributes: [
        { key: SA.AccountId, value: d.account_id },
        { key: SA.Kind, value: 'account_webhook' },
      ],
      memo: { what: `account webhook delivery ${d.id}: signed POST of one event, retried` },
    });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
}

/** Starts every unstarted delivery's workflow; returns how many. */
export async function startPendingAccountWebhooks(o: EventRelayOptions): Promise<number> {
  const claimed = await claimUnstarted(o.db);
  for (let i = 0; i < claimed.length; i++) {
    try {
      await startDelivery(o, claimed[i]);
    } catch (err) {
      await unclaim(o.db, claimed.slice(i).map((c) => c.id));
      throw err;
    }
  }
  return claimed.length;
}

export async function startAccountEventRelay(o: EventRelayOptions): Promise<{ stop(): Promise<void> }> {
  let stopped = false;
  let running: Promise<void> | null = null;
  const pass = () => {
    if (stopped || running) return;
    running = startPendingAccountWebhooks(o)
      .then(() => undefined)
      .catch((err) => o.logger.warn({ err }, 'account webhook starts failed; the next pass retries'))
      .finally(() => (running = null));
  };
  const listener = new PgClient({ connectionString: o.databaseUrl });
  listener.on('error', (err) => o.logger.warn({ err }, 'account event listener lost its connection; polling continues'));
  await listener.connect();
  listener.on('notification', pass);
  await listener.query(`LISTEN ${EVENTS_CHANNEL}`);
  const poll = setInterval(pass, o.pollMs ?? 5000);
  pass();
  return {
    async stop() {
      stopped = true;
      clearInterval(poll);
      await running;
      await listener.end().catch(() => undefined);
    },
  };
}
