import { condition, defineSignal, proxyActivities, setHandler, sleep, upsertSearchAttributes } from '@temporalio/workflow';
import { SA } from '../domain/search-attributes';
import type { LedgerActivities } from '../activities/ledger';
import { ABANDONED_REPORT, type RequestReport, type ReservationInput, type SettlementResult } from '../domain/reservation';

const { settleReservation } = proxyActivities<LedgerActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});

export const reportSignal = defineSignal<[RequestReport]>('report');

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
  const result = await settleReservation(input.reservationId, report!);
  upsertSearchAttributes([
    { key: SA.BillingSource, value: result.billingSource },
    { key: SA.Status, value: result.status },
  ]);
  return result;
}
