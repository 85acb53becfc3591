import { createHash, randomBytes } from 'node:crypto';
import { invalid, notFound, PanelError } from '../../../domain/panel/errors';
import { HOSTING_NODE } from '../../../domain/panel/node-ops';
import { RECONCILE_STATUSES, STATUS_WORDS, type Finding, type ReconcileMode, type ReconcilePolicy } from '../../../domain/panel/reconcile';
import type { Db } from '../../../platform/db';
import type { Actor } from '../shared/actor';
import { audit } from '../shared/audit';
import { isUuid } from '../shared/chain';
import { getPass, passView, recordReconcileEvents, type PassRow } from './passes';

// What the platform's logins read and decide about reconciliation (spec 2 sections 2.6, 3): the
// cluster summary, each site's view, and the policy change observe ↔ remediate, which takes two
// requests: the first returns the review (what remediation would overwrite, from the site's latest
// findings) and a single-use confirmation token; the second, with the token, applies it.

export const CONFIRMATION_TTL_MS = 10 * 60_000;
const EVENTS_SHOWN = 20;

const tokenHash = (t: string) => createHash('sha256').update(t).digest('hex');

/** Platform logins read; only a platform_admin changes a policy. */
function requirePlatform(actor: Actor, change: boolean): void {
  if (actor.orgType !== 'platform') throw notFound('reconciliation');
  if (change && actor.role !== 'platform_admin') throw new PanelError('forbidden', { detail: 'only a platform_admin changes reconciliation policies' });
}

export interface ReconcileOverview {
  mode: ReconcileMode | null;
  /** when the schedule runs the next pass, null: no schedule */
  nextPassAt: Date | null;
  intervalMs: number | null;
}

/** `GET /v1/reconcile`: counts per status of the hosting node's sites, the last and the running pass, the next one. */
export async function reconcileSummary(db: Db, actor: Actor, o: ReconcileOverview) {
  requirePlatform(actor, false);
  const rows: Array<{ status: string | null; n: string }> = await db('panel_sites as s')
    .leftJoin('panel_reconcile_sites as r', 'r.site_id', 's.id')
    .where('s.node_name', HOSTING_NODE)
    .groupBy('r.status')
    .select('r.status', db.raw('count(*) as n'));
  const counts: Record<string, number> = { ...Object.fromEntries(RECONCILE_STATUSES.map((s) => [s, 0])), not_checked: 0 };
  for (const r of rows) counts[r.status ?? 'not_checked'] += Number(r.n);
  const policies: Array<{ policy: string; n: string }> = await db('panel_reconcile_sites').where({ policy: 'remediate' }).groupBy('policy').select('policy', db.raw('count(*) as n'));
  const last: PassRow | undefined = await db('panel_reconcile_passes').whereNot({ status: 'running' }).orderBy('started_at', 'desc').first();
  const running: PassRow | undefined = await db('panel_reconcile_passes').where({ status: 'running' }).first();
  return {
    mode: o.mode ?? 'off',
    interval_seconds: o.intervalMs === null ? null : Math.round(o.intervalMs / 1000),
    counts,
    statuses: STATUS_WORDS,
    sites_remediating: Number(policies[0]?.n ?? 0),
    orphans: last?.counts?.orphan ?? null,
    last_pass: last ? passView(last) : null,
    running_pass: running ? passView(running) : null,
    next_pass_at: o.nextPassAt,
  };
}

async function hostingSite(db: Db, id: string) {
  if (!isUuid(id)) throw notFound('site');
  const site = await db('panel_sites as s').leftJoin('panel_reconcile_sites as r', 'r.site_id', 's.id').where('s.id', id).first('s.*', 'r.policy', 'r.status as reconcile_status', 'r.panel_generation as checked_generation', 'r.node_generation', 'r.expected_digest', 'r.node_digest', 'r.findings', 'r.last_pass_id', 'r.checked_at');
  // reconciliation covers the panel's own hosting node only (spec 2 section 4.4.3)
  if (!site || site.node_name !== HOSTING_NODE) throw notFound('site');
  return site;
}

/** `GET /v1/reconcile/sites/{id}`: status, policy, generations, digests, findings and recent events. */
export async function reconcileSiteView(db: Db, actor: Actor, id: string) {
  requirePlatform(actor, false);
  const s = await hostingSite(db, id);
  const events = await db('panel_reconcile_events').where({ site_id: id }).orderBy('id', 'desc').limit(EVENTS_SHOWN).select('id', 'pass_id', 'kind', 'detail', 'at');
  return {
    site_id: s.id,
    domain: s.domain,
    status: s.reconcile_status ?? 'not_checked',
    policy: (s.policy ?? 'observe') as ReconcilePolicy,
    generations: { panel: s.generation, panel_applied: s.applied_generation, node: s.node_generation ?? null, checked: s.checked_generation ?? null },
    digest: { expected: s.expected_digest ?? null, node: s.node_digest ?? null },
    findings: (s.findings ?? []) as Finding[],
    last_pass_id: s.last_pass_id ?? null,
    checked_at: s.checked_at ?? null,
    events: events.map((e) => ({ ...e, id: Number(e.id) })),
  };
}

