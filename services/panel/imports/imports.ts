import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Client } from '@temporalio/client';
import { notFound, PanelError } from '../../../domain/panel/errors';
import type { ImportLimits } from '../../../domain/panel/import-archive';
import { isBelow, rolePowers } from '../../../domain/panel/tree';
import type { Db } from '../../../platform/db';
import type { Logger } from '../../../platform/logger';
import type { Actor } from '../shared/actor';
import { audit } from '../shared/audit';
import { findInScope, isUuid } from '../shared/chain';
import type { NodeOpSettings } from '../sites/client';
import { startImport } from './client';
import { DEFAULT_QUOTA_MB } from '../sites/sites';
import { quotaCheck, refuseOverQuota, type ImportQuotaLimit } from './quota';
import { ArchiveUnreadable, readArchive, type ArchiveReport, type ImportPlan } from './reader';

// Legacy account imports (spec 2 sections 3, 4.2 "Legacy import", 4.4.4): the upload is kept as a
// copy, read once (plan, compatibility report), checked against the account's quotas, and refused
// (copy deleted) when unsafe or over quota. Otherwise its items are recorded in the spec's order
// (DNS zones, websites, certificates, databases, site files, SQL loads) and `import-<id>` runs them; what exists
// already in the account is recorded as pre-existing and left untouched. Passwords of created
// database users are never stored: they are held in this process until the first read after the run.

export interface ImportsDeps {
  db: Db;
  temporal: Client;
  logger: Logger;
  /** where uploaded archives are kept while their import needs them */
  dir: string;
  limits: ImportLimits;
  /** PHP versions the platform offers */
  phpVersions: string[];
  maxUploadBytes: number;
  taskQueue: string;
  nodeOps: NodeOpSettings;
}

export type ImportStep = 'dns_zones' | 'websites' | 'certificates' | 'databases' | 'site_files' | 'sql_loads';
export const STEPS: ImportStep[] = ['dns_zones', 'websites', 'certificates', 'databases', 'site_files', 'sql_loads'];

export interface ImportItemRow {
  import_id: string;
  seq: number;
  step: ImportStep;
  name: string;
  state: 'pending' | 'running' | 'done' | 'pre_existing' | 'failed';
  detail: Record<string, unknown>;
  error: string | null;
  attempts: number;
  done_at: Date | null;
}

export interface ImportRow {
  id: string;
  org_id: string;
  created_by: string;
  archive_name: string;
  archive_path: string | null;
  status: 'refused' | 'ready' | 'running' | 'stopped' | 'done';
  plan: ImportPlan;
  report: ArchiveReport;
  quota: Awaited<ReturnType<typeof quotaCheck>>;
  error: string | null;
  runs: number;
  created_at: Date;
  updated_at: Date;
}

/** Passwords of database users created by a run: kept in memory only, handed out once. */
const passwords = new Map<string, Array<{ database: string; user: string; password: string }>>();
export const holdPasswords = (importId: string, list: Array<{ database: string; user: string; password: string }>) => passwords.set(importId, [...(passwords.get(importId) ?? []), ...list]);

function needMigrationPower(actor: Actor) {
  if (!rolePowers(actor.role, actor.orgType).includes('migration.run')) throw new PanelError('power_missing', { power: 'migration.run', holder: `login "${actor.username}" (${actor.role})` });
}

/** The plan's items in the spec's order, each marked pre-existing when the account holds it already. */
async function itemsOf(db: Db, orgId: string, plan: ImportPlan) {
  const [sites, zones, dbs] = await Promise.all([
    db('panel_sites').where({ org_id: orgId }).pluck('domain'),
    db('panel_dns_zones').where({ org_id: orgId }).pluck('name'),
    db('panel_databases').where({ org_id: orgId }).pluck('name'),
  ]);
  const items: Array<{ step: ImportStep; name: string; state: 'pending' | 'pre_existing'; detail: object }> = [];
  for (const z of plan.dns_zones) items.push({ step: 'dns_zones', name: z.name, state: zones.includes(z.name) ? 'pre_existing' : 'pending', detail: { records: z.records.length } });
  for (const w of plan.websites) items.push({ step: 'websites', name: w.domain, state: sites.includes(w.domain) ? 'pre_existing' : 'pending', detail: { aliases: w.aliases, php: w.php, cron: w.cron.length, ...(w.php_values ? { php_values: w.php_values } : {}) } });
  for (const c of plan.certificates ?? []) items.push({ step: 'certificates', name: c.site, state: sites.includes(c.site) ? 'pre_existing' : 'pending', detail: { fingerprint_sha256: c.fingerprint_sha256, not_after: c.not_after } });
  for (const d of plan.databases) items.push({ step: 'databases', name: d.name, state: dbs.includes(d.name) ? 'pre_existing' : 'pending', detail: { users: d.users } });
  for (const w of plan.websites) items.push({ step: 'site_files', name: w.domain, state: sites.includes(w.domain) ? 'pre_existing' : 'pending', detail: { files: w.files, bytes: w.bytes, docroot: w.docroot } });
  for (const d of plan.databases) if (d.statements) items.push({ step: 'sql_loads', name: d.name, state: dbs.includes(d.name) ? 'pre_existing' : 'pending', detail: { statements: d.statements } });
  return items;
}

