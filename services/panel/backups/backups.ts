import { randomBytes, randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { invalid, notFound, PanelError } from '../../../domain/panel/errors';
import { isDbName, isDbUser } from '../../../domain/panel/node-config';
import type { BackupOperation } from '../../../domain/panel/node-ops';
import type { Db } from '../../../platform/db';
import type { Actor } from '../shared/actor';
import { audit } from '../shared/audit';
import { isBelow } from '../../../domain/panel/tree';
import { checkCounted, isUuid } from '../shared/chain';
import { backupScheduleId } from '../../../domain/panel/workflows';
import { backupScheduleNextRuns, deleteBackupScheduleOf, ensureBackupSchedule, startBackupOp } from './client';
import type { BackupOpInput } from '../../../domain/panel/workflows';
import { getNode } from '../nodes/nodes';
import { queueOperation } from '../nodes/queue';
import { insertSite, operatorPhp, siteInScope, siteView, specOf, type OperatorPhp, type SiteRow, type SitesDeps } from '../sites/sites';
import { finishBackupOp } from './outcomes';

// Backups of sites (spec 2 sections 2.6, 4.1, 4.2 "Backups at platform level", 4.4.5-4.4.6, 7, 8):
// restore points are taken on the site's own node (`-backup-dir`; a node without it refuses) as a
// node operation (`node-op-<op_id>`, backup.create) whose outcome makes the row `ready` with the
// archive's file and SHA-256, or `failed`. Only `ready` restore points are listed, so a backup cut
// short by a kill never shows. A restore point is restored into another account as a new site of
// that account (every quota and the domain-unused rule checked as for any new site) on the same
// node, with new databases (counted) loaded from its dumps. Off-site copies are PLANNED.
// The databases of a site are those of its account on its node (databases belong to accounts).

type Q = Knex | Knex.Transaction;

const inScope = (actor: Actor, r: { org_id: string; org_path: string }) => r.org_id === actor.orgId || isBelow(r.org_path, actor.orgPath);

export const OFFSITE_COPIES = 'PLANNED: restore points sit on the same node as the site; off-site copies are not built yet';

export interface RestorePointRow {
  id: string;
  site_id: string;
  org_id: string;
  node_name: string;
  domain: string;
  trigger: 'manual' | 'scheduled';
  status: 'pending' | 'ready' | 'failed' | 'deleting';
  databases: string[];
  file: string | null;
  sha256: string | null;
  bytes: string | null;
  error: string | null;
  op_id: string | null;
  /** the site's operator PHP settings when the restore point was taken (null on older ones) */
  php_settings: OperatorPhp | null;
  created_at: Date;
  finished_at: Date | null;
}

export function restorePointView(r: RestorePointRow) {
  return {
    id: r.id,
    site_id: r.site_id,
    org_id: r.org_id,
    node: r.node_name,
    domain: r.domain,
    trigger: r.trigger,
    status: r.status,
    databases: r.databases,
    file: r.file,
    sha256: r.sha256,
    bytes: r.bytes === null ? null : Number(r.bytes),
    error: r.error,
    operation_id: r.op_id,
    created_at: r.created_at,
    finished_at: r.finished_at,
    offsite_copies: OFFSITE_COPIES,
  };
}

/** Backups at platform level (restore into another account, inspection, archives, cleanup, metrics) are the platform's own logins' work. */
export function requirePlatform(actor: Actor, what: string): void {
  if (actor.orgType !== 'platform') throw new PanelError('forbidden', { detail: `${what} belongs to the platform's own logins` });
}

/** The active databases of a site's account on the site's node: what its restore points dump. */
async function siteDatabases(q: Q, site: Pick<SiteRow, 'org_id' | 'node_name'>): Promise<string[]> {
  return q('panel_databases').where({ org_id: site.org_id, node_name: site.node_name, status: 'active', deleting: false }).orderBy('name').pluck('name');
}

/** Refuses a backup of a site whose node keeps none (spec 7: "a backup on a node without -backup-dir is refused"). */
async function requireBackupNode(q: Q, node: string): Promise<void> {
  const n = await getNode(q, node);
  if (!n?.facts || (n.facts as { backups?: boolean }).backups !== true) {
    throw new PanelError('conflict', { node, detail: `node ${node} keeps no backups (it runs without -backup-dir): backups of its sites are refused` });
  }
}

async function restorePointInScope(q: Q, actor: Actor, id: string, lock = false): Promise<RestorePointRow & { org_path: string }> {
  if (!isUuid(id)) throw notFound('restore point');
  const query = q('panel_restore_points as r').join('panel_orgs as o', 'o.id', 'r.org_id').where('r.id', id).first('r.*', 'o.path as org_path');
  if (lock) query.forUpdate('r');
  const row = await query;
  if (!row || !inScope(actor, row)) throw notFound('restore point');
  return row;
}

/** Starts the operation's workflow after the commit; if Temporal cannot take it, the operation fails now. */
async function startOp(deps: SitesDeps, op: { opId: string; node: string; siteId: string; orgId: string; kind: BackupOperation['kind']; restorePointId: string; domain: string }): Promise<void> {
  try {
    await startBackupOp(deps.temporal, deps.nodeOps, op);
  } catch (err) {
    deps.logger.error({ err, op_id: op.opId }, 'the backup operation could not be started');
    await finishBackupOp(deps.db, { ...op, result: { ok: false, refused: false, error: `the operation could not be started: ${(err as Error).message}` } });
  }
}

/** Queues a backup of a site in `trx`: a pending restore point and its backup.create operation. */
export async function queueBackup(trx: Knex.Transaction, site: SiteRow, trigger: RestorePointRow['trigger']): Promise<RestorePointRow> {
  if (site.deleting) throw new PanelError('conflict', { detail: `the website ${site.domain} is being deleted` });
  if (site.status !== 'active' && site.status !== 'suspended') throw new PanelError('conflict', { detail: `the website ${site.domain} is ${site.status}: only a site its node serves is backed up` });
  await requireBackupNode(trx, site.node_name);
  const databases = await siteDatabases(trx, site);
  const id = randomUUID();
  const opId = randomUUID();
  const [row]: RestorePointRow[] = await trx('panel_restore_points')
    .insert({ id, site_id: site.id, org_id: site.org_id, node_name: site.node_name, domain: site.domain, trigger, databases, op_id: opId, php_settings: JSON.stringify(operatorPhp(site)) })
    .returning('*');
  await queueOperation(trx, site.node_name, { id: opId, kind: 'backup.create', backupId: id, siteId: site.id, databases });
  return row;
}

const opStart = (r: RestorePointRow, kind: BackupOperation['kind'], opId = r.op_id!) => ({ opId, node: r.node_name, siteId: r.site_id, orgId: r.org_id, kind, restorePointId: r.id, domain: r.domain });

/** Takes a restore point of a site now: 202 pending; ready once its node wrote the archive. */
export async function createRestorePoint(deps: SitesDeps, actor: Actor, siteId: string) {
  const row = await deps.db.transaction(async (trx) => {
    const site = await siteInScope(trx, actor, siteId, true);
    const rp = await queueBackup(trx, site, 'manual');
    await audit(trx, actor, { org: { id: site.org_id, path: site.org_path }, action: 'backup.create', target: { type: 'restore_point', id: rp.id }, after: { site_id: site.id, domain: site.domain, node: site.node_name } });
    return rp;
  });
  await startOp(deps, opStart(row, 'backup.create'));
  return restorePointView((await deps.db('panel_restore_points').where({ id: row.id }).first()) ?? row);
}

/** The restore points of a site (ready ones, newest first; `all`: pending and failed ones too). */
export async function listRestorePoints(db: Db, actor: Actor, siteId: string, all = false) {
  if (!isUuid(siteId)) throw notFound('site');
  // a deleted site's restore points stay listed for whoever holds its account
  const q = db('panel_restore_points as r').join('panel_orgs as o', 'o.id', 'r.org_id').where('r.site_id', siteId).orderBy('r.created_at', 'desc').select('r.*', 'o.path as org_path');
  if (!all) q.where('r.status', 'ready');
  const rows: Array<RestorePointRow & { org_path: string }> = await q;
  const visible = rows.filter((r) => inScope(actor, r));
  if (!visible.length) await siteInScope(db, actor, siteId);
  return { restore_points: visible.map(restorePointView), offsite_copies: OFFSITE_COPIES };
}

export async function getRestorePoint(db: Db, actor: Actor, id: string) {
  return restorePointView(await restorePointInScope(db, actor, id));
}

/** Queues the removal of a restore point's archive on its node; the row goes once the node removed it. */
async function queueDelete(trx: Knex.Transaction, rp: RestorePointRow): Promise<RestorePointRow> {
  const opId = randomUUID();
  const [row]: RestorePointRow[] = await trx('panel_restore_points').where({ id: rp.id }).update({ status: 'deleting', op_id: opId }).returning('*');
  await queueOperation(trx, rp.node_name, { id: opId, kind: 'backup.delete', backupId: rp.id, siteId: rp.site_id });
  return row;
}

/** Deletes a restore point: its node removes the archive, then the row goes. 202. */
export async function deleteRestorePoint(deps: SitesDeps, actor: Actor, id: string) {
  const out = await deps.db.transaction(async (trx) => {
    const rp = await restorePointInScope(trx, actor, id, true);
    if (rp.status === 'deleting') return { rp, started: false };
    if (rp.status === 'pending') throw new PanelError('conflict', { detail: 'the restore point is still being written' });
    const open = await trx('panel_inspections').where({ restore_point_id: rp.id }).whereIn('status', ['extracting', 'ready']).first('id');
    if (open) throw new PanelError('conflict', { detail: `the restore point is extracted for inspection (${open.id}): remove that first` });
    const row = await queueDelete(trx, rp);
    await audit(trx, actor, { org: { id: rp.org_id, path: rp.org_path }, action: 'backup.delete', target: { type: 'restore_point', id: rp.id }, before: restorePointView(rp) });
    return { rp: row, started: true };
  });
  if (out.started) await startOp(deps, opStart(out.rp, 'backup.delete'));
  return restorePointView(out.rp);
}

// ---- schedules ------------------------------------------------------------------------------

export interface BackupScheduleInput {
  every: 'hourly' | 'daily';
  /** how many restore points of the schedule's making are kept (the oldest go) */
  keep: number;
}

export interface BackupScheduleRow {
  site_id: string;
  every: BackupScheduleInput['every'];
  keep: number;
  created_at: Date;
  updated_at: Date;
}

const scheduleView = (r: BackupScheduleRow, next: Date[] = []) => ({ site_id: r.site_id, every: r.every, keep: r.keep, next_runs: next, schedule_id: backupScheduleId(r.site_id), offsite_copies: OFFSITE_COPIES });

/**
 * Sets a site's backup schedule (daily or hourly, keep the newest N) as a Temporal schedule in the
 * panel's scheduler; each due backup is an operation for the site's node. A node without
 * -backup-dir is refused here already.
 */
export async function setBackupSchedule(deps: SitesDeps, actor: Actor, siteId: string, input: BackupScheduleInput) {
  if (!Number.isInteger(input.keep) || input.keep < 1 || input.keep > 1000) throw invalid('keep', 'a whole number from 1 to 1000');
  const row: BackupScheduleRow = await deps.db.transaction(async (trx) => {
    const site = await siteInScope(trx, actor, siteId, true);
    await requireBackupNode(trx, site.node_name);
    const [r] = await trx('panel_backup_schedules')
      .insert({ site_id: site.id, every: input.every, keep: input.keep })
      .onConflict('site_id')
      .merge({ every: input.every, keep: input.keep, updated_at: trx.fn.now() })
      .returning('*');
    await audit(trx, actor, { org: { id: site.org_id, path: site.org_path }, action: 'backup.schedule', target: { type: 'site', id: site.id }, after: { every: input.every, keep: input.keep } });
    return r;
  });
  return scheduleView(row, await ensureBackupSchedule(deps.temporal, deps.nodeOps, siteId, row));
}

export async function getBackupSchedule(deps: SitesDeps, actor: Actor, siteId: string) {
  const site = await siteInScope(deps.db, actor, siteId);
  const row: BackupScheduleRow | undefined = await deps.db('panel_backup_schedules').where({ site_id: site.id }).first();
  if (!row) throw notFound('backup schedule');
  return scheduleView(row, await backupScheduleNextRuns(deps.temporal, site.id));
}

export async function deleteBackupSchedule(deps: SitesDeps, actor: Actor, siteId: string): Promise<void> {
  const site = await siteInScope(deps.db, actor, siteId);
  const n = await deps.db('panel_backup_schedules').where({ site_id: site.id }).delete();
  if (!n) throw notFound('backup schedule');
  await deleteBackupScheduleOf(deps.temporal, site.id);
  await audit(deps.db, actor, { org: { id: site.org_id, path: site.org_path }, action: 'backup.unschedule', target: { type: 'site', id: site.id } });
}

type QueuedOp = Omit<BackupOpInput, 'timeoutMs' | 'pollMs'>;

/** A due scheduled backup of a site: queued like a manual one, or why it is skipped (gone, not served, no backups on its node). */
export async function queueScheduledBackup(db: Db, siteId: string): Promise<QueuedOp | { skipped: string }> {
  try {
    const rp = await db.transaction(async (trx) => {
      const site: SiteRow | undefined = await trx('panel_sites').where({ id: siteId }).forUpdate().first();
      if (!site) throw new PanelError('not_found', { what: 'site' });
      return queueBackup(trx, site, 'scheduled');
    });
    const { domain: _domain, ...op } = opStart(rp, 'backup.create');
    return op;
  } catch (err) {
    if (err instanceof PanelError) return { skipped: err.message };
    throw err;
  }
}

/** Queues the deletion of the site's scheduled restore points beyond the newest `keep` (manual ones are never pruned). */
export async function pruneRestorePoints(db: Db, siteId: string, keep: number): Promise<QueuedOp[]> {
  return db.transaction(async (trx) => {
    const stale: RestorePointRow[] = await trx('panel_restore_points').where({ site_id: siteId, trigger: 'scheduled', status: 'ready' }).orderBy('created_at', 'desc').offset(keep).forUpdate();
    const out: QueuedOp[] = [];
    for (const rp of stale) {
      const row = await queueDelete(trx, rp);
      const { domain: _domain, ...op } = opStart(row, 'backup.delete');
      out.push(op);
    }
    return out;
  });
}

// ---- restore into another account ----------------------------------------------------------

export interface RestoreIntoInput {
  into_account: string;
  /** the new site's domain; default the restore point's (only while no site uses it) */
  domain?: string;
  quota_mb?: number;
  /** new names of the restored databases by their old names; default `<old>_r<4 hex>` */
  databases?: Record<string, string>;
}

const newPassword = () => randomBytes(24).toString('base64url');

/**
 * Restores a restore point into a customer account (platform level): a new site of that account on
 * the restore point's node, checked like any new site, and a new database (with its own user and
 * password, shown once) per dumped database, counted against the account's databases limit. 202
 * pending; the node verifies the SHA-256 before it extracts anything.
 */
export async function restoreIntoAccount(deps: SitesDeps, actor: Actor, restorePointId: string, input: RestoreIntoInput) {
  requirePlatform(actor, 'restoring a restore point into another account');
  const suffix = randomBytes(2).toString('hex');
  const out = await deps.db.transaction(async (trx) => {
    const rp = await restorePointInScope(trx, actor, restorePointId);
    if (rp.status !== 'ready') throw new PanelError('conflict', { detail: `the restore point is ${rp.status}, not ready` });
    const source: SiteRow | undefined = await trx('panel_sites').where({ id: rp.site_id }).first();
    const mapping = rp.databases.map((from) => {
      const name = (input.databases?.[from] ?? `${from.slice(0, 58)}_r${suffix}`).toLowerCase();
      if (!isDbName(name)) throw invalid(`databases.${from}`, 'letters, digits and _, 1 to 64 characters');
      // a user name is at most 32 characters: a longer name keeps the restore's suffix in its user
      return { from, name, user: name.length <= 32 ? name : `${name.slice(0, 27)}_${suffix}`, password: newPassword() };
    });
    for (const key of ['name', 'user'] as const) {
      const values = mapping.map((d) => d[key]);
      const twice = values.find((v, i) => values.indexOf(v) !== i);
      if (twice) throw invalid('databases', `two restored databases would get the ${key} "${twice}": give them shorter, distinct names`);
    }
    for (const k of Object.keys(input.databases ?? {})) if (!rp.databases.includes(k)) throw invalid(`databases.${k}`, 'the restore point holds no such database');
    for (const d of mapping) if (!isDbUser(d.user)) throw invalid(`databases.${d.from}`, 'not a database user name');
    const restoreId = randomUUID();
    const { row, chain } = await insertSite(
      trx,
      deps,
      actor,
      input.into_account,
      {
        domain: input.domain ?? rp.domain,
        aliases: [],
        php_version: source?.php_version ?? null,
        cron: source?.cron ?? [],
        quota_mb: input.quota_mb ?? source?.quota_mb,
      },
      {
        placement: { mode: 'named', node: rp.node_name, reason: `restored from restore point ${rp.id} of ${rp.domain}, on the node that holds it`, decided_at: new Date().toISOString(), decided_by: actor.username },
        // the operator's PHP settings go with the restore (only the platform's logins restore into an account, and they hold php.admin)
        php: rp.php_settings ?? (source ? operatorPhp(source) : undefined),
        action: 'site.restore',
        operation: (site) => ({ id: site.last_op_id!, kind: 'backup.restore', backupId: rp.id, fromSiteId: rp.site_id, sha256: rp.sha256!, site: specOf(site), databases: mapping }),
      },
    );
    await checkCounted(trx, chain, 'databases', mapping.length);
    for (const d of mapping) {
      const clash = await trx('panel_databases').where({ node_name: rp.node_name }).where((w) => w.where({ name: d.name }).orWhere({ db_user: d.user })).first('name');
      if (clash) throw new PanelError('conflict', { field: `databases.${d.from}`, detail: `a database named "${d.name}" (or its user) exists already on node ${rp.node_name}` });
    }
    const dbRows = mapping.map((d) => ({ id: randomUUID(), org_id: row.org_id, node_name: rp.node_name, name: d.name, db_user: d.user, last_op_id: row.last_op_id }));
    if (dbRows.length) await trx('panel_databases').insert(dbRows);
    await trx('panel_restores').insert({ id: restoreId, kind: 'into_account', restore_point_id: rp.id, site_id: row.id, org_id: row.org_id });
    return { row, rp, mapping, dbRows };
  });
  const site = out.row;
  await startOp(deps, { opId: site.last_op_id!, node: site.node_name, siteId: site.id, orgId: site.org_id, kind: 'backup.restore', restorePointId: out.rp.id, domain: site.domain });
  const now: SiteRow = (await deps.db('panel_sites').where({ id: site.id }).first()) ?? site;
  return {
    site: siteView(now),
    databases: out.mapping.map((d, i) => ({ id: out.dbRows[i].id, from: d.from, name: d.name, user: d.user, password: d.password })),
  };
}

/**
 * Starts the workflow of every backup operation pending for longer than `olderThanMs` (an API
 * process that died between its commit and the start leaves one behind): restore points being
 * written or deleted, and sites being restored; a workflow that exists already is left alone.
 * Returns the operation ids looked at.
 */
export async function resumePendingBackupOps(deps: Pick<SitesDeps, 'db' | 'temporal' | 'nodeOps' | 'logger'>, olderThanMs = 60_000, limit = 500): Promise<string[]> {
  const before = new Date(Date.now() - olderThanMs);
  const points: RestorePointRow[] = await deps.db('panel_restore_points').whereIn('status', ['pending', 'deleting']).where('created_at', '<', before).orderBy('created_at').limit(limit);
  const restores: SiteRow[] = await deps.db('panel_sites as s')
    .join('panel_node_ops as o', 'o.id', 's.last_op_id')
    .where({ 's.status': 'pending', 'o.kind': 'backup.restore' })
    .where('s.updated_at', '<', before)
    .limit(limit)
    .select('s.*', 'o.payload');
  const starts = [
    ...points.map((rp) => opStart(rp, rp.status === 'pending' ? 'backup.create' : 'backup.delete')),
    ...restores.map((site) => ({ opId: site.last_op_id!, node: site.node_name, siteId: site.id, orgId: site.org_id, kind: 'backup.restore' as const, restorePointId: (site as SiteRow & { payload: { backupId: string } }).payload.backupId, domain: site.domain })),
  ];
  for (const s of starts) {
    try {
      await startBackupOp(deps.temporal, deps.nodeOps, s);
    } catch (err) {
      deps.logger.warn({ err, op_id: s.opId }, 'a pending backup operation could not be resumed; retried at the next pass');
    }
  }
  return starts.map((s) => s.opId);
}
