import type { Knex } from 'knex';
import type { DatabaseFinding } from '../../../domain/panel/reconcile';
import { HOSTING_NODE } from '../../../domain/panel/node-ops';
import type { Db } from '../../../platform/db';
import type { Actor } from '../shared/actor';
import { notFound } from '../../../domain/panel/errors';

// The customer databases of the hosting node in a reconciliation pass (issue 32 item 3): the only
// writer of panel_reconcile_databases. A database with an operation in flight (creation, deletion,
// password reset, lock) is `pending`, not judged. Each pass replaces a database's row: what it
// found, what remediation did, and the status after it.

export type DatabaseVerdict = 'in_sync' | 'missing' | 'pending';

export interface PassDatabase {
  id: string;
  name: string;
  db_user: string;
  locked: boolean;
  /** an operation of the database is in flight: it is not judged */
  busy: boolean;
}

export interface DatabaseResult {
  databaseId: string;
  found: DatabaseVerdict;
  findings: DatabaseFinding[];
  remediation: { ok: boolean; error?: string; detail?: Record<string, unknown> } | null;
}

/** The hosting node's databases, each with whether an operation of it is in flight. */
export async function hostingDatabases(db: Db): Promise<PassDatabase[]> {
  const rows: Array<Omit<PassDatabase, 'busy'> & { status: string; deleting: boolean; op_status: string | null }> = await db('panel_databases as d')
    .leftJoin('panel_node_ops as o', 'o.id', 'd.last_op_id')
    .where('d.node_name', HOSTING_NODE)
    .orderBy('d.id')
    .select('d.id', 'd.name', 'd.db_user', 'd.locked', 'd.status', 'd.deleting', 'o.status as op_status');
  return rows.map((r) => ({ id: r.id, name: r.name, db_user: r.db_user, locked: r.locked, busy: r.status !== 'active' || r.deleting || r.op_status === 'queued' || r.op_status === 'sent' }));
}

const statusAfter = (r: DatabaseResult): DatabaseVerdict => (r.remediation?.ok ? 'in_sync' : r.found);

/** What pass `passId` recorded already (a retried activity: a recreation begun keeps the verdict found before it). */
export async function recordedInPass(db: Db, passId: string): Promise<Map<string, DatabaseResult>> {
  const rows: Array<{ database_id: string; found: DatabaseVerdict; findings: DatabaseFinding[]; remediation: DatabaseResult['remediation'] }> = await db('panel_reconcile_databases').where({ last_pass_id: passId }).select('database_id', 'found', 'findings', 'remediation');
  return new Map(rows.map((r) => [r.database_id, { databaseId: r.database_id, found: r.found, findings: r.findings, remediation: r.remediation }]));
}

/** Replaces the rows of the databases checked by pass `passId` (a database deleted meanwhile gets none). */
export async function recordDatabaseResults(db: Db, passId: string, rows: DatabaseResult[]): Promise<void> {
  if (!rows.length) return;
  const live = new Set<string>((await db('panel_databases').whereIn('id', rows.map((r) => r.databaseId)).select('id')).map((r: { id: string }) => r.id));
  const kept = rows.filter((r) => live.has(r.databaseId));
  if (!kept.length) return;
  await db('panel_reconcile_databases')
    .insert(kept.map((r) => ({ database_id: r.databaseId, found: r.found, status: statusAfter(r), findings: JSON.stringify(r.findings), remediation: r.remediation ? JSON.stringify(r.remediation) : null, last_pass_id: passId, checked_at: db.fn.now() })))
    .onConflict('database_id')
    .merge(['found', 'status', 'findings', 'remediation', 'last_pass_id', 'checked_at']);
}

/** A pass's database figures for its counts: found missing, recreated. */
export async function databaseCounts(q: Knex | Knex.Transaction, passId: string): Promise<{ database_in_sync: number; database_missing: number; databases_recreated: number }> {
  const [r] = await q('panel_reconcile_databases')
    .where({ last_pass_id: passId })
    .select(
      q.raw(`count(*) FILTER (WHERE found = 'in_sync') AS in_sync`),
      q.raw(`count(*) FILTER (WHERE found = 'missing') AS missing`),
      q.raw(`count(*) FILTER (WHERE (remediation->>'ok')::boolean) AS recreated`),
    );
  return { database_in_sync: Number(r.in_sync), database_missing: Number(r.missing), databases_recreated: Number(r.recreated) };
}

const LISTED = 500;

/** `GET /v1/reconcile/databases`: the hosting node's databases with their latest verdict, missing first (at most 500). */
export async function listReconcileDatabases(db: Db, actor: Actor) {
  if (actor.orgType !== 'platform') throw notFound('reconciliation');
  const rows = await db('panel_databases as d')
    .leftJoin('panel_reconcile_databases as r', 'r.database_id', 'd.id')
    .where('d.node_name', HOSTING_NODE)
    .orderByRaw(`CASE r.status WHEN 'missing' THEN 0 WHEN 'pending' THEN 1 ELSE 2 END, d.name`)
    .limit(LISTED)
    .select('d.id', 'd.name', 'd.db_user', 'd.org_id', 'r.status', 'r.found', 'r.findings', 'r.remediation', 'r.last_pass_id', 'r.checked_at');
  return {
    databases: rows.map((r) => ({
      database_id: r.id,
      name: r.name,
      user: r.db_user,
      org_id: r.org_id,
      status: r.status ?? 'not_checked',
      found: r.found ?? null,
      findings: r.findings ?? [],
      remediation: r.remediation ?? null,
      last_pass_id: r.last_pass_id ?? null,
      checked_at: r.checked_at ?? null,
    })),
  };
}
