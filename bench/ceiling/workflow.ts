import { condition, defineSignal, proxyLocalActivities, setHandler, upsertSearchAttributes } from '@temporalio/workflow';
import { SA } from '../../domain/shared/search-attributes';

// The least a reservation workflow can do: wait for the report, settle in a local activity,
// upsert two search attributes, complete. What the dev server does for this is the ceiling.
const { settle } = proxyLocalActivities<{ settle(id: string): Promise<string> }>({ startToCloseTimeout: '30 seconds' });

export const reportSignal = defineSignal<[string]>('report');

export async function minimalReservation(id: string): Promise<string> {
  let report: string | undefined;
  setHandler(reportSignal, (r) => {
    report ??= r;
  });
  await condition(() => report !== undefined, 60_000);
  const source = await settle(id);
  upsertSearchAttributes([
    { key: SA.BillingSource, value: source },
    { key: SA.Status, value: 'settled' },
  ]);
  return source;
}
