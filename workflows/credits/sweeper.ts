import { proxyActivities } from '@temporalio/workflow';
import type { SweeperActivities } from '../../activities/credits/sweeper';

const { releaseOrphanHolds } = proxyActivities<SweeperActivities>({
  startToCloseTimeout: '5 minutes',
  retry: { maximumAttempts: 3 },
});

/** Run by the `hold-sweeper` schedule: no hold may outlive its request. */
export async function sweepHoldsWorkflow(olderThanMs?: number): Promise<{ examined: number; released: string[] }> {
  return releaseOrphanHolds(olderThanMs);
}
