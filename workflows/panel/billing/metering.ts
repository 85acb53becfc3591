import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { continueAsNew, executeChild, proxyActivities } from '@temporalio/workflow';
import type { BillingActivities } from '../../../activities/panel/billing/billing';
import { SA } from '../../../domain/shared/search-attributes';

// Hourly metering (PANEL.md section 4): a Temporal schedule starts meterTickWorkflow every hour;
// it meters every hour that has ended and is not recorded yet, oldest first, each as its own
// `meter-<YYYY-MM-DDTHH>` workflow, so a panel that was down catches up in order. Recording an
// hour is one transaction keyed by the hour: a retried or repeated hour writes nothing.

const { dueMeterHours, recordMeterHour } = proxyActivities<BillingActivities>({
  startToCloseTimeout: '10 minutes',
  // the activity heartbeats every second: a killed worker is noticed within 10 s
  heartbeatTimeout: '10 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/** hours metered per run before continuing as new (keeps the history short during a long catch-up) */
const HOURS_PER_RUN = 100;

export async function meterHourWorkflow(input: { hour: string }) {
  return recordMeterHour(input.hour);
}

export async function meterTickWorkflow(): Promise<{ metered: string[] }> {
  const due = await dueMeterHours();
  const metered: string[] = [];
  for (const hour of due.slice(0, HOURS_PER_RUN)) {
    try {
      await executeChild(meterHourWorkflow, {
        workflowId: `meter-${hour}`,
        args: [{ hour }],
        typedSearchAttributes: [{ key: SA.Period, value: new Date(`${hour}:00:00Z`) }],
        memo: { what: `records the metered facts of hour ${hour}:00 UTC for every billed organisation, once` },
      });
    } catch (err) {
      // another tick meters that hour right now; recording it is idempotent either way
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
    metered.push(hour);
  }
  if (due.length > HOURS_PER_RUN) await continueAsNew<typeof meterTickWorkflow>();
  return { metered };
}
