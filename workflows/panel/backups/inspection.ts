import { condition, proxyActivities, setHandler } from '@temporalio/workflow';
import type { BackupOpActivities } from '../../../activities/panel/backups/backup-ops';
import { removeInspectionSignal } from '../../../domain/panel/backups';
import type { InspectionInput } from '../../../domain/panel/workflows';

// One per extraction of a restore point for inspection (`inspection-<id>`, spec 2 section 8):
// extracts it on the hosting node into a root-only folder (no TLS private keys), then waits on a
// durable timer (24 hours; tests shorten it) or "Remove now", whichever comes first, and removes it.

// an extraction takes minutes for a large site; it heartbeats, so a dead worker's attempt is retried within seconds
const { extractInspection, finishInspection } = proxyActivities<BackupOpActivities>({
  startToCloseTimeout: '60 minutes',
  heartbeatTimeout: '20 seconds',
  retry: { initialInterval: '5 seconds', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 5 },
});

export async function inspectionWorkflow(input: InspectionInput): Promise<{ extracted: boolean; removedBy: 'timer' | 'request' | 'failure'; error?: string }> {
  let removeNow = false;
  setHandler(removeInspectionSignal, () => {
    removeNow = true;
  });
  const extracted = await extractInspection(input.inspectionId);
  if (!extracted.ok) {
    await finishInspection(input.inspectionId);
    return { extracted: false, removedBy: 'failure', error: extracted.error };
  }
  const early = await condition(() => removeNow, input.durationMs);
  await finishInspection(input.inspectionId);
  return { extracted: true, removedBy: early ? 'request' : 'timer' };
}
