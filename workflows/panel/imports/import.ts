import { ActivityFailure, defineQuery, proxyActivities, proxyLocalActivities, setHandler } from '@temporalio/workflow';
import type { ImportActivities } from '../../../activities/panel/imports/imports';
import type { ImportInput } from '../../../domain/panel/workflows';

// A run of a legacy import (`import-<import_id>`, PANEL.md section 4): one activity per item in the
// spec's order (DNS zones, websites, databases, site files, SQL loads); each item is recorded done
// in PostgreSQL before the next starts, so a run started again after a crash skips what was done.
// A failed item stops the run (status `stopped`, run again to retry). Progress is a query.

const { runImportItem } = proxyActivities<ImportActivities>({
  // a file copy or an SQL load of a large account takes long; it heartbeats, so a dead worker's attempt is retried soon
  startToCloseTimeout: '2 hours',
  heartbeatTimeout: '20 seconds',
  retry: { initialInterval: '2 seconds', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 3 },
});

const { importItemsToRun, failImportItem, finishImportRun } = proxyLocalActivities<ImportActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '500 milliseconds', backoffCoefficient: 2, maximumInterval: '10 seconds' },
});

export interface ImportProgress {
  total: number;
  finished: number;
  current: { seq: number; step: string; name: string } | null;
  failed: { seq: number; error: string } | null;
}

export interface ImportRunResult {
  importId: string;
  status: 'done' | 'stopped';
  ran: number;
}

export const importProgressQuery = defineQuery<ImportProgress>('progress');

export async function importWorkflow(input: ImportInput): Promise<ImportRunResult> {
  const items = await importItemsToRun(input.importId);
  const progress: ImportProgress = { total: items.length, finished: 0, current: null, failed: null };
  setHandler(importProgressQuery, () => progress);
  let error: string | null = null;
  for (const item of items) {
    progress.current = item;
    try {
      await runImportItem(input.importId, item.seq);
    } catch (err) {
      error = err instanceof ActivityFailure && err.cause ? err.cause.message : String(err);
      progress.failed = { seq: item.seq, error };
      await failImportItem(input.importId, item.seq, error);
      break;
    }
    progress.finished++;
  }
  progress.current = null;
  const { status } = await finishImportRun(input.importId, error);
  return { importId: input.importId, status, ran: progress.finished };
}
