import { ScheduleAlreadyRunning, ScheduleOverlapPolicy, type Client } from '@temporalio/client';
import { HOLD_SWEEPER_SCHEDULE_ID } from '../domain/credits/reservation';
import { sweepHoldsWorkflow } from '../workflows/credits/sweeper';

/**
 * The hold sweeper runs every minute and releases holds older than `olderThanMs` whose
 * reservation workflow never started. Created once; later starts leave it as it is.
 */
export async function ensureHoldSweeperSchedule(client: Client, taskQueue: string, olderThanMs: number): Promise<void> {
  try {
    await client.schedule.create({
      scheduleId: HOLD_SWEEPER_SCHEDULE_ID,
      spec: { intervals: [{ every: '1 minute' }] },
      policies: { overlap: ScheduleOverlapPolicy.SKIP },
      action: { type: 'startWorkflow', workflowType: sweepHoldsWorkflow, taskQueue, args: [olderThanMs], workflowId: 'hold-sweep' },
      memo: { purpose: 'releases holds whose reservation workflow never started' },
    });
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
  }
}
