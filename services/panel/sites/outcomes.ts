import type { Knex } from 'knex';
import type { NodeOperation, OperationResult } from '../../../domain/panel/node-ops';
import type { Db } from '../../../platform/db';
import { audit } from '../shared/audit';
import { expireOperation, operationStatus, recordResult, type OperationStatus } from '../nodes/queue';
import type { SiteRow } from './sites';

// The node operations of sites (the queue of ../nodes/nodes.ts) and their outcomes, which the node
// operation workflow's activities record: guarded by the site's generations, so a repeated or late
// outcome of an older operation changes nothing, and a site is never left between states.

type Q = Knex | Knex.Transaction;

/** The result of an operation that ended (done, failed or expired); null while it is queued or sent. */
export function resultOf(op: Pick<OperationStatus, 'status' | 'result'>): OperationResult | null {
  if (op.status === 'queued' || op.status === 'sent') return null;
  return op.result ?? { ok: false, refused: false, error: `the operation ended ${op.status}` };
}

/** Records a result on an operation still queued or sent (a repeat, or one that ended already, changes nothing). */
async function closeNodeOp(q: Q, opId: string, result: OperationResult): Promise<void> {
  const op = await operationStatus(q, opId);
  if (op && !resultOf(op)) await recordResult(q, op.node, opId, result);
}

/** Expires an operation its node did not report in time: the failure it records, or null when a result came first. */
export async function expireNodeOp(q: Q, opId: string, reason: string): Promise<OperationResult | null> {
  return (await expireOperation(q, opId, reason)) ? { ok: false, refused: false, error: reason } : null;
}

export interface SiteOpFinish {
  siteId: string;
  opId: string;
  generation: number;
  kind: 'site.apply' | 'site.delete';
  result: OperationResult;
}

export interface SiteOpOutcome {
  /** the site's status afterwards; `deleted` once its rows are gone */
  status: SiteRow['status'] | 'deleted';
  applied_generation: number | null;
}

/**
 * Records an operation's outcome on its site, guarded by generations so that repeats and late
 * outcomes of older operations change nothing: ok ⇒ applied_generation, and active or suspended
 * if this was the latest generation (a delete removes the rows); failed, refused or expired ⇒
 * `failed` with the error if this was the latest. Also closes the operation if it is still open.
 */
export async function finishSiteOp(q: Q, f: SiteOpFinish): Promise<SiteOpOutcome> {
  const run = async (trx: Knex.Transaction): Promise<SiteOpOutcome> => {
    await closeNodeOp(trx, f.opId, f.result);
    const site: (SiteRow & { org_path: string }) | undefined = await trx('panel_sites as s')
      .join('panel_orgs as o', 'o.id', 's.org_id')
      .where('s.id', f.siteId)
      .forUpdate('s')
      .first('s.*', 'o.path as org_path');
    if (!site) return { status: 'deleted', applied_generation: null };
    const latest = site.generation <= f.generation;
    const org = { id: site.org_id, path: site.org_path };
    if (f.kind === 'site.delete') {
      if (!latest) return { status: site.status, applied_generation: site.applied_generation };
      if (f.result.ok) {
        await trx('panel_sites').where({ id: site.id }).delete();
        await audit(trx, null, { org, action: 'site.deleted', target: { type: 'site', id: site.id }, before: { domain: site.domain, node: site.node_name, quota_mb: site.quota_mb } });
        return { status: 'deleted', applied_generation: null };
      }
      const [row] = await trx('panel_sites').where({ id: site.id }).update({ status: 'failed', deleting: false, error: `delete failed: ${f.result.error}`, updated_at: trx.fn.now() }).returning('*');
      await audit(trx, null, { org, action: 'site.failed', target: { type: 'site', id: site.id }, after: { operation: f.opId, kind: f.kind, error: row.error } });
      return { status: 'failed', applied_generation: row.applied_generation };
    }
    const changes: Record<string, unknown> = {};
    if (f.result.ok) {
      changes.applied_generation = Math.max(site.applied_generation, f.generation);
      if (latest && !site.deleting) Object.assign(changes, { status: site.suspended || site.org_suspended ? 'suspended' : 'active', error: null });
    } else if (latest && !site.deleting) Object.assign(changes, { status: 'failed', error: f.result.error });
    if (!Object.keys(changes).length) return { status: site.status, applied_generation: site.applied_generation };
    const [row]: SiteRow[] = await trx('panel_sites').where({ id: site.id }).update({ ...changes, updated_at: trx.fn.now() }).returning('*');
    if (row.status === 'failed' && site.status !== 'failed') {
      await audit(trx, null, { org, action: 'site.failed', target: { type: 'site', id: site.id }, after: { operation: f.opId, kind: f.kind, error: row.error, refused: !f.result.ok && f.result.refused } });
    }
    return { status: row.status, applied_generation: row.applied_generation };
  };
  // inside a transaction this is a savepoint, so the hosting node's apply records its outcome atomically with it
  return q.transaction(run);
}

/** The hosting node's apply of one operation, under the site's row lock (so applies of one site never interleave). */
export async function applyOnHosting(db: Db, op: { opId: string; generation: number }, apply: (op: NodeOperation) => Promise<OperationResult>): Promise<OperationResult> {
  const opId = op.opId;
  return db.transaction(async (trx) => {
    const row = await operationStatus(trx, opId);
    if (!row) throw new Error(`node operation ${opId} does not exist`);
    const done = resultOf(row);
    if (done) return done;
    const payload: NodeOperation = (await trx('panel_node_ops').where({ id: opId }).first('payload')).payload;
    if (payload.kind !== 'site.apply' && payload.kind !== 'site.delete') throw new Error(`node operation ${opId} is a ${payload.kind}, not a site operation`);
    const site: SiteRow | undefined = await trx('panel_sites').where({ id: row.siteId }).forUpdate().first();
    // The site is gone, or a newer generation was applied already: applying this one would undo that.
    const skip = !site ? { site_gone: true } : payload.kind === 'site.apply' && site.applied_generation > op.generation ? { superseded_by_generation: site.applied_generation } : null;
    if (skip) {
      const skipped: OperationResult = { ok: true, detail: skip };
      await closeNodeOp(trx, opId, skipped);
      return skipped;
    }
    const result = await apply(payload);
    await finishSiteOp(trx, { siteId: site!.id, opId, generation: op.generation, kind: payload.kind, result });
    return result;
  });
}
