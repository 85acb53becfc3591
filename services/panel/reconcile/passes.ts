import type { Knex } from 'knex';
import { HOSTING_NODE } from '../../../domain/panel/node-ops';
import type { Finding, ReconcileMode, ReconcilePolicy, ReconcileStatus } from '../../../domain/panel/reconcile';
import type { Db } from '../../../platform/db';
import type { SiteRow } from '../sites/sites';
import { databaseCounts } from './databases';

// The records of reconciliation passes (spec 2 section 4.4.3, PANEL.md section 4): the only writer
// of the panel_reconcile_* tables. A pass is opened once (at most one runs: a partial unique
// index), walks the hosting node's sites in id order a batch at a time, and is closed with its
// counts and orphans. A site's verdict is written `remediating` before its node files are
// rewritten and `done` after, in the same transaction as the site's view and its events, so a pass
// resumed after a crash skips what it finished and never rewrites a site twice.

type Q = Knex | Knex.Transaction;

export interface PassRow {
  id: string;
  mode: ReconcileMode;
  trigger: 'schedule' | 'manual';
  status: 'running' | 'done' | 'failed';
  started_at: Date;
  finished_at: Date | null;
  sites: number;
  counts: Record<string, number> | null;
  orphans: OrphanReport | null;
  remediated: number;
  error: string | null;
}

export interface OrphanReport {
  total: number;
  /** the first files (at most ORPHANS_LISTED) */
  files: Array<{ kind: string; path: string; domain: string }>;
}

export const ORPHANS_LISTED = 200;
/** passes kept with their per-site results; older ones are removed when a pass closes */
export const PASSES_KEPT = 100;

/** What a rewrite overwrote on the node: each file's old digest and a diff excerpt. */
export interface Remediation {
  ok: boolean;
  error?: string;
  /** the docroot was missing: what the rewrite does about it */
  docroot?: string;
  files: Array<{ kind: string; path: string; old_digest: string | null; new_digest?: string; diff?: string[] }>;
}

export interface SiteResult {
  siteId: string;
  status: ReconcileStatus;
  findings: Finding[];
  panelGeneration: number;
  nodeGeneration: number | null;
  expectedDigest: string | null;
  nodeDigest: string | null;
  remediation: Remediation | null;
}

export type PassSite = SiteRow & { policy: ReconcilePolicy };

export function passView(p: PassRow) {
  return {
    id: p.id,
    workflow_id: `reconcile-${p.id}`,
    mode: p.mode,
    trigger: p.trigger,
    status: p.status,
    started_at: p.started_at,
    finished_at: p.finished_at,
    sites: p.sites,
    counts: p.counts,
    remediated: p.remediated,
    orphans: p.orphans,
    error: p.error,
  };
}

/**
 * Opens pass `id` (a repeated open of the same id is no change). While another pass runs, nothing
 * is opened and that pass is returned: passes never overlap.
 */
export async function openPass(db: Db, p: { id: string; mode: ReconcileMode; trigger: PassRow['trigger'] }): Promise<{ opened: boolean; pass: PassRow }> {
  const own: PassRow | undefined = await db('panel_reconcile_passes').where({ id: p.id }).first();
  if (own) return { opened: true, pass: own };
  try {
    const [row] = await db('panel_reconcile_passes').insert({ id: p.id, mode: p.mode, trigger: p.trigger }).returning('*');
    return { opened: true, pass: row };
  } catch (err) {
    if ((err as { code?: string }).code !== '23505') throw err;
    const running = await runningPass(db);
    if (!running) throw err;
    return { opened: false, pass: running };
  }
}

export const runningPass = (q: Q): Promise<PassRow | undefined> => q('panel_reconcile_passes').where({ status: 'running' }).first();
export const getPass = (q: Q, id: string): Promise<PassRow | undefined> => q('panel_reconcile_passes').where({ id }).first();

/** The next `limit` sites of the hosting node after `after` (id order), with their policy and what this pass recorded of them. */
export async function loadBatch(db: Db, passId: string, after: string | null, limit: number) {
  const sites: PassSite[] = await db('panel_sites as s')
    .leftJoin('panel_reconcile_sites as r', 'r.site_id', 's.id')
    .where('s.node_name', HOSTING_NODE)
    .modify((q) => (after ? q.where('s.id', '>', after) : q))
    .orderBy('s.id')
    .limit(limit)
    .select('s.*', db.raw(`coalesce(r.policy, 'observe') as policy`));
  const recorded: Array<{ site_id: string; phase: 'remediating' | 'done'; status: ReconcileStatus; findings: Finding[]; remediation: Remediation | null }> = sites.length
    ? await db('panel_reconcile_results').where({ pass_id: passId }).whereIn('site_id', sites.map((s) => s.id)).select('site_id', 'phase', 'status', 'findings', 'remediation')
    : [];
  return { sites, recorded: new Map(recorded.map((r) => [r.site_id, r])) };
}

/** Written before the node is rewritten: the verdict and what the rewrite will overwrite. */
export async function recordIntents(db: Db, passId: string, rows: SiteResult[]): Promise<void> {
  if (!rows.length) return;
  await db('panel_reconcile_results')
    .insert(rows.map((r) => ({ pass_id: passId, site_id: r.siteId, phase: 'remediating', status: r.status, findings: JSON.stringify(r.findings), remediation: JSON.stringify(r.remediation) })))
    .onConflict(['pass_id', 'site_id'])
    .merge(['status', 'findings', 'remediation']);
}

