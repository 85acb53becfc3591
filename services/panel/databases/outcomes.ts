import type { Knex } from 'knex';
import type { DatabaseOpKind, NodeOperation, OperationResult } from '../../../domain/panel/node-ops';
import type { Db } from '../../../platform/db';
import { audit } from '../shared/audit';
import { operationStatus, recordResult } from '../nodes/queue';
import { resultOf } from '../sites/outcomes';
import type { DatabaseRow } from './databases';

// The outcomes of database operations, which the database operation workflow's activities record
// (and the hosting node's apply, under the database's row lock): a repeated or late outcome changes
// nothing once the operation is closed, and a database is never left between states.

type Q = Knex | Knex.Transaction;

export interface DatabaseOpFinish {
  databaseId: string;
  opId: string;
  kind: DatabaseOpKind;
  result: OperationResult;
}

export interface DatabaseOpOutcome {
  /** the database's status afterwards; `deleted` once its row is gone */
  status: DatabaseRow['status'] | 'deleted';
}

/** Records a result on an operation still queued or sent (its password leaves the row then). */
async function closeOp(q: Q, opId: string, result: OperationResult): Promise<void> {
  const op = await operationStatus(q, opId);
  if (op && !resultOf(op)) await recordResult(q, op.node, opId, result);
}

/**
 * Records an operation's outcome on its database; only the database's latest operation changes it,
 * and a repeat changes nothing: a create ok ⇒ active, failed ⇒ failed with the error; a delete ok ⇒
 * the row goes, failed ⇒ failed (no longer deleting). Also closes the operation if it is still open.
 */
export async function finishDatabaseOp(q: Q, f: DatabaseOpFinish): Promise<DatabaseOpOutcome> {
  return q.transaction(async (trx): Promise<DatabaseOpOutcome> => {
    await closeOp(trx, f.opId, f.result);
    const row: (DatabaseRow & { org_path: string }) | undefined = await trx('panel_databases as d')
      .join('panel_orgs as o', 'o.id', 'd.org_id')
      .where('d.id', f.databaseId)
      .forUpdate('d')
      .first('d.*', 'o.path as org_path');
    if (!row) return { status: 'deleted' };
    const org = { id: row.org_id, path: row.org_path };
    const target = { type: 'database', id: row.id };
    if (f.kind === 'database.password' || f.kind === 'database.lock') {
      if (row.last_op_id !== f.opId || f.result.ok) return { status: row.status };
      // the database stays active; the failure is noted on it once (a repeat changes nothing)
      const error = `${f.kind === 'database.lock' ? 'locking or unlocking its user' : 'password reset'} failed: ${f.result.error}`;
      const noted = await trx('panel_databases').where({ id: row.id }).whereRaw('error IS DISTINCT FROM ?', [error]).update({ error, updated_at: trx.fn.now() });
      if (noted) await audit(trx, null, { org, action: 'database.failed', target, after: { operation: f.opId, kind: f.kind, error, refused: f.result.refused } });
      return { status: row.status };
    }
    if (row.last_op_id !== f.opId || row.status !== 'pending') return { status: row.status };
    if (f.kind === 'database.delete' && f.result.ok) {
      await trx('panel_databases').where({ id: row.id }).delete();
      await audit(trx, null, { org, action: 'database.deleted', target, before: { name: row.name, user: row.db_user, node: row.node_name } });
      return { status: 'deleted' };
    }
    if (f.result.ok) {
      await trx('panel_databases').where({ id: row.id }).update({ status: 'active', error: null, updated_at: trx.fn.now() });
      return { status: 'active' };
    }
    const error = f.kind === 'database.delete' ? `delete failed: ${f.result.error}` : f.result.error;
    await trx('panel_databases').where({ id: row.id }).update({ status: 'failed', deleting: false, error, updated_at: trx.fn.now() });
    await audit(trx, null, { org, action: 'database.failed', target, after: { operation: f.opId, kind: f.kind, error, refused: f.result.refused } });
    return { status: 'failed' };
  });
}

/**
 * The hosting node's apply of one database operation, under the database's row lock, recording the
 * outcome in the same transaction. The password is read from the queued operation here and never
 * leaves this function: an error that quotes it is redacted before it is recorded anywhere.
 */
export async function applyDatabaseOnHosting(db: Db, opId: string, apply: (op: NodeOperation) => Promise<OperationResult>): Promise<OperationResult> {
  return db.transaction(async (trx) => {
    const op = await operationStatus(trx, opId);
    if (!op) throw new Error(`node operation ${opId} does not exist`);
    const done = resultOf(op);
    if (done) return done;
    const payload: NodeOperation = (await trx('panel_node_ops').where({ id: opId }).first('payload')).payload;
    if (payload.kind !== 'database.create' && payload.kind !== 'database.delete' && payload.kind !== 'database.password' && payload.kind !== 'database.lock') throw new Error(`node operation ${opId} is a ${payload.kind}, not a database operation`);
    const row: DatabaseRow | undefined = await trx('panel_databases').where({ last_op_id: opId }).forUpdate().first();
    if (!row) {
      // the database is gone or has moved on to another operation: applying this one would undo that
      const skipped: OperationResult = { ok: true, detail: { superseded: true } };
      await closeOp(trx, opId, skipped);
      return skipped;
    }
    let result = await apply(payload);
    if (!result.ok && 'password' in payload && result.error.includes(payload.password)) {
      result = { ...result, error: result.error.split(payload.password).join('[password]') };
    }
    await finishDatabaseOp(trx, { databaseId: row.id, opId, kind: payload.kind, result });
    return result;
  });
}