const EFFECT: Record<ReconcilePolicy, string> = {
  remediate: 'with -reconcile on, drifted managed configuration (web server, PHP pool, suspension, cron) of this site is rewritten to match the panel; manual node edits are overwritten',
  observe: 'passes only observe and report this site; manual node edits stay',
};

/**
 * `POST /v1/reconcile/sites/{id}/policy`. Without `confirmation_token`: the review and a token
 * (nothing changes). With the token issued for the same site and policy: the change, audited.
 */
export async function changePolicy(db: Db, actor: Actor, id: string, input: { policy: ReconcilePolicy; confirmation_token?: string }, now = new Date()) {
  requirePlatform(actor, true);
  const s = await hostingSite(db, id);
  const current = (s.policy ?? 'observe') as ReconcilePolicy;
  if (input.confirmation_token === undefined) {
    if (current === input.policy) throw new PanelError('conflict', { detail: `the site's policy is ${current} already` });
    const token = randomBytes(24).toString('base64url');
    const expires = new Date(now.getTime() + CONFIRMATION_TTL_MS);
    await db('panel_reconcile_confirmations').insert({ token_hash: tokenHash(token), site_id: id, policy: input.policy, login_id: actor.loginId, expires_at: expires });
    const findings = (s.findings ?? []) as Finding[];
    return {
      confirmed: false,
      review: {
        site_id: id,
        domain: s.domain,
        from: current,
        to: input.policy,
        effect: EFFECT[input.policy],
        status: s.reconcile_status ?? 'not_checked',
        as_of: s.checked_at ?? null,
        // what the next remediating pass would overwrite, as the latest pass found it
        overwrites: input.policy === 'remediate' ? findings.filter((f) => f.problem === 'drift' || f.problem === 'missing') : [],
        findings,
      },
      confirmation_token: token,
      expires_at: expires,
    };
  }
  return db.transaction(async (trx) => {
    const [used] = await trx('panel_reconcile_confirmations')
      .where({ token_hash: tokenHash(input.confirmation_token!), site_id: id, policy: input.policy, login_id: actor.loginId })
      .whereNull('used_at')
      .where('expires_at', '>', now)
      .update({ used_at: now })
      .returning('token_hash');
    if (!used) throw invalid('confirmation_token', 'unknown, used, expired, or issued for another site, policy or login: request the review again');
    const locked = await trx('panel_sites').where({ id }).forUpdate().first('id');
    if (!locked) throw notFound('site');
    await trx('panel_reconcile_sites').insert({ site_id: id, policy: input.policy }).onConflict('site_id').merge(['policy']);
    const org = await trx('panel_orgs').where({ id: s.org_id }).first('id', 'path');
    await audit(trx, actor, { org, action: 'site.reconcile_policy', target: { type: 'site', id }, before: { policy: current }, after: { policy: input.policy } });
    await recordReconcileEvents(trx, [{ site_id: id, pass_id: null, kind: 'policy', detail: { from: current, to: input.policy, by: actor.username } }]);
    return { confirmed: true, site_id: id, policy: input.policy, previous: current };
  });
}

/** `GET /v1/reconcile/sites?status=&policy=`: the hosting node's sites with their latest verdict, worst first, a page at a time. */
export async function listReconcileSites(db: Db, actor: Actor, q: { status?: string; policy?: ReconcilePolicy; limit: number; after?: string }) {
  requirePlatform(actor, false);
  const rows = await db('panel_sites as s')
    .leftJoin('panel_reconcile_sites as r', 'r.site_id', 's.id')
    .where('s.node_name', HOSTING_NODE)
    .modify((b) => {
      if (q.status === 'not_checked') b.whereNull('r.status');
      else if (q.status) b.where('r.status', q.status);
      if (q.policy === 'remediate') b.where('r.policy', 'remediate');
      else if (q.policy === 'observe') b.where((w) => w.whereNull('r.policy').orWhere('r.policy', 'observe'));
      if (q.after) b.where('s.id', '>', q.after);
    })
    .orderBy('s.id')
    .limit(q.limit)
    .select('s.id as site_id', 's.domain', db.raw(`coalesce(r.status, 'not_checked') as status`), db.raw(`coalesce(r.policy, 'observe') as policy`), 'r.checked_at', 'r.last_pass_id');
  return { sites: rows, next: rows.length === q.limit ? rows[rows.length - 1].site_id : null };
}

/** `GET /v1/reconcile/passes/{id}`: a pass's report. */
export async function passReport(db: Db, actor: Actor, id: string) {
  requirePlatform(actor, false);
  const p = await getPass(db, id);
  if (!p) throw notFound('reconciliation pass');
  const results = await db('panel_reconcile_results as x').leftJoin('panel_sites as s', 's.id', 'x.site_id').where('x.pass_id', id).whereNot('x.status', 'in_sync').orderBy('x.site_id').limit(500).select('x.site_id', 's.domain', 'x.status', 'x.findings', 'x.remediation');
  // the databases this pass found missing (a later pass replaces a database's row)
  const databases = await db('panel_reconcile_databases as r').join('panel_databases as d', 'd.id', 'r.database_id').where('r.last_pass_id', id).whereNot('r.found', 'in_sync').orderBy('d.name').limit(500).select('r.database_id', 'd.name', 'r.found as status', 'r.findings', 'r.remediation');
  return { ...passView(p), not_in_sync: results, databases_not_in_sync: databases };
}
