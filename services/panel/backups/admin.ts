import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { notFound, PanelError } from '../../../domain/panel/errors';
import { HOSTING_NODE } from '../../../domain/panel/node-ops';
import { UnsafeArchive, type NodeBackups } from '../../../domain/panel/own-node';
import type { Db } from '../../../platform/db';
import type { InspectionInput } from '../../../domain/panel/workflows';
import type { Actor } from '../shared/actor';
import { audit } from '../shared/audit';
import { isUuid } from '../shared/chain';
import { signalRemoveInspection, startInspection as startInspectionWorkflow } from './client';
import { requirePlatform, type RestorePointRow } from './backups';
import type { SitesDeps } from '../sites/sites';

// Backups at platform level on the panel's own hosting node (spec 2 sections 4.1, 4.2, 4.4.5-4.4.6,
// 8): archives of deleted sites and their restore, extraction of a restore point for inspection
// (a root-only folder for 24 hours, never TLS private keys; a durable timer removes it, "Remove
// now" earlier), cleanup of leftovers and recovery metrics. All of it is the platform's own
// logins' work, and none of it covers sites on other nodes.

/** 24 hours (spec 8), shorter in tests. */
export const INSPECTION_MS = 24 * 3_600_000;

export interface BackupAdminDeps extends SitesDeps {
  /** the hosting node's backups while this process runs it, else null */
  hostingBackups: () => NodeBackups | null;
  /** whether the hosting node holds a site (it serves one the panel no longer holds after a restore) */
  hostingHasSite: (siteId: string) => Promise<boolean>;
  /** how long an inspection folder stays (default 24 h) */
  inspectionMs?: number;
}

function backupsOf(deps: BackupAdminDeps): NodeBackups {
  const b = deps.hostingBackups();
  if (!b) throw new PanelError('conflict', { detail: "this panel process does not run the hosting node, so its backups cannot be reached from here" });
  if (!b.backupDir) throw new PanelError('conflict', { node: HOSTING_NODE, detail: 'the hosting node keeps no backups (it runs without -backup-dir)' });
  return b;
}

const relative = (b: NodeBackups, file: string) => path.relative(b.backupDir!, file);

/** Archives of deleted sites on the panel's hosting node, newest first. */
export function listSiteArchives(deps: BackupAdminDeps, actor: Actor) {
  requirePlatform(actor, 'the list of deleted-site archives');
  const b = backupsOf(deps);
  return { archives: b.listSiteArchives().map((a) => ({ site_id: a.siteId, domain: a.domain, time: a.createdAt, file: relative(b, a.file), sha256: a.sha256, bytes: a.bytes })) };
}

/**
 * Restores a deleted site from its newest archive on the hosting node (spec 4.4.5): refused with
 * "site exists" while the panel holds a site with that id or domain (or the node still serves it);
 * the restored site serves again, but the panel holds no record of it, so it is listed under no
 * account and charges no quota. The archive's SHA-256 is verified before anything is extracted.
 */
