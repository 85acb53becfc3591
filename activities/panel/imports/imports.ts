import { Context } from '@temporalio/activity';
import { failImportItem, finishImportRun, importItemsToRun, runImportItem, type ImportRunDeps } from '../../../services/panel/imports/run-items';

/**
 * Activities of a legacy import run (`import-<import_id>`): list the items left, perform one item
 * and record it done (safe to repeat after a crash), record a failure, end the run (the archive copy
 * is deleted once everything is done).
 */
export function createImportActivities(deps: ImportRunDeps) {
  return {
    importItemsToRun: (importId: string) => importItemsToRun(deps.db, importId),
    runImportItem: (importId: string, seq: number) => runImportItem(deps, importId, seq, () => Context.current().heartbeat()),
    failImportItem: (importId: string, seq: number, error: string) => failImportItem(deps.db, importId, seq, error),
    finishImportRun: (importId: string, error: string | null) => finishImportRun(deps.db, importId, error),
  };
}

export type ImportActivities = ReturnType<typeof createImportActivities>;
