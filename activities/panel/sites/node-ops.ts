import type { OperationResult } from '../../../domain/panel/node-ops';
import type { OwnNode } from '../../../domain/panel/own-node';
import type { Db } from '../../../platform/db';
import { operationStatus } from '../../../services/panel/nodes/queue';
import { heartbeating } from '../shared/heartbeating';
import { applyOnHosting, expireNodeOp as expire, finishSiteOp as finish, resultOf, type SiteOpFinish, type SiteOpOutcome } from '../../../services/panel/sites/outcomes';

export type { SiteOpOutcome };

/** What the operation activities need of the panel's own hosting node. */
export type HostingNodeApplier = Pick<OwnNode, 'apply'>;

export interface NodeOpActivityDeps {
  db: Db;
  /** the panel's hosting node this worker drives; null on a worker without one (its hosting ops fail) */
  hostingNode: HostingNodeApplier | null;
}

/**
 * Activities of the node operation workflow, keyed by our own operation id: apply on the hosting
 * node (idempotent: an operation that already has a result is not applied again), read and expire
 * a queued operation (conditional updates), and record the outcome on the site (generation-guarded).
 */
export function createNodeOpActivities(deps: NodeOpActivityDeps) {
  async function applyOnHostingNode(opId: string, generation: number): Promise<OperationResult> {
    const node = deps.hostingNode;
    if (!node) throw new Error('this panel worker drives no hosting node');
    return heartbeating(() => applyOnHosting(deps.db, { opId, generation }, (op) => node.apply(op)));
  }

  /** The operation's result once it ended (done, failed, expired), else null. */
  async function readNodeOp(opId: string): Promise<{ status: string; result: OperationResult | null }> {
    const op = await operationStatus(deps.db, opId);
    if (!op) return { status: 'missing', result: { ok: false, refused: false, error: `node operation ${opId} does not exist` } };
    return { status: op.status, result: resultOf(op) };
  }

  /** Expires the operation if its node has not reported yet: its failure result, or null when a result came first. */
  const expireNodeOp = (opId: string, reason: string): Promise<OperationResult | null> => expire(deps.db, opId, reason);

  const finishSiteOp = (f: SiteOpFinish): Promise<SiteOpOutcome> => finish(deps.db, f);

  return { applyOnHostingNode, readNodeOp, expireNodeOp, finishSiteOp };
}

export type NodeOpActivities = ReturnType<typeof createNodeOpActivities>;
