import { ScheduleAlreadyRunning, ScheduleOverlapPolicy, WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import type { WorkflowOf } from '../../../domain/shared/workflow-of';
import { METER_SCHEDULE_ID, monthCloseWorkflowId, type MonthCloseInput, type MonthCloseResult } from '../../../domain/panel/workflows';
import { SA } from '../../../domain/shared/search-attributes';

// The one place that starts the billing workflows: the hourly metering schedule (its tick starts
// `meter-<YYYY-MM-DDTHH>` per hour due) and Close month (`month-close-<org>-<YYYY-MM>`), on the
// billing task queue of the process that runs with -billing-meter.

/**
 * Creates the hourly metering schedule (a minute past each hour, one tick at a time) or points an
 * existing one at `taskQueue`; then triggers a tick now, so hours missed while the panel was down
 * are metered at once, in order.
 */
export async function ensureMeterSchedule(temporal: Client, taskQueue: string, scheduleId = METER_SCHEDULE_ID): Promise<void> {
  const action = { type: 'startWorkflow' as const, workflowType: 'meterTickWorkflow' as const, workflowId: 'meter-tick', taskQueue, args: [] };
  try {
    await temporal.schedule.create({
      scheduleId,
      spec: { intervals: [{ every: '1h', offset: '1m' }] },
      action,
      policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: '1h' },
      memo: { what: 'meters every billed organisation once per hour (spec 2 section 2.8); missed hours are caught up in order' },
    });
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
    await temporal.schedule.getHandle(scheduleId).update((prev) => ({ ...prev, action: { ...prev.action, ...action } }));
  }
  await temporal.schedule.getHandle(scheduleId).trigger(ScheduleOverlapPolicy.SKIP);
}

/** Runs Close month for one org and waits for its statement; a close already run returns its result. */
export async function runMonthClose(temporal: Client, taskQueue: string, orgId: string, period: string) {
  const workflowId = monthCloseWorkflowId(orgId, period);
  try {
    await temporal.workflow.start<WorkflowOf<MonthCloseInput, MonthCloseResult>>('monthCloseWorkflow', {
      taskQueue,
      workflowId,
      args: [{ orgId, period }],
      workflowIdReusePolicy: 'ALLOW_DUPLICATE_FAILED_ONLY',
      typedSearchAttributes: [
        { key: SA.OrgId, value: orgId },
        { key: SA.Period, value: new Date(`${period}-01T00:00:00Z`) },
      ],
      memo: { what: `closes the month ${period} of organisation ${orgId}: rates it with the plans as they are now and writes the statement once` },
    });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
  return temporal.workflow.getHandle<WorkflowOf<MonthCloseInput, MonthCloseResult>>(workflowId).result();
}
