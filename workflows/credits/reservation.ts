import { condition, proxyActivities, proxyLocalActivities, setHandler, sleep, upsertSearchAttributes } from '@temporalio/workflow';
import { SA } from '../../domain/shared/search-attributes';
import type { SettlementActivities } from '../../activities/credits/settlement';
import type { ProviderCostActivities } from '../../activities/credits/provider-cost';
import { ABANDONED_REPORT, reportSignal, type RequestReport, type ReservationInput, type SettlementResult } from '../../domain/credits/reservation';

// A local activity: settled inside the workflow task, without a round trip through the task
// queue (one reservation per request makes that round trip the dominant cost).
const { settleReservation } = proxyLocalActivities<SettlementActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});

const { fetchLateCost } = proxyActivities<ProviderCostActivities>({
  startToCloseTimeout: '20 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds', maximumAttempts: 5 },
});

/** How long a late provider cost is awaited before the estimate is charged instead. */
const LATE_COST_WAIT_MS = 10 * 60_000;

/** One per billable request: waits for the API's report, then settles the hold exactly once. */
export async function reservationWorkflow(input: ReservationInput): Promise<SettlementResult> {
  let report: RequestReport | undefined;
  setHandler(reportSignal, (r) => {
    report ??= r;
  });
  const reported = await condition(() => report !== undefined, input.holdTimeoutMs);
  if (!reported) report = ABANDONED_REPORT;
  // The provider may still be working: keep the hold until that outcome is certain.
  if (report!.uncertain) await sleep(input.uncertainGraceMs);
  if (report!.lateCost && report!.billable) report = await withLateCost(report!, input.lateCostWaitMs ?? LATE_COST_WAIT_MS);
  const result = await settleReservation(input.reservationId, report!);
  upsertSearchAttributes([
    { key: SA.BillingSource, value: result.billingSource },
    { key: SA.Status, value: result.status },
  ]);
  return result;
}

/** Polls the provider with durable timers until it records its cost; the estimate stays the fallback. */
async function withLateCost(report: RequestReport, maxWaitMs: number): Promise<RequestReport> {
  const { providerId, generationId } = report.lateCost!;
  let waited = 0;
  for (let delay = 1000; ; delay = Math.min(delay * 2, 30_000)) {
    const r = await fetchLateCost(providerId, generationId);
    if (r.status === 'completed') {
      const usageDetails = { ...report.usageDetails, ...r.usage };
      return r.cost === null ? { ...report, usageDetails } : { ...report, usageDetails, media: { billingSource: 'provider_cost', amount: r.cost } };
    }
    if (waited >= maxWaitMs) return report;
    await sleep(delay);
    waited += delay;
  }
}