/** An event of a site's reconciliation history. Webhooks of site events (issue 17 item 4) hook in here. */
export interface ReconcileEvent {
  site_id: string;
  pass_id: string | null;
  kind: 'status' | 'remediated' | 'remediation_failed' | 'policy';
  detail: Record<string, unknown>;
}

export async function recordReconcileEvents(q: Q, events: ReconcileEvent[]): Promise<void> {
  if (events.length) await q('panel_reconcile_events').insert(events.map((e) => ({ ...e, detail: JSON.stringify(e.detail) })));
}

/** The site's status after the pass: a successful rewrite brings it in sync. */
const statusAfter = (r: SiteResult): ReconcileStatus => (r.remediation?.ok ? 'in_sync' : r.status);

/**
 * Records a batch's verdicts (`done`), each site's latest view and its events (a status change, an
 * overwrite), in one transaction. Sites deleted meanwhile get no view (their row is gone).
 */
export async function recordResults(db: Db, passId: string, rows: SiteResult[]): Promise<void> {
  if (!rows.length) return;
  await db.transaction(async (trx) => {
    await trx('panel_reconcile_results')
      .insert(rows.map((r) => ({ pass_id: passId, site_id: r.siteId, phase: 'done', status: r.status, findings: JSON.stringify(r.findings), remediation: r.remediation ? JSON.stringify(r.remediation) : null })))
      .onConflict(['pass_id', 'site_id'])
      .merge(['phase', 'status', 'findings', 'remediation', 'recorded_at']);
    const ids = rows.map((r) => r.siteId);
    const before = new Map<string, string | null>((await trx('panel_reconcile_sites').whereIn('site_id', ids).select('site_id', 'status')).map((r: { site_id: string; status: string | null }) => [r.site_id, r.status]));
    const existing = new Set<string>((await trx('panel_sites').whereIn('id', ids).select('id')).map((r: { id: string }) => r.id));
    const live = rows.filter((r) => existing.has(r.siteId));
    if (!live.length) return;
    await trx('panel_reconcile_sites')
      .insert(
        live.map((r) => ({
          site_id: r.siteId,
          status: statusAfter(r),
          panel_generation: r.panelGeneration,
          node_generation: r.remediation?.ok ? r.panelGeneration : r.nodeGeneration,
          expected_digest: r.expectedDigest,
          node_digest: r.remediation?.ok ? r.expectedDigest : r.nodeDigest,
          findings: JSON.stringify(r.findings),
          last_pass_id: passId,
          checked_at: trx.fn.now(),
        })),
      )
      .onConflict('site_id')
      .merge(['status', 'panel_generation', 'node_generation', 'expected_digest', 'node_digest', 'findings', 'last_pass_id', 'checked_at']);
    const events: ReconcileEvent[] = [];
    for (const r of live) {
      if (r.remediation) {
        events.push({ site_id: r.siteId, pass_id: passId, kind: r.remediation.ok ? 'remediated' : 'remediation_failed', detail: { found: r.status, ...r.remediation } });
      }
      const was = before.get(r.siteId) ?? null;
      if (was !== statusAfter(r)) events.push({ site_id: r.siteId, pass_id: passId, kind: 'status', detail: { from: was, to: statusAfter(r), findings: r.findings.map((f) => f.problem) } });
    }
    await recordReconcileEvents(trx, events);
  });
}

/** The domains the panel knows on its hosting node (any status): a managed file of another domain is an orphan. */
export async function hostingDomains(db: Db): Promise<Set<string>> {
  return new Set((await db('panel_sites').where({ node_name: HOSTING_NODE }).select('domain')).map((r: { domain: string }) => r.domain));
}

/** Closes the pass with its counts per status, orphans and rewrites, and removes passes beyond PASSES_KEPT. */
export async function finishPass(db: Db, passId: string, orphans: OrphanReport): Promise<PassRow> {
  return db.transaction(async (trx) => {
    const byStatus: Array<{ status: string; n: string }> = await trx('panel_reconcile_results').where({ pass_id: passId }).groupBy('status').select('status', trx.raw('count(*) as n'));
    const counts: Record<string, number> = Object.fromEntries(byStatus.map((r) => [r.status, Number(r.n)]));
    counts.orphan = orphans.total;
    const dbs = await databaseCounts(trx, passId);
    if (dbs.database_in_sync + dbs.database_missing) Object.assign(counts, dbs);
    const [{ n: remediated }] = await trx('panel_reconcile_results').where({ pass_id: passId }).whereRaw(`(remediation->>'ok')::boolean`).count<{ n: string }[]>('* as n');
    const sites = byStatus.reduce((a, r) => a + Number(r.n), 0);
    const [row] = await trx('panel_reconcile_passes')
      .where({ id: passId })
      .update({ status: 'done', finished_at: trx.fn.now(), sites, counts: JSON.stringify(counts), orphans: JSON.stringify(orphans), remediated: Number(remediated) })
      .returning('*');
    await trx('panel_reconcile_passes')
      .whereNot({ status: 'running' })
      .whereNotIn('id', trx('panel_reconcile_passes').orderBy('started_at', 'desc').limit(PASSES_KEPT).select('id'))
      .delete();
    return row;
  });
}

/** A pass that could not finish (its workflow failed, or its workflow is gone): it no longer blocks new passes. */
export async function failPass(q: Q, passId: string, error: string): Promise<void> {
  await q('panel_reconcile_passes').where({ id: passId, status: 'running' }).update({ status: 'failed', finished_at: q.fn.now(), error });
}
