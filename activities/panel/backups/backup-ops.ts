import type { OwnNode } from '../../../domain/panel/own-node';
import type { Db } from '../../../platform/db';
import { pruneRestorePoints, queueScheduledBackup as queue } from '../../../services/panel/backups/backups';
import { applyBackupOnHosting, finishBackupOp as finish, type BackupOpFinish } from '../../../services/panel/backups/outcomes';
import { extractInspection as extract, finishInspection as finishInspecting } from '../../../services/panel/backups/admin';
import { heartbeating } from '../shared/heartbeating';

export interface BackupOpActivityDeps {
  db: Db;
  /** the panel's hosting node this worker drives; null on a worker without one (its hosting ops fail) */
  hostingNode: Pick<OwnNode, 'apply' | 'backups'> | null;
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
    return heartbeating(() => applyBackupOnHosting(deps.db, opId, (op) => node.apply(op)));
  }

  const finishBackupOp = (f: BackupOpFinish) => finish(deps.db, f);

  /** A scheduled backup: a pending restore point and its queued operation, or why none is taken. */
  const queueScheduledBackup = (siteId: string) => queue(deps.db, siteId);

  /** Queues the deletion of a site's ready restore points beyond the newest `keep`. */
  const restorePointsBeyond = (siteId: string, keep: number) => pruneRestorePoints(deps.db, siteId, keep);

  /** Extracts a restore point for inspection on the hosting node; records the folder or the failure. */
  const extractInspection = (inspectionId: string) => heartbeating(() => extract(deps.db, deps.hostingNode?.backups ?? null, inspectionId));

  /** Removes an inspection folder and records it removed. */
  const finishInspection = (inspectionId: string) => heartbeating(() => finishInspecting(deps.db, deps.hostingNode?.backups ?? null, inspectionId));

  return { applyBackupOnHostingNode, finishBackupOp, queueScheduledBackup, restorePointsBeyond, extractInspection, finishInspection };
}

export type BackupOpActivities = ReturnType<typeof createBackupOpActivities>;