export async function restoreDeletedSite(deps: BackupAdminDeps, actor: Actor, siteId: string) {
  requirePlatform(actor, 'restoring a deleted site');
  if (!isUuid(siteId)) throw notFound('site archive');
  const b = backupsOf(deps);
  const archive = b.listSiteArchives().find((a) => a.siteId === siteId);
  if (!archive) throw notFound('site archive');
  const held = await deps.db('panel_sites').where({ id: siteId }).orWhere({ domain: archive.domain }).first('id', 'domain');
  const domainHeld = held ?? (await deps.db('panel_domains').where({ domain: archive.domain }).first('site_id as id'));
  if (domainHeld || (await deps.hostingHasSite(siteId))) {
    throw new PanelError('conflict', { reason: 'site_exists', site_id: siteId, domain: archive.domain, detail: `site exists: the panel still holds a site with id ${siteId} or domain ${archive.domain}; it cannot be restored over` });
  }
  const restoreId = randomUUID();
  await deps.db('panel_restores').insert({ id: restoreId, kind: 'site_archive', site_id: siteId });
  let error: string | null = null;
  try {
    const { result } = await b.restoreSiteArchive(siteId);
    if (!result.ok) error = result.error;
  } catch (err) {
    error = (err as Error).message;
    await deps.db('panel_restores').where({ id: restoreId }).update({ status: 'failed', error, finished_at: deps.db.fn.now() });
    if (err instanceof UnsafeArchive) throw new PanelError('unsafe_archive', { detail: error });
    throw new PanelError('conflict', { detail: `the hosting node could not restore the site: ${error}` });
  }
  await deps.db('panel_restores').where({ id: restoreId }).update({ status: error ? 'failed' : 'done', error, finished_at: deps.db.fn.now() });
  await audit(deps.db, actor, { org: { id: actor.orgId, path: actor.orgPath }, action: 'site.restore_archive', target: { type: 'site', id: siteId }, after: { domain: archive.domain, archive: relative(b, archive.file), sha256: archive.sha256, error } });
  if (error) throw new PanelError('conflict', { detail: `the hosting node could not restore the site: ${error}` });
  return { site_id: siteId, domain: archive.domain, node: HOSTING_NODE, archive: { time: archive.createdAt, file: relative(b, archive.file), sha256: archive.sha256 }, held_by_panel: false };
}

// ---- inspection -----------------------------------------------------------------------------

export interface InspectionRow {
  id: string;
  restore_point_id: string;
  path: string | null;
  status: 'extracting' | 'ready' | 'removed' | 'failed';
  error: string | null;
  expires_at: Date;
  created_at: Date;
  removed_at: Date | null;
}

const inspectionView = (r: InspectionRow) => ({ id: r.id, restore_point_id: r.restore_point_id, path: r.path, status: r.status, error: r.error, expires_at: r.expires_at, created_at: r.created_at, removed_at: r.removed_at });

/** Extracts a restore point of a hosting-node site for inspection: 202 extracting; a workflow extracts it and removes it when its time is up. */
export async function startInspection(deps: BackupAdminDeps, actor: Actor, restorePointId: string) {
  requirePlatform(actor, 'backup inspection');
  if (!isUuid(restorePointId)) throw notFound('restore point');
  const ms = deps.inspectionMs ?? INSPECTION_MS;
  const row: InspectionRow = await deps.db.transaction(async (trx) => {
    const rp: RestorePointRow | undefined = await trx('panel_restore_points').where({ id: restorePointId }).forShare().first();
    if (!rp) throw notFound('restore point');
    if (rp.node_name !== HOSTING_NODE) throw new PanelError('conflict', { detail: `inspection is offered for sites on the panel's hosting node only; this restore point is on node ${rp.node_name}` });
    if (rp.status !== 'ready') throw new PanelError('conflict', { detail: `the restore point is ${rp.status}, not ready` });
    const [r] = await trx('panel_inspections').insert({ id: randomUUID(), restore_point_id: rp.id, expires_at: new Date(Date.now() + ms) }).returning('*');
    await audit(trx, actor, { org: { id: actor.orgId, path: actor.orgPath }, action: 'backup.inspect', target: { type: 'restore_point', id: rp.id }, after: { inspection: r.id, site_id: rp.site_id, domain: rp.domain, expires_at: r.expires_at } });
    return r;
  });
  const input: InspectionInput = { inspectionId: row.id, restorePointId, durationMs: ms };
  try {
    await startInspectionWorkflow(deps.temporal, deps.nodeOps.taskQueue, input, row.expires_at);
  } catch (err) {
    // nothing was extracted: the inspection fails now rather than stay `extracting`
    const error = `the inspection could not be started: ${(err as Error).message}`;
    await deps.db('panel_inspections').where({ id: row.id }).update({ status: 'failed', error });
    return inspectionView({ ...row, status: 'failed', error });
  }
  return inspectionView(row);
}

