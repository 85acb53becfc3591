import type { MediaCharge, TokenUsage } from './pricing';

export const RESERVATION_TASK_QUEUE = 'billing';

export const reservationWorkflowId = (requestId: string) => `reservation-${requestId}`;

export interface ReservationInput {
  reservationId: string;
  /** How long to wait for the API's report before resolving the hold without it. */
  holdTimeoutMs: number;
  /** After an uncertain upstream failure (timeout, dropped connection), how long to keep the hold. */
  uncertainGraceMs: number;
  /** how long to await a late provider cost before charging the estimate (default 10 min) */
  lateCostWaitMs?: number;
}

export type Outcome = 'completed' | 'cancelled' | 'failed' | 'abandoned';

/** What the API learnt about the request; sent to the reservation workflow as a signal. */
export interface RequestReport {
  outcome: Outcome;
  /** false: failed or rejected without cost; the whole hold returns */
  billable: boolean;
  /** the provider may still be working (timeout, dropped connection): keep the hold a while */
  uncertain?: boolean;
  usage: TokenUsage | null;
  /** provider cost converted to credits */
  providerCost: string | null;
  httpStatus: number;
  bodyId?: string | null;
  latencyMs?: number;
  error?: string | null;
  /** media requests: the charge by units, and what the provider measured */
  media?: MediaCharge;
  usageDetails?: Record<string, unknown>;
  /**
   * The provider records its cost a while after answering (audio): the workflow fetches it
   * (billing_source `pending` until then) and charges it; `media` is the fallback estimate.
   */
  lateCost?: { providerId: string; generationId: string };
}

export interface SettlementResult {
  reservationId: string;
  status: 'settled' | 'released' | 'cancelled';
  billingSource: string;
  charge: string;
  /** false when an earlier attempt had already settled it */
  applied: boolean;
}

/** What the reservation workflow (or the sweeper) settles when the API never reported. */
export const ABANDONED_REPORT: RequestReport = {
  outcome: 'abandoned',
  billable: false,
  usage: null,
  providerCost: null,
  httpStatus: 0,
  error: 'the API process did not report the outcome of this request in time',
};

export const HOLD_SWEEPER_SCHEDULE_ID = 'hold-sweeper';
