import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { ABANDONED_REPORT, reservationWorkflowId } from '../../domain/credits/reservation';
import type { Db } from '../../platform/db';
import { settleReservation, staleHolds } from '../../services/credits/settlement';

/**
 * Finds holds older than any reservation workflow could keep them and releases those whose
 * workflow never started (the API process died between the hold and the start).
 */
export function createSweeperActivities(db: Db, temporal: Client) {
  async function releaseOrphanHolds(olderThanMs: number): Promise<{ examined: number; released: string[] }> {
    const rows = await staleHolds(db, olderThanMs);
    const released: string[] = [];
    for (const { id, owner_workflow_id } of rows) {
      if (await workflowRunning(owner_workflow_id ?? reservationWorkflowId(id))) continue; // it will settle the hold itself
      const r = await settleReservation(db, id, ABANDONED_REPORT);
      if (r.applied) released.push(id);
    }
    return { examined: rows.length, released };
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
