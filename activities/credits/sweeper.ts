import { Context } from '@temporalio/activity';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { ABANDONED_REPORT, reservationWorkflowId } from '../../domain/credits/reservation';
import type { Db } from '../../platform/db';
import { holdsOfDeadProcesses, settleReservation, type AbandonmentRule, type HeldRow } from '../../services/credits/settlement';

/**
 * Releases holds whose API process died before reporting their outcome (its heartbeat stopped),
 * page after page until none is left, leaving alone any whose workflow is running (it settles
 * them itself). The rule comes from this worker's configuration, read at each run.
 */
export function createSweeperActivities(db: Db, temporal: Client, rule: AbandonmentRule) {
  // Schedules created before the rule followed the configuration still pass an age: ignored.
  async function releaseOrphanHolds(_scheduledOlderThanMs?: number): Promise<{ examined: number; released: string[] }> {
    const released: string[] = [];
    let examined = 0;
    for (let after: HeldRow | null = null; ; ) {
      const page = await holdsOfDeadProcesses(db, rule, after);
      for (const row of page) {
        if (await workflowRunning(row.owner_workflow_id ?? reservationWorkflowId(row.id))) continue;
        const r = await settleReservation(db, row.id, ABANDONED_REPORT);
        if (r.applied) released.push(row.id);
      }
      examined += page.length;
      Context.current().heartbeat(examined);
      if (page.length < 500) return { examined, released };
      after = page[page.length - 1];
    }
  }

  async function workflowRunning(workflowId: string): Promise<boolean> {
    try {
      const d = await temporal.workflow.getHandle(workflowId).describe();
      return d.status.name === 'RUNNING';
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return false;
      throw err;
    }
  }

  return { releaseOrphanHolds };
}

export type SweeperActivities = ReturnType<typeof createSweeperActivities>;
