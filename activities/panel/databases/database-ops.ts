import type { Db } from '../../../platform/db';
import { applyDatabaseOnHosting, finishDatabaseOp as finish, type DatabaseOpFinish, type DatabaseOpOutcome } from '../../../services/panel/databases/outcomes';
import { heartbeating } from '../shared/heartbeating';
import type { HostingNodeApplier } from '../sites/node-ops';

export type { DatabaseOpOutcome };

export interface DatabaseOpActivityDeps {
  db: Db;
  /** the panel's hosting node this worker drives; null on a worker without one (its hosting ops fail) */
  hostingNode: HostingNodeApplier | null;
}

/**
 * Activities of the database operation workflow, keyed by our own operation id: apply on the
 * hosting node (an operation that already has a result is not applied again; the password is read
 * from the queued operation, never passed in) and record the outcome on the database row.
 * Waiting for an agent uses the node operation activities (readNodeOp, expireNodeOp).
 */
export function createDatabaseOpActivities(deps: DatabaseOpActivityDeps) {
  async function applyDatabaseOnHostingNode(opId: string) {
    const node = deps.hostingNode;
    if (!node) throw new Error('this panel worker drives no hosting node');
    return heartbeating(() => applyDatabaseOnHosting(deps.db, opId, (op) => node.apply(op)));
  }

  const finishDatabaseOp = (f: DatabaseOpFinish): Promise<DatabaseOpOutcome> => finish(deps.db, f);

  return { applyDatabaseOnHostingNode, finishDatabaseOp };
}

export type DatabaseOpActivities = ReturnType<typeof createDatabaseOpActivities>;