/** What the import adds to the account: the plan minus what exists already. */
function adding(plan: ImportPlan, items: Awaited<ReturnType<typeof itemsOf>>): Record<ImportQuotaLimit, number> {
  const fresh = (step: ImportStep) => items.filter((i) => i.step === step && i.state === 'pending');
  const sites = new Set(fresh('websites').map((i) => i.name));
  const newSites = plan.websites.filter((w) => sites.has(w.domain));
  return {
    websites: newSites.length,
    domains: newSites.reduce((n, w) => n + 1 + w.aliases.length, 0),
    databases: fresh('databases').length,
    dns_zones: fresh('dns_zones').length,
    // each new website is created with the default quota, which site creation allocates against disk_mb
    disk_mb: newSites.length * DEFAULT_QUOTA_MB,
    inodes: newSites.reduce((n, w) => n + w.files, 0),
  };
}

/** Keeps an upload as a copy, at most maxUploadBytes. */
async function keepUpload(deps: ImportsDeps, body: Readable, file: string): Promise<void> {
  fs.mkdirSync(deps.dir, { recursive: true, mode: 0o700 });
  let bytes = 0;
  const cap = new Transform({
    transform(chunk: Buffer, _e, cb) {
      bytes += chunk.length;
      cb(bytes > deps.maxUploadBytes ? new PanelError('validation_failed', { field: 'archive', detail: `archive: larger than ${deps.maxUploadBytes} bytes` }) : null, chunk);
    },
  });
  try {
    await pipeline(body, cap, fs.createWriteStream(file, { mode: 0o600 }));
  } catch (err) {
    fs.rmSync(file, { force: true });
    throw err;
  }
}

/**
 * Uploads an archive for the customer account `orgId`: 201 with the plan, report and quota check
 * (status ready), or refused — 422 unsafe_archive, 409 limit_reached — with the copy deleted.
 */
export async function createImport(deps: ImportsDeps, actor: Actor, orgId: string, body: Readable, archiveName: string) {
  needMigrationPower(actor);
  const org = await findInScope(deps.db, actor, orgId);
  if (org.type !== 'customer') throw new PanelError('conflict', { detail: `imports go into customer accounts only; ${org.type} "${org.name}" is not one` });
  const id = randomUUID();
  const file = path.join(deps.dir, `${id}.tar.gz`);
  await keepUpload(deps, body, file);
  let report: ArchiveReport;
  try {
    report = await readArchive(file, { limits: deps.limits, phpVersions: deps.phpVersions });
  } catch (err) {
    fs.rmSync(file, { force: true });
    if (err instanceof ArchiveUnreadable) throw new PanelError('unsafe_archive', { detail: `it could not be read within the safety limits: ${err.message}` });
    throw err;
  }
  const items = await itemsOf(deps.db, org.id, report.plan);
  const quota = await quotaCheck(deps.db, org, adding(report.plan, items));
  const refused = report.status === 'refused' || !quota.fits;
  if (refused) fs.rmSync(file, { force: true });
  const row: ImportRow = await deps.db.transaction(async (trx) => {
    const [r] = await trx('panel_imports')
      .insert({ id, org_id: org.id, created_by: actor.loginId, archive_name: archiveName.slice(0, 200), archive_path: refused ? null : file, status: refused ? 'refused' : 'ready', plan: JSON.stringify(report.plan), report: JSON.stringify(report), quota: JSON.stringify(quota) })
      .returning('*');
    if (items.length) await trx('panel_import_items').insert(items.map((i, seq) => ({ import_id: id, seq, step: i.step, name: i.name, state: i.state, detail: JSON.stringify(i.detail) })));
    await audit(trx, actor, { org, action: 'import.create', target: { type: 'import', id }, after: { archive: archiveName, status: r.status, counts: report.counts } });
    return r;
  });
  if (report.status === 'refused') {
    throw new PanelError('unsafe_archive', { import_id: id, detail: `${report.counts.refused} item(s) are refused; the uploaded copy is deleted`, refused: report.items.filter((i) => i.class === 'refused') });
  }
  try {
    refuseOverQuota(quota);
  } catch (err) {
    if (err instanceof PanelError) err.details.import_id = id;
    throw err;
  }
  return importView(row, await itemRows(deps.db, id));
}

