import { defineSignal } from '@temporalio/workflow';
import { computeCharge, type Charge, type Credits, type MediaCharge, type Tariff, type TokenUsage } from './pricing';

export const RESERVATION_TASK_QUEUE = 'billing';

export const reservationWorkflowId = (requestId: string) => `reservation-${requestId}`;

/**
 * Outcomes a settlement workflow takes at most on a server with the default size limit per
 * search attribute value (2 KB): its RequestIds (a KeywordList of every request id) must fit.
 */
export const SETTLEMENT_BATCH_MAX = 50;

/**
 * Outcomes a settlement workflow can take under a server's size limit per search attribute value:
 * each request id is 39 bytes of the RequestIds JSON list, plus its brackets (2 KB: 52, so 50 is
 * kept; 8 KB: 210). One workflow costs about the same for 1 outcome or 200.
 */
export const settlementBatchUnder = (valueLimitBytes: number): number => Math.floor((valueLimitBytes - 2) / 39);

export const settlementWorkflowId = (firstRequestId: string) => `settlement-${firstRequestId}`;

export interface SettlementInput {
  reservationIds: string[];
}

export interface BatchSettlement {
  /** reservations this run resolved (others had been resolved already) */
  settled: number;
  /** credits charged by this run */
  charged: string;
}

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
  /** the request span's W3C traceparent (tracing on): the settlement workflow's start links to it */
  trace?: string;
  /**
   * Text requests answered by a fallback model of their `models` (issue 36 part 2): that model's
   * tariff, taken from the catalog when the request began, prices the charge; the hold was sized
   * for the dearest candidate, so the charge stays within it. Absent: the hold's tariff.
   */
  tariff?: Tariff;
  /** text requests: the route that answered and every route tried (issue 23, feature 1) */
  routing?: Routing;
  /** answered from the response cache (billing_source cache: the hold is the charge) */
  cacheHit?: boolean;
}

/** One try of a model's route: answered (`ok`, or `refused` the request itself), failed, or skipped (circuit open). */
export interface RouteAttempt {
  /** the model the route serves (a request's `models` may name several) */
  model?: string;
  provider: string;
  upstream_model: string;
  result: 'ok' | 'refused' | 'failed' | 'skipped';
  http_status?: number | null;
  error?: string | null;
  /** the retry on the same route (1 for the first); absent on a route's first attempt */
  retry?: number;
}

export interface Routing {
  /** the model and route that answered; null when none did */
  model?: string | null;
  provider: string | null;
  upstream_model: string | null;
  attempts: RouteAttempt[];
  /** request fields the answering route could not carry, and clamps, as x-gateway-ignored-params listed them */
  ignored_params?: string[];
}

/** The API's report of a request's outcome, sent to `reservation-<request_id>`. */
export const reportSignal = defineSignal<[RequestReport]>('report');

/** What a hold fixes when it is taken (copied onto the reservation row, invariant 5). */
export interface HoldTerms {
  tariff: Tariff;
  held: Credits;
  complimentary: boolean;
}

export type ChargedOutcome = Pick<RequestReport, 'usage' | 'providerCost' | 'billable' | 'media' | 'tariff' | 'cacheHit'>;

/**
 * The charge of an outcome: the one rule behind both what the answer shows (the API, at once)
 * and what settlement writes to the ledger, so the two never differ.
 */
export function chargeOf(t: HoldTerms, o: ChargedOutcome): Charge {
  return computeCharge({ tariff: o.tariff ?? t.tariff, held: t.held, complimentary: t.complimentary, usage: o.usage, providerCost: o.providerCost, billable: o.billable, media: o.media, cacheHit: o.cacheHit });
}

/** The state a hold resolves to (invariant 3): cancelled by the client, released when nothing is billed, else settled. */
export function resolvedStatus(report: RequestReport, charge: Charge): SettlementResult['status'] {
  return report.outcome === 'cancelled' ? 'cancelled' : charge.billing_source === 'not_billed' ? 'released' : 'settled';
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
