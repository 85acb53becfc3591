import { proxyActivities } from '@temporalio/workflow';
import type { BillingActivities } from '../../../activities/panel/billing/billing';
import type { MonthCloseInput, MonthCloseResult } from '../../../domain/panel/workflows';

// Close month (`month-close-<org>-<YYYY-MM>`, PANEL.md section 4): rates the org's month with the
// plans as they are now and writes the closed statement once (one transaction keyed by org and
// month), so a retried activity or a second close returns the same statement.

const { closeMonthStatement } = proxyActivities<BillingActivities>({
  startToCloseTimeout: '5 minutes',
  // the activity heartbeats every second: a killed worker is noticed within 10 s
  heartbeatTimeout: '10 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

export async function monthCloseWorkflow(input: MonthCloseInput): Promise<MonthCloseResult> {
  return closeMonthStatement(input);
}
