import type { Db } from '../../platform/db';
import { applyBackupOnHosting, finishBackupOp as finish, type BackupOpFinish } from '../../services/panel/sites/backups';
import type { HostingNodeApplier } from './node-ops';

export interface BackupOpActivityDeps {
  db: Db;
  /** the panel's hosting node this worker drives; null on a worker without one (its hosting ops fail) */
  hostingNode: HostingNodeApplier | null;
}

/**
 * Activities of the backup operation workflow, keyed by our own operation id: apply on the hosting
 * node (an operation that already has a result is not applied again; the node keeps results by id
 * too) and record the outcome on the restore point, or on the restored site and its databases.
 */
export function createBackupOpActivities(deps: BackupOpActivityDeps) {
  async function applyBackupOnHostingNode(opId: string) {
    const node = deps.hostingNode;
    if (!node) throw new Error('this panel worker drives no hosting node');
    return applyBackupOnHosting(deps.db, opId, (op) => node.apply(op));
  }

  const finishBackupOp = (f: BackupOpFinish) => finish(deps.db, f);

  return { applyBackupOnHostingNode, finishBackupOp };
}

export type BackupOpActivities = ReturnType<typeof createBackupOpActivities>;