export async function getInspection(db: Db, actor: Actor, id: string) {
  requirePlatform(actor, 'backup inspection');
  if (!isUuid(id)) throw notFound('inspection');
  const row: InspectionRow | undefined = await db('panel_inspections').where({ id }).first();
  if (!row) throw notFound('inspection');
  return inspectionView(row);
}

/** how many inspections the list shows (they last a day each, so a handful is the usual count) */
const INSPECTIONS_LISTED = 200;

/** The inspections whose folders still exist or are being made (not removed), newest first, with their site. */
export async function listInspections(db: Db, actor: Actor) {
  requirePlatform(actor, 'backup inspection');
  const rows: Array<InspectionRow & { site_id: string | null; domain: string | null }> = await db('panel_inspections as i')
    .leftJoin('panel_restore_points as r', 'r.id', 'i.restore_point_id')
    .whereIn('i.status', ['extracting', 'ready'])
    .orderBy('i.created_at', 'desc')
    .limit(INSPECTIONS_LISTED)
    .select('i.*', 'r.site_id', 'r.domain');
  return { inspections: rows.map((r) => ({ ...inspectionView(r), site_id: r.site_id, domain: r.domain })) };
}

/** "Remove now": tells the inspection's workflow to remove the folder before its time is up. 202. */
export async function removeInspectionNow(deps: BackupAdminDeps, actor: Actor, id: string) {
  const row = await getInspection(deps.db, actor, id);
  if (row.status === 'removed') return row;
  await signalRemoveInspection(deps.temporal, id);
  await audit(deps.db, actor, { org: { id: actor.orgId, path: actor.orgPath }, action: 'backup.inspect_remove', target: { type: 'inspection', id } });
  return { ...row, status: 'removing' as const };
}

/** The inspection workflow's extraction: the folder on the hosting node, recorded on the row (ready or failed). */
export async function extractInspection(db: Db, backups: NodeBackups | null, inspectionId: string): Promise<{ ok: boolean; error?: string }> {
  const row: (InspectionRow & { site_id: string; sha256: string }) | undefined = await db('panel_inspections as i')
    .join('panel_restore_points as r', 'r.id', 'i.restore_point_id')
    .where('i.id', inspectionId)
    .first('i.*', 'r.site_id', 'r.sha256');
  if (!row || row.status !== 'extracting') return { ok: row?.status === 'ready' };
  if (!backups) throw new Error('this panel worker drives no hosting node');
  try {
    const info = await backups.inspect(row.site_id, row.restore_point_id, inspectionId, row.sha256);
    await db('panel_inspections').where({ id: inspectionId, status: 'extracting' }).update({ status: 'ready', path: info.path });
    return { ok: true };
  } catch (err) {
    const error = (err as Error).message;
    await db('panel_inspections').where({ id: inspectionId, status: 'extracting' }).update({ status: 'failed', error });
    return { ok: false, error };
  }
}

/** The inspection workflow's end: the folder goes (when its time is up, or at "Remove now"). */
export async function finishInspection(db: Db, backups: NodeBackups | null, inspectionId: string): Promise<void> {
  if (!backups) throw new Error('this panel worker drives no hosting node');
  backups.removeInspection(inspectionId);
  await db('panel_inspections').where({ id: inspectionId }).whereNot({ status: 'removed' }).update({ status: 'removed', removed_at: db.fn.now() });
}

// ---- cleanup and metrics ---------------------------------------------------------------------

/** Removes leftovers of the hosting node's backups (partial archives, orphaned temp files, inspection folders past their time) and says what went. */
export async function cleanupBackups(deps: BackupAdminDeps, actor: Actor) {
  requirePlatform(actor, 'backup cleanup');
  const b = backupsOf(deps);
  const live = new Set<string>(await deps.db('panel_inspections').whereIn('status', ['extracting', 'ready']).where('expires_at', '>', new Date()).pluck('id'));
  const { removed } = await b.cleanup((id) => !live.has(id));
  const expired = removed.filter((r) => r.kind === 'expired inspection folder').map((r) => path.basename(r.path));
  if (expired.length) await deps.db('panel_inspections').whereIn('id', expired.filter(isUuid)).whereNot({ status: 'removed' }).update({ status: 'removed', removed_at: deps.db.fn.now() });
  await audit(deps.db, actor, { org: { id: actor.orgId, path: actor.orgPath }, action: 'backup.cleanup', target: { type: 'node', id: HOSTING_NODE }, after: { removed: removed.length } });
  return { removed: removed.map((r) => ({ path: relative(b, r.path), kind: r.kind, bytes: r.bytes })), bytes_freed: removed.reduce((n, r) => n + r.bytes, 0) };
}

