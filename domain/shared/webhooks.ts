// One webhook delivery as both products run it (the gateway's account webhooks, the panel's alert
// webhooks): the retry plan of the delivery workflow and what one attempt tells it. Pure.

/** Retries of a delivery: exponential from initialMs, at most maxMs apart, given up after giveUpAfterMs. */
export interface WebhookDeliveryRetry {
  initialMs: number;
  maxMs: number;
  giveUpAfterMs: number;
}

/** Both products' default: 10 s, doubling up to an hour apart, given up after a day. */
export const WEBHOOK_RETRY_DEFAULTS: WebhookDeliveryRetry = { initialMs: 10_000, maxMs: 3_600_000, giveUpAfterMs: 86_400_000 };

export interface WebhookDeliveryInput extends WebhookDeliveryRetry {
  deliveryId: string;
}

export interface AttemptOutcome {
  /** the delivery is finished (delivered now or before, or its endpoint is gone): no more attempts */
  done: boolean;
  delivered: boolean;
  status: number | null;
  error: string | null;
}

/** The wait after failed attempt number `attempt` (1-based). */
export const retryWait = (r: WebhookDeliveryRetry, attempt: number): number => Math.min(r.initialMs * 2 ** (attempt - 1), r.maxMs);
