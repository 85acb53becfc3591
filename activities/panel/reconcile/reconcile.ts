import { createHash } from 'node:crypto';
import { heartbeat } from '@temporalio/activity';
import { classifyDatabase, classifySite, combinedDigest, diffExcerpt, managedFileDomain, shouldRemediate, type FileCheck, type ReconcileMode, type SiteVerdict } from '../../../domain/panel/reconcile';
import type { SiteSpec } from '../../../domain/panel/node-ops';
import type { OwnNode } from '../../../domain/panel/own-node';
import type { Db } from '../../../platform/db';
import {
  failPass as fail,
  finishPass as finish,
  hostingDomains,
  loadBatch,
  openPass as open,
  ORPHANS_LISTED,
  passView,
  recordIntents,
  recordResults,
  type OrphanReport,
  type PassSite,
  type Remediation,
  type SiteResult,
} from '../../../services/panel/reconcile/passes';
import { specOf } from '../../../services/panel/sites/sites';
import { hostingDatabases, recordDatabaseResults, recordedInPass, type DatabaseResult } from '../../../services/panel/reconcile/databases';

/** What reconciliation needs of the panel's own hosting node. */
export type ReconcileNode = Pick<OwnNode, 'root' | 'renderSite' | 'appliedSite' | 'docroot' | 'readManaged' | 'listManaged' | 'rewriteSites' | 'databaseInventory' | 'recreateDatabases'>;

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

export interface ReconcileActivityDeps {
  db: Db;
  /** the hosting node this worker drives; null: passes fail (another process runs the node) */
  hostingNode: ReconcileNode | null;
}

export interface BatchOutcome {
  /** the last site id of the batch, null: no site was left */
  last: string | null;
  checked: number;
  remediated: number;
}

/** The node's rewrite of one site in one pass: its id makes the rewrite idempotent on the node too. */
export const rewriteId = (passId: string, siteId: string): string => `reconcile-${passId}-${siteId}`;

/** A site with an operation in flight, failed, or being deleted is not judged: its files are meant to differ. */
const inFlight = (s: PassSite) => s.deleting || s.status === 'pending' || s.status === 'failed' || s.generation !== s.applied_generation;

/**
 * Activities of the reconciliation pass (`reconcile-<pass_id>`), keyed by the pass id: open, one
 * batch of sites at a time (read and compare the node's files, rewrite those of opted-in sites in
 * remediate mode with one reload per batch), orphans, close.
 */