/** Recovery metrics of the hosting node: restore points (counts, sizes, last success and failure per site, newest age), archives, restores (durations). */
export async function backupMetrics(deps: BackupAdminDeps, actor: Actor) {
  requirePlatform(actor, 'recovery metrics');
  const b = backupsOf(deps);
  const node = { node_name: HOSTING_NODE };
  const counts: Array<{ status: string; n: number; bytes: string | null }> = await deps.db('panel_restore_points').where(node).groupBy('status').select('status', deps.db.raw('count(*)::int AS n'), deps.db.raw('sum(bytes)::bigint AS bytes'));
  const perSite: Array<{ site_id: string; domain: string; last_success: Date | null; last_failure: Date | null; ready: number; bytes: string | null }> = await deps.db('panel_restore_points')
    .where(node)
    .groupBy('site_id', 'domain')
    .orderBy('domain')
    .select(
      'site_id',
      'domain',
      deps.db.raw("max(finished_at) FILTER (WHERE status = 'ready') AS last_success"),
      deps.db.raw("max(finished_at) FILTER (WHERE status = 'failed') AS last_failure"),
      deps.db.raw("count(*) FILTER (WHERE status = 'ready')::int AS ready"),
      deps.db.raw("sum(bytes) FILTER (WHERE status = 'ready')::bigint AS bytes"),
    );
  const lastErrors: Array<{ site_id: string; error: string }> = await deps.db('panel_restore_points').where(node).where({ status: 'failed' }).distinctOn('site_id').orderBy([{ column: 'site_id' }, { column: 'finished_at', order: 'desc' }]).select('site_id', 'error');
  const newest = await deps.db('panel_restore_points').where(node).where({ status: 'ready' }).max('finished_at as at').first();
  const restores: Array<{ kind: string; status: string; ms: number }> = await deps.db('panel_restores')
    .whereNotNull('finished_at')
    .orderBy('started_at', 'desc')
    .limit(1000)
    .select('kind', 'status', deps.db.raw('(extract(epoch FROM finished_at - started_at) * 1000)::int AS ms'));
  const archives = b.listSiteArchives();
  const now = Date.now();
  const ages = (d: Date | null) => (d ? Math.round((now - new Date(d).getTime()) / 1000) : null);
  const durations = restores.filter((r) => r.status === 'done').map((r) => r.ms);
  return {
    node: HOSTING_NODE,
    restore_points: {
      by_status: Object.fromEntries(counts.map((c) => [c.status, { count: c.n, bytes: Number(c.bytes ?? 0) }])),
      newest_age_seconds: ages(newest?.at ?? null),
    },
    sites: perSite.map((s) => ({
      site_id: s.site_id,
      domain: s.domain,
      restore_points: s.ready,
      bytes: Number(s.bytes ?? 0),
      last_success: s.last_success,
      last_failure: s.last_failure,
      last_error: lastErrors.find((e) => e.site_id === s.site_id)?.error ?? null,
    })),
    site_archives: { count: archives.length, bytes: archives.reduce((n, a) => n + a.bytes, 0) },
    restores: {
      count: restores.length,
      failed: restores.filter((r) => r.status === 'failed').length,
      duration_ms: durations.length ? { last: durations[0], max: Math.max(...durations), mean: Math.round(durations.reduce((a, x) => a + x, 0) / durations.length) } : null,
    },
    offsite_copies: 'PLANNED',
  };
}
