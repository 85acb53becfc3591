import { randomBytes, randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { Knex } from 'knex';
import { invalid, notFound, PanelError } from '../../../domain/panel/errors';
import { isDbName, isDbUser } from '../../../domain/panel/node-config';
import { HOSTING_NODE, isNodeName, type DatabaseOpKind } from '../../../domain/panel/node-ops';
import { isBelow, rolePowers } from '../../../domain/panel/tree';
import type { Db } from '../../../platform/db';
import type { Logger } from '../../../platform/logger';
import type { Actor } from '../shared/actor';
import { audit } from '../shared/audit';
import { checkCounted, findInScope, isUuid, lockedChain } from '../shared/chain';
import { startDatabaseOp } from './client';
import type { NodeOpSettings } from '../sites/client';
import { getNode, nodeRefusal } from '../nodes/nodes';
import { operationStatus, queueOperation, type OperationStatus } from '../nodes/queue';
import { resultOf } from '../sites/outcomes';
import { finishDatabaseOp } from './outcomes';

// Customer databases (spec 2 sections 2.3, 2.6; PANEL.md section 2): a MariaDB database and its own
// user on a node with the `db` role, created under a customer account (a counted item, `databases`,
// checked and taken in one transaction that locks the account's path root first). The generated
// password is returned once and kept nowhere in clear: it travels to the node inside the queued
// operation, whose row loses it when the operation ends (services/panel/nodes/nodes.ts). Each change
// (create, delete, password reset) queues one node operation in the same transaction; after the
// commit its workflow (`database-op-<op_id>`) applies it and records the outcome (finishDatabaseOp),
// so a database ends active, failed or gone, never pending for good.
// Lock order: org rows along the path root first, then the database row, then its node operation.

type Q = Knex | Knex.Transaction;

export interface DatabaseRow {
  id: string;
  org_id: string;
  node_name: string;
  name: string;
  db_user: string;
  /** its user is locked: an org above is suspended */
  locked: boolean;
  status: 'pending' | 'active' | 'failed';
  deleting: boolean;
  error: string | null;
  last_op_id: string | null;
  created_at: Date;
  updated_at: Date;
}

export interface DatabasesDeps {
  db: Db;
  temporal: Client;
  nodeOps: NodeOpSettings;
  logger: Logger;
}


/** Names MariaDB keeps for itself, and accounts that administer a node: never a customer's. */
const RESERVED_NAMES = new Set(['mysql', 'information_schema', 'performance_schema', 'sys', 'test']);
const RESERVED_USERS = new Set(['root', 'mysql', 'admin', 'mariadb_sys', 'debian_sys_maint', 'public']);

export function databaseView(d: DatabaseRow) {
  return {
    id: d.id,
    org_id: d.org_id,
    node: d.node_name,
    name: d.name,
    user: d.db_user,
    status: d.status,
    locked: d.locked,
    deleting: d.deleting,
    error: d.error,
    operation_id: d.last_op_id,
    created_at: d.created_at,
    updated_at: d.updated_at,
  };
}

// ---- input ----------------------------------------------------------------------------------

export interface CreateDatabaseInput {
  name: string;
  /** the database's own MariaDB user; default the name (which then must fit a user name) */
  user?: string;
  node?: string;
}

function checkInput(input: CreateDatabaseInput) {
  const name = String(input.name ?? '').toLowerCase();
  if (!isDbName(name)) throw invalid('name', 'letters, digits and _, 1 to 64 characters');
  if (RESERVED_NAMES.has(name)) throw invalid('name', `"${name}" is reserved by MariaDB`);
  const user = String(input.user ?? name).toLowerCase();
  if (!isDbUser(user)) throw invalid('user', input.user === undefined ? 'the name is longer than 32 characters: give a user (letters, digits and _, 1 to 32)' : 'letters, digits and _, 1 to 32 characters');
  if (RESERVED_USERS.has(user)) throw invalid('user', `"${user}" is reserved`);
  if (input.node !== undefined && !isNodeName(input.node)) throw invalid('node', 'a node name');
  return { name, user, node: input.node };
}

/** A password of 32 URL-safe characters (192 bits): shown once, stored nowhere in clear. */
const newPassword = () => randomBytes(24).toString('base64url');

// ---- scope ----------------------------------------------------------------------------------

async function databaseInScope(q: Q, actor: Actor, id: string, lock = false): Promise<DatabaseRow & { org_path: string }> {
  if (!isUuid(id)) throw notFound('database');
  const query = q('panel_databases as d').join('panel_orgs as o', 'o.id', 'd.org_id').where('d.id', id).first('d.*', 'o.path as org_path');
  if (lock) query.forUpdate('d');
  const row = await query;
  if (!row || !(row.org_id === actor.orgId || isBelow(row.org_path, actor.orgPath))) throw notFound('database');
  return row;
}

/** The node a new database goes to: the named one (site.place, alive, not draining, db role), else the hosting node (db role). */
async function chooseNode(trx: Knex.Transaction, actor: Actor, named: string | undefined): Promise<string> {
  if (named !== undefined) {
    if (!rolePowers(actor.role, actor.orgType).includes('site.place')) throw new PanelError('power_missing', { power: 'site.place', holder: `login "${actor.username}" (${actor.role})` });
    const node = await getNode(trx, named);
    if (!node) throw invalid('node', `no node named "${named}"`);
    const why = nodeRefusal(node, { role: 'db' });
    if (why) throw new PanelError('conflict', { node: node.name, field: 'node', detail: `node "${node.name}" cannot take new databases: ${why}` });
    return node.name;
  }
  const hosting = await getNode(trx, HOSTING_NODE);
  if (!hosting) throw new PanelError('conflict', { node: HOSTING_NODE, detail: 'the panel has no hosting node set up, so no database can be created' });
  const why = nodeRefusal(hosting, { role: 'db' });
  if (why) throw new PanelError('conflict', { node: HOSTING_NODE, detail: `the hosting node cannot take new databases: ${why}${why.includes('db role') ? ' (MariaDB does not run there)' : ''}` });
  return HOSTING_NODE;
}

const nameTaken = (field: 'name' | 'user', value: string, node: string) =>
  new PanelError('conflict', { field, [field]: value, node, detail: `a database ${field === 'name' ? 'named' : 'user'} "${value}" exists already on node ${node}` });

/** The field of a unique violation of panel_databases (a concurrent create won), else null. */
function uniqueViolation(err: unknown): 'name' | 'user' | null {
  const e = err as { code?: string; constraint?: string };
  if (e?.code !== '23505') return null;
  if (e.constraint === 'panel_databases_node_name_unique') return 'name';
  if (e.constraint === 'panel_databases_node_user_unique') return 'user';
  return null;
}

/** Starts the workflow after the commit; if Temporal cannot take it, the database fails now rather than stay pending. */
export async function startOp(deps: DatabasesDeps, row: DatabaseRow, kind: DatabaseOpKind): Promise<DatabaseRow> {
  const opId = row.last_op_id!;
  try {
    await startDatabaseOp(deps.temporal, deps.nodeOps, { opId, node: row.node_name, databaseId: row.id, orgId: row.org_id, kind }, row.name);
    return row;
  } catch (err) {
    deps.logger.error({ err, database_id: row.id, op_id: opId }, 'the database operation could not be started');
    await finishDatabaseOp(deps.db, { databaseId: row.id, opId, kind, result: { ok: false, refused: false, error: `the operation could not be started: ${(err as Error).message}` } });
    return (await deps.db('panel_databases').where({ id: row.id }).first()) ?? row;
  }
}

// ---- the API's functions --------------------------------------------------------------------

/** Creates a database under a customer account in the actor's subtree: 201 pending with its password (shown once). */
export async function createDatabase(deps: DatabasesDeps, actor: Actor, orgId: string, input: CreateDatabaseInput) {
  const d = checkInput(input);
  const password = newPassword();
  const row = await deps.db.transaction(async (trx) => {
    const { org, chain } = await lockedChain(trx, actor, orgId);
    if (org.type !== 'customer') throw new PanelError('conflict', { detail: `databases belong to customer accounts only; ${org.type} "${org.name}" is not one` });
    const suspendedLevel = chain.find((l) => l.status === 'suspended');
    if (suspendedLevel) throw new PanelError('conflict', { detail: `${suspendedLevel.type} "${suspendedLevel.name}" is suspended: nothing new is created below it` });
    await checkCounted(trx, chain, 'databases', 1);
    const node = await chooseNode(trx, actor, d.node);
    const clash: DatabaseRow | undefined = await trx('panel_databases')
      .where({ node_name: node })
      .where((w) => w.where({ name: d.name }).orWhere({ db_user: d.user }))
      .first();
    if (clash) throw clash.name === d.name ? nameTaken('name', d.name, node) : nameTaken('user', d.user, node);
    const id = randomUUID();
    const opId = randomUUID();
    let created: DatabaseRow;
    try {
      // a savepoint, so a lost race ends as 409 rather than an aborted transaction
      [created] = await trx.transaction((sp) => sp('panel_databases').insert({ id, org_id: org.id, node_name: node, name: d.name, db_user: d.user, last_op_id: opId }).returning('*'));
    } catch (err) {
      const field = uniqueViolation(err);
      if (field) throw nameTaken(field, field === 'name' ? d.name : d.user, node);
      throw err;
    }
    await queueOperation(trx, node, { id: opId, kind: 'database.create', database: d.name, user: d.user, password });
    await audit(trx, actor, { org, action: 'database.create', target: { type: 'database', id }, after: databaseView(created) });
    return created;
  });
  return { ...databaseView(await startOp(deps, row, 'database.create')), password };
}

export async function getDatabase(db: Db, actor: Actor, id: string) {
  return databaseView(await databaseInScope(db, actor, id));
}

/** The databases of an org's subtree (itself included), by name. */
export async function listDatabases(db: Db, actor: Actor, orgId: string) {
  const org = await findInScope(db, actor, orgId);
  const rows: DatabaseRow[] = await db('panel_databases as d')
    .join('panel_orgs as o', 'o.id', 'd.org_id')
    .where('o.path', 'like', `${org.path}%`)
    .orderBy([{ column: 'd.name' }, { column: 'd.node_name' }])
    .select('d.*');
  return rows.map(databaseView);
}

/**
 * Deletes a database: the node drops it and its user, then the row goes (it counts until then).
 * 202 with status pending. A database whose create the node refused (nothing was made there) goes at once.
 */
export async function deleteDatabase(deps: DatabasesDeps, actor: Actor, id: string) {
  const out = await deps.db.transaction(async (trx) => {
    const row = await databaseInScope(trx, actor, id, true);
    const org = { id: row.org_id, path: row.org_path };
    if (row.deleting && row.status === 'pending') return { row, started: false };
    if (row.status === 'pending') throw new PanelError('conflict', { detail: `the database ${row.name} is still being created; delete it once it is active or failed` });
    const last = row.last_op_id ? await operationStatus(trx, row.last_op_id) : null;
    if (last && resetPending(last)) throw resetConflict(row);
    if (row.status === 'failed' && last?.kind === 'database.create' && last.result && !last.result.ok && last.result.refused) {
      await trx('panel_databases').where({ id: row.id }).delete();
      await audit(trx, actor, { org, action: 'database.delete', target: { type: 'database', id: row.id }, before: databaseView(row), after: { removed: 'the node had refused to create it' } });
      return { row: { ...row, deleting: true }, started: false, removed: true };
    }
    const opId = randomUUID();
    const [updated]: DatabaseRow[] = await trx('panel_databases')
      .where({ id: row.id })
      .update({ deleting: true, status: 'pending', error: null, last_op_id: opId, updated_at: trx.fn.now() })
      .returning('*');
    await queueOperation(trx, row.node_name, { id: opId, kind: 'database.delete', database: row.name, user: row.db_user });
    await audit(trx, actor, { org, action: 'database.delete', target: { type: 'database', id: row.id }, before: databaseView(row) });
    return { row: updated, started: true };
  });
  if (out.removed) return { ...databaseView(out.row), status: 'deleted' as const };
  return databaseView(out.started ? await startOp(deps, out.row, 'database.delete') : out.row);
}

/** Whether an operation is a password reset the node has not answered yet (the database stays active meanwhile). */
const resetPending = (op: OperationStatus): boolean => op.kind === 'database.password' && !resultOf(op);

const resetConflict = (row: DatabaseRow) =>
  new PanelError('conflict', { database: row.id, detail: `a password reset of the database ${row.name} is pending (operation ${row.last_op_id}); try again once it is done` });

/**
 * Gives a database's user a new password (a lost one, e.g. from an import whose result nobody saw):
 * 202 with the new password, shown once; the node applies it (`ALTER USER … IDENTIFIED BY`), the old
 * one stops working then. `confirm` must repeat the database id. Only an active database not being
 * deleted, one reset at a time; the database stays active meanwhile (backups and metering go on).
 */
export async function resetDatabasePassword(deps: DatabasesDeps, actor: Actor, id: string, confirm: string) {
  if (confirm !== id) throw invalid('confirm', 'the database id, to confirm that its current password stops working');
  const password = newPassword();
  const row = await deps.db.transaction(async (trx) => {
    const row = await databaseInScope(trx, actor, id, true);
    if (row.deleting || row.status !== 'active') throw new PanelError('conflict', { database: row.id, detail: `the database ${row.name} is ${row.deleting ? 'being deleted' : row.status}: only an active database gets a new password` });
    const last = row.last_op_id ? await operationStatus(trx, row.last_op_id) : null;
    if (last && resetPending(last)) throw resetConflict(row);
    const opId = randomUUID();
    const [updated]: DatabaseRow[] = await trx('panel_databases').where({ id: row.id }).update({ last_op_id: opId, error: null, updated_at: trx.fn.now() }).returning('*');
    await queueOperation(trx, row.node_name, { id: opId, kind: 'database.password', database: row.name, user: row.db_user, password });
    await audit(trx, actor, { org: { id: row.org_id, path: row.org_path }, action: 'database.password', target: { type: 'database', id: row.id }, after: { operation: opId, user: row.db_user } });
    return updated;
  });
  const started = await startOp(deps, row, 'database.password');
  // a reset whose workflow could not start is closed failed: its password would never work
  return { ...databaseView(started), ...(started.error ? {} : { password }) };
}

/**
 * Starts the workflow of every database operation pending for longer than `olderThanMs` (an API
 * process that died between its commit and the start leaves one behind); a workflow that exists
 * already is left alone. Returns the ids of the databases looked at.
 */
export async function resumePendingDatabaseOps(deps: DatabasesDeps, olderThanMs = 60_000, limit = 500): Promise<string[]> {
  const rows: Array<DatabaseRow & { op_kind: DatabaseOpKind }> = await deps.db('panel_databases as d')
    .join('panel_node_ops as o', 'o.id', 'd.last_op_id')
    .where((w) => w.where('d.status', 'pending').orWhere((r) => r.whereIn('o.kind', ['database.password', 'database.lock']).whereIn('o.status', ['queued', 'sent'])))
    .where('d.updated_at', '<', new Date(Date.now() - olderThanMs))
    .orderBy('d.updated_at')
    .limit(limit)
    .select('d.*', 'o.kind as op_kind');
  for (const row of rows) {
    try {
      await startDatabaseOp(deps.temporal, deps.nodeOps, { opId: row.last_op_id!, node: row.node_name, databaseId: row.id, orgId: row.org_id, kind: row.op_kind }, row.name);
    } catch (err) {
      deps.logger.warn({ err, database_id: row.id, op_id: row.last_op_id }, 'a pending database operation could not be resumed; retried at the next pass');
    }
  }
  return rows.map((r) => r.id);
}
