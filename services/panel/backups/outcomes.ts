import type { Knex } from 'knex';
import type { BackupOperation, NodeOperation, OperationResult } from '../../../domain/panel/node-ops';
import type { Db } from '../../../platform/db';
import { operationStatus, recordResult } from '../nodes/queue';
import { finishSiteOp, resultOf } from '../sites/outcomes';
import type { RestorePointRow } from './backups';

// The outcomes of backup operations (taken, deleted, restored), which the backup operation
// workflow's activities record (and the hosting node's apply): a repeated or late outcome changes
// nothing once the operation is closed, and a restore point is never left between states.

type Q = Knex | Knex.Transaction;

export interface BackupOpFinish {
  opId: string;
  kind: BackupOperation['kind'];
  restorePointId: string;
  siteId: string;
  result: OperationResult;
}

/**
 * Records a backup operation's outcome: backup.create ok ⇒ ready with the file, SHA-256 and size,
 * else failed; backup.delete ok ⇒ the row goes, else back to ready with the error; backup.restore
 * ⇒ the new site and its databases active or failed, and the restore's end for the metrics. Also
 * closes the operation if it is still open; a repeat changes nothing.
 */
export async function finishBackupOp(q: Q, f: BackupOpFinish): Promise<{ status: string }> {
  return q.transaction(async (trx) => {
    const op = await operationStatus(trx, f.opId);
    if (op && !resultOf(op)) await recordResult(trx, op.node, f.opId, f.result);
    const r = f.result;
    if (f.kind === 'backup.restore') {
      const restore = await trx('panel_restores').where({ site_id: f.siteId, kind: 'into_account' }).forUpdate().first();
      if (restore?.status === 'running') await trx('panel_restores').where({ id: restore.id }).update({ status: r.ok ? 'done' : 'failed', error: r.ok ? null : r.error, finished_at: trx.fn.now() });
      await trx('panel_databases').where({ last_op_id: f.opId, status: 'pending' }).update(r.ok ? { status: 'active', error: null, updated_at: trx.fn.now() } : { status: 'failed', error: r.error, updated_at: trx.fn.now() });
      // the restore built the site's first generation; a later change is its own operation
      const outcome = await finishSiteOp(trx, { siteId: f.siteId, opId: f.opId, generation: 1, kind: 'site.apply', result: r });
      return { status: outcome.status };
    }
    const rp: RestorePointRow | undefined = await trx('panel_restore_points').where({ id: f.restorePointId }).forUpdate().first();
    if (!rp || rp.op_id !== f.opId) return { status: rp?.status ?? 'deleted' };
    if (f.kind === 'backup.delete') {
      if (rp.status !== 'deleting') return { status: rp.status };
      if (r.ok) {
        await trx('panel_inspections').where({ restore_point_id: rp.id }).delete();
        await trx('panel_restore_points').where({ id: rp.id }).delete();
        return { status: 'deleted' };
      }
      await trx('panel_restore_points').where({ id: rp.id }).update({ status: 'ready', error: `delete failed: ${r.error}` });
      return { status: 'ready' };
    }
    if (rp.status !== 'pending') return { status: rp.status };
    if (r.ok) {
      const d = (r.detail ?? {}) as { file?: string; sha256?: string; bytes?: number };
      await trx('panel_restore_points').where({ id: rp.id }).update({ status: 'ready', file: d.file ?? null, sha256: d.sha256 ?? null, bytes: d.bytes ?? null, error: null, finished_at: trx.fn.now() });
      return { status: 'ready' };
    }
    await trx('panel_restore_points').where({ id: rp.id }).update({ status: 'failed', error: r.error, finished_at: trx.fn.now() });
    return { status: 'failed' };
  });
}

/** The hosting node's apply of one backup operation (a result recorded already is returned, not applied again). */
export async function applyBackupOnHosting(db: Db, opId: string, apply: (op: NodeOperation) => Promise<OperationResult>): Promise<OperationResult> {
  const op = await operationStatus(db, opId);
  if (!op) throw new Error(`node operation ${opId} does not exist`);
  const done = resultOf(op);
  if (done) return done;
  const payload: NodeOperation = (await db('panel_node_ops').where({ id: opId }).first('payload')).payload;
  if (!payload.kind.startsWith('backup.')) throw new Error(`node operation ${opId} is a ${payload.kind}, not a backup operation`);
  const result = await apply(payload);
  const still = await operationStatus(db, opId);
  if (still && !resultOf(still)) await recordResult(db, still.node, opId, result);
  return result;
}