export function createReconcileActivities(deps: ReconcileActivityDeps) {
  const node = (): ReconcileNode => {
    if (!deps.hostingNode) throw new Error('this panel worker drives no hosting node');
    return deps.hostingNode;
  };

  async function openPass(p: { passId: string; mode: ReconcileMode; trigger: 'schedule' | 'manual' }) {
    const r = await open(deps.db, { id: p.passId, mode: p.mode, trigger: p.trigger });
    return { opened: r.opened, running: r.pass.id };
  }

  function inspect(s: PassSite): { verdict: SiteVerdict; result: SiteResult; spec: SiteSpec; files: FileCheck[] } {
    const spec = specOf(s);
    const base = { siteId: s.id, panelGeneration: s.generation, remediation: null };
    if (inFlight(s)) {
      return { spec, files: [], verdict: { status: 'pending', findings: [], remediable: false }, result: { ...base, status: 'pending', findings: [], nodeGeneration: null, expectedDigest: null, nodeDigest: null } };
    }
    const n = node();
    const applied = n.appliedSite(s.id);
    const files: FileCheck[] = n.renderSite(spec).map((f) => {
      const read = n.readManaged(f.path);
      return { kind: f.kind, path: f.path, expected: f.text, actual: 'text' in read ? read.text : null, ...('error' in read ? { readError: read.error } : {}) };
    });
    const verdict = classifySite(spec, applied, files, sha256, n.docroot(spec.domain));
    const expectedDigest = combinedDigest(files.map((f) => ({ kind: f.kind, digest: sha256(f.expected) })), sha256);
    const nodeDigest = applied ? combinedDigest(files.map((f) => ({ kind: f.kind, digest: f.actual === null ? null : sha256(f.actual) })), sha256) : null;
    return { spec, files, verdict, result: { ...base, status: verdict.status, findings: verdict.findings, nodeGeneration: applied?.generation ?? null, expectedDigest, nodeDigest } };
  }

  /** What a rewrite overwrites: each differing file's old digest and a diff excerpt; a deleted docroot comes back empty. */
  const plan = (files: FileCheck[], verdict: SiteVerdict): Remediation => ({
    ok: false,
    ...(verdict.findings.some((f) => f.problem === 'docroot_missing') ? { docroot: 'recreated empty: its files come back only from a restore point' } : {}),
    files: files
      .filter((f) => f.actual !== f.expected)
      .map((f) => ({ kind: f.kind, path: f.path, old_digest: f.actual === null ? null : sha256(f.actual), new_digest: sha256(f.expected), diff: f.actual === null ? ['(file was missing)'] : diffExcerpt(f.expected, f.actual) })),
  });

  /**
   * Checks the sites after `after` (at most `limit`), skipping those this pass finished already.
   * In mode `on`, opted-in sites with drift are recorded `remediating`, rewritten on the node in
   * one batch (one config test, one reload), then recorded `done`. A site left `remediating` by a
   * crash is rewritten under the same id, which the node applies at most once.
   */
  async function reconcileBatch(p: { passId: string; mode: ReconcileMode; after: string | null; limit: number }): Promise<BatchOutcome> {
    const { sites, recorded } = await loadBatch(deps.db, p.passId, p.after, p.limit);
    if (!sites.length) return { last: null, checked: 0, remediated: 0 };
    const todo = sites.filter((s) => recorded.get(s.id)?.phase !== 'done');
    const checked = todo.map((s) => ({ site: s, ...inspect(s) }));
    const rewrite = checked.filter((c) => recorded.get(c.site.id)?.phase === 'remediating' || shouldRemediate(p.mode, c.site.policy, c.verdict));
    for (const c of rewrite) {
      const intent = recorded.get(c.site.id);
      // a rewrite begun before a crash may have happened already: what was found then is the verdict
      if (intent?.phase === 'remediating') Object.assign(c.result, { status: intent.status, findings: intent.findings, remediation: intent.remediation });
      else c.result.remediation = plan(c.files, c.verdict);
    }
    await recordIntents(deps.db, p.passId, rewrite.map((c) => c.result));
    heartbeat({ passId: p.passId, after: p.after, phase: 'rewriting', sites: rewrite.length });
    if (rewrite.length) {
      const outcomes = await node().rewriteSites(rewrite.map((c) => ({ opId: rewriteId(p.passId, c.site.id), site: c.spec })));
      rewrite.forEach((c, i) => {
        const o = outcomes[i];
        c.result.remediation = { ...c.result.remediation!, ok: o.ok, ...(o.ok ? {} : { error: o.error }) };
      });
    }
    await recordResults(deps.db, p.passId, checked.map((c) => c.result));
    heartbeat({ passId: p.passId, after: sites[sites.length - 1].id });
    return { last: sites[sites.length - 1].id, checked: checked.length, remediated: rewrite.filter((c) => c.result.remediation?.ok).length };
  }

  /**
   * The hosting node's customer databases against its MariaDB: a record whose database or user is
   * gone is `missing`; in mode `on` it is recreated empty with its user and grants (data comes back
   * only from a restore point). Nothing is overwritten, so no per-database opt-in: the record is the
   * truth. The verdict is recorded before the recreation, which the node applies once per id.
   */
  async function reconcileDatabases(p: { passId: string; mode: ReconcileMode }): Promise<{ checked: number; missing: number; recreated: number }> {
    const records = await hostingDatabases(deps.db);
    if (!records.length) return { checked: 0, missing: 0, recreated: 0 };
    const before = await recordedInPass(deps.db, p.passId);
    const inventory = (await node().databaseInventory()) ?? { databases: [], users: [] };
    const results: DatabaseResult[] = records.map((d) => {
      const begun = before.get(d.id);
      if (begun?.remediation) return { ...begun, remediation: null };
      if (d.busy) return { databaseId: d.id, found: 'pending', findings: [], remediation: null };
      const v = classifyDatabase(d, inventory);
      return { databaseId: d.id, found: v.status, findings: v.findings, remediation: null };
    });
    const fix = p.mode === 'on' ? results.filter((r) => r.found === 'missing') : [];
    if (fix.length) {
      await recordDatabaseResults(deps.db, p.passId, fix.map((r) => ({ ...r, remediation: { ok: false, error: 'recreation in progress' } })));
      const byId = new Map(records.map((d) => [d.id, d]));
      const outcomes = await node().recreateDatabases(fix.map((r) => ({ opId: `${rewriteId(p.passId, r.databaseId)}-db`, database: byId.get(r.databaseId)!.name, user: byId.get(r.databaseId)!.db_user, locked: byId.get(r.databaseId)!.locked })));
      fix.forEach((r, i) => {
        const o = outcomes[i];
        r.remediation = o.ok ? { ok: true, detail: { ...o.detail, data: 'recreated empty: its data comes back only from a restore point' } } : { ok: false, error: o.error };
      });
    }
    await recordDatabaseResults(deps.db, p.passId, results);
    heartbeat({ passId: p.passId, phase: 'databases' });
    return { checked: results.length, missing: results.filter((r) => r.found === 'missing').length, recreated: fix.filter((r) => r.remediation?.ok).length };
  }

  /** Managed files on the node of no site the panel knows on it (reported, never removed). */
  async function findOrphans(): Promise<OrphanReport> {
    const n = node();
    const known = await hostingDomains(deps.db);
    const files = n
      .listManaged()
      .map((path) => ({ path, owner: managedFileDomain(n.root, path) }))
      .filter((f) => f.owner && !known.has(f.owner.domain))
      .map((f) => ({ kind: f.owner!.kind, path: f.path, domain: f.owner!.domain }));
    return { total: files.length, files: files.slice(0, ORPHANS_LISTED) };
  }

  async function finishPass(p: { passId: string; orphans: OrphanReport }) {
    const row = await finish(deps.db, p.passId, p.orphans);
    return { counts: passView(row).counts, remediated: row.remediated, sites: row.sites };
  }

  const failPass = (p: { passId: string; error: string }): Promise<void> => fail(deps.db, p.passId, p.error);

  return { openPass, reconcileBatch, reconcileDatabases, findOrphans, finishPass, failPass };
}

export type ReconcileActivities = ReturnType<typeof createReconcileActivities>;
