import type { Knex } from 'knex';
import { builtInRule, type AlertState } from '../../../domain/panel/alerts';
import { notFound, PanelError } from '../../../domain/panel/errors';
import type { Db } from '../../../platform/db';
import type { Actor } from '../shared/actor';
import { isUuid } from '../shared/chain';
import { emitEvent } from './events';
import { RETENTION_DAYS } from './samples';

// Alerts as logins see and move them (spec 2 sections 2.6, 3): an alert belongs to an org (node
// alerts to the platform org, soft-quota alerts to the site's account or the limited org) and is
// visible to logins of that org and every org above it, so platform alerts are seen at the root
// only; any other alert is 404. open → acknowledged → resolved, each with an optional note.

type Q = Knex | Knex.Transaction;

export interface AlertRow {
  id: string;
  rule_key: string;
  subject: string;
  node_name: string | null;
  site_id: string | null;
  org_id: string;
  org_path: string;
  severity: string;
  state: AlertState;
  summary: string;
  value: number | null;
  threshold: number | null;
  note: string | null;
  reopened: number;
  opened_at: Date;
  fired_at: Date;
  acknowledged_at: Date | null;
  resolved_at: Date | null;
}

const CHART_MARGIN_MS = 30 * 60_000;

/** The window of the node's metrics around an alert (from 30 min before to 30 min after, or now). */
export function chartOf(a: AlertRow, now: Date = new Date()) {
  if (!a.node_name) return null;
  const to = new Date(Math.min(now.getTime(), (a.resolved_at ? new Date(a.resolved_at).getTime() : now.getTime()) + CHART_MARGIN_MS));
  const from = new Date(Math.max(new Date(a.opened_at).getTime() - CHART_MARGIN_MS, to.getTime() - RETENTION_DAYS * 86_400_000));
  const qs = new URLSearchParams({ from: from.toISOString(), to: to.toISOString() });
  return { node: a.node_name, from, to, metrics: `/v1/cluster/nodes/${a.node_name}/metrics?${qs}` };
}

export const alertView = (a: AlertRow) => ({
  id: a.id,
  rule: a.rule_key,
  subject: a.subject,
  node: a.node_name,
  site_id: a.site_id,
  org_id: a.org_id,
  scope: builtInRule(a.rule_key)?.scope ?? 'platform',
  severity: a.severity,
  state: a.state,
  summary: a.summary,
  value: a.value,
  threshold: a.threshold,
  note: a.note,
  reopened: a.reopened,
  opened_at: a.opened_at,
  fired_at: a.fired_at,
  acknowledged_at: a.acknowledged_at,
  resolved_at: a.resolved_at,
});

/** The `data` of an alert.fired / alert.resolved event: the alert as it is now. */
export async function alertEventData(q: Q, id: string) {
  const a: AlertRow = await q('panel_alerts').where({ id }).first();
  return { alert: alertView(a) };
}

const visible = (q: Q, actor: Actor) => q('panel_alerts').where('org_path', 'like', `${actor.orgPath}%`);

async function visibleAlert(q: Q, actor: Actor, id: string, lock = false): Promise<AlertRow> {
  if (!isUuid(id)) throw notFound('alert');
  const query = visible(q, actor).where({ id }).first();
  if (lock) query.forUpdate();
  const a = await query;
  if (!a) throw notFound('alert');
  return a;
}

export interface AlertFilter {
  state?: AlertState | 'unresolved';
  node?: string;
  severity?: string;
  limit: number;
  before?: string;
}

/** The alerts the actor sees, newest first. */
export async function listAlerts(db: Db, actor: Actor, f: AlertFilter) {
  const q = visible(db, actor).orderBy([{ column: 'fired_at', order: 'desc' }, { column: 'id', order: 'desc' }]).limit(f.limit);
  if (f.state === 'unresolved') q.whereNot('state', 'resolved');
  else if (f.state) q.where('state', f.state);
  if (f.node) q.where('node_name', f.node);
  if (f.severity) q.where('severity', f.severity);
  if (f.before) q.where('fired_at', '<', f.before);
  const rows: AlertRow[] = await q;
  return { alerts: rows.map(alertView), next_before: rows.length === f.limit ? rows[rows.length - 1].fired_at : null };
}

/** One alert with its event history, the related alerts (same node, overlapping time) and its chart window. */
export async function getAlert(db: Db, actor: Actor, id: string) {
  const a = await visibleAlert(db, actor, id);
  const events = await db('panel_alert_events').where({ alert_id: a.id }).orderBy('id').select('at', 'kind', 'actor', 'note', 'value');
  const related: AlertRow[] = a.node_name
    ? await visible(db, actor)
        .where({ node_name: a.node_name })
        .whereNot({ id: a.id })
        .where('opened_at', '<=', a.resolved_at ?? db.fn.now())
        .where((w) => w.whereNull('resolved_at').orWhere('resolved_at', '>=', a.opened_at))
        .orderBy('opened_at', 'desc')
        .limit(50)
    : [];
  return { ...alertView(a), events, related: related.map(alertView), chart: chartOf(a) };
}

/** Acknowledge (open → acknowledged) or resolve (open or acknowledged → resolved), with an optional note. */
export async function moveAlert(db: Db, actor: Actor, id: string, to: 'acknowledged' | 'resolved', note: string | null) {
  return db.transaction(async (trx) => {
    const a = await visibleAlert(trx, actor, id, true);
    const allowed = to === 'acknowledged' ? a.state === 'open' : a.state !== 'resolved';
    if (!allowed) throw new PanelError('conflict', { detail: `the alert is ${a.state}: it cannot be ${to}`, state: a.state });
    const change = to === 'acknowledged' ? { state: to, acknowledged_at: trx.fn.now() } : { state: to, resolved_at: trx.fn.now() };
    await trx('panel_alerts').where({ id: a.id }).update({ ...change, ...(note === null ? {} : { note }) });
    await trx('panel_alert_events').insert({ alert_id: a.id, kind: to, actor: actor.username, note });
    if (to === 'resolved') await emitEvent(trx, a.org_id, 'alert.resolved', await alertEventData(trx, a.id));
    return getAlertIn(trx, a.id);
  });
}

const getAlertIn = async (q: Q, id: string) => alertView(await q('panel_alerts').where({ id }).first());
