import type { TokenUsage } from './pricing';

export const RESERVATION_TASK_QUEUE = 'billing';

export const reservationWorkflowId = (requestId: string) => `reservation-${requestId}`;

export interface ReservationInput {
  reservationId: string;
  /** How long to wait for the API's report before resolving the hold without it. */
  holdTimeoutMs: number;
  /** After an uncertain upstream failure (timeout, dropped connection), how long to keep the hold. */
  uncertainGraceMs: number;
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