const itemRows = (db: Db, importId: string): Promise<ImportItemRow[]> => db('panel_import_items').where({ import_id: importId }).orderBy('seq');

export function importView(r: ImportRow, items: ImportItemRow[], pw?: Array<{ database: string; user: string; password: string }>) {
  const count = (state: ImportItemRow['state']) => items.filter((i) => i.state === state).length;
  const current = items.find((i) => i.state === 'running') ?? null;
  return {
    id: r.id,
    org_id: r.org_id,
    archive: r.archive_name,
    archive_kept: r.archive_path !== null,
    status: r.status,
    runs: r.runs,
    error: r.error,
    plan: r.plan,
    report: { status: r.report.status, counts: r.report.counts, items: r.report.items, read: r.report.read },
    quota: r.quota,
    progress: {
      steps: STEPS.map((step) => ({ step, total: items.filter((i) => i.step === step).length, finished: items.filter((i) => i.step === step && (i.state === 'done' || i.state === 'pre_existing')).length })),
      counts: { total: items.length, done: count('done'), pre_existing: count('pre_existing'), pending: count('pending'), running: count('running'), failed: count('failed') },
      current: current && { step: current.step, name: current.name },
    },
    items: items.map((i) => ({ seq: i.seq, step: i.step, name: i.name, state: i.state, detail: i.detail, error: i.error, attempts: i.attempts, done_at: i.done_at })),
    ...(pw ? { passwords: pw } : {}),
    created_at: r.created_at,
    updated_at: r.updated_at,
  };
}

async function importInScope(db: Db, actor: Actor, id: string): Promise<ImportRow & { org_path: string }> {
  if (!isUuid(id)) throw notFound('import');
  const row = await db('panel_imports as i').join('panel_orgs as o', 'o.id', 'i.org_id').where('i.id', id).first('i.*', 'o.path as org_path');
  if (!row || !(row.org_id === actor.orgId || isBelow(row.org_path, actor.orgPath))) throw notFound('import');
  return row;
}

/** Progress of an import; after a finished run the login that ran it sees the new passwords once. */
export async function getImport(db: Db, actor: Actor, id: string) {
  const row = await importInScope(db, actor, id);
  let pw: Array<{ database: string; user: string; password: string }> | undefined;
  if (row.status === 'done' || row.status === 'stopped') {
    pw = passwords.get(row.id);
    passwords.delete(row.id);
  }
  return importView(row, await itemRows(db, id), pw);
}

/** Runs an import (again) when what is left still fits the quotas: 202; what was done is not repeated. A refused or finished import cannot run. */
export async function runImport(deps: ImportsDeps, actor: Actor, id: string) {
  needMigrationPower(actor);
  const row = await importInScope(deps.db, actor, id);
  if (row.status === 'refused') throw new PanelError('conflict', { detail: 'this import was refused; upload the archive again once it is fixed' });
  if (row.status === 'done') throw new PanelError('conflict', { detail: 'this import is done; nothing is left to run' });
  // the account may have changed since the upload: check again what is still to create, before anything is
  const quota = await quotaCheck(deps.db, { path: row.org_path }, adding(row.plan, await itemsOf(deps.db, row.org_id, row.plan)));
  try {
    refuseOverQuota(quota);
  } catch (err) {
    if (err instanceof PanelError) err.details.import_id = id;
    throw err;
  }
  const [updated] = await deps.db('panel_imports').where({ id }).update({ status: 'running', runs: deps.db.raw('runs + 1'), error: null, updated_at: deps.db.fn.now() }).returning('*');
  await audit(deps.db, actor, { org: { id: row.org_id, path: row.org_path }, action: 'import.run', target: { type: 'import', id }, after: { run: updated.runs } });
  await startImport(deps.temporal, deps.taskQueue, { importId: id, orgId: row.org_id, run: updated.runs }, row.archive_name);
  return importView(updated, await itemRows(deps.db, id));
}
