import type { Knex } from 'knex';
import { HOSTING_NODE } from '../../../domain/panel/node-ops';
import type { Db } from '../../../platform/db';
import { emitEvents } from './events';
import { effectiveRules } from './rules';
import { alertView, type AlertRow } from './alerts';
import { pruneSamples, takeSamples } from './samples';

// One alert evaluation (the alert-eval schedule, at the metrics interval): take the samples, then,
// set-based over every node, site and org (and the latest reconciliation pass's findings) at once, find the (rule, subject) pairs whose condition
// holds now (`observed`), and move alerts in one transaction:
//   - an unresolved alert whose condition no longer holds (or whose rule was disabled) is resolved;
//   - a condition newly holding is pending since now; once it has held for the rule's for-time it
//     fires once: the newest resolved alert of the same rule and subject re-opens when it was
//     resolved within the rule's re-open window, else a new alert opens. A partial unique index
//     keeps one unresolved alert per rule and subject, so a flapping node never has two.
// Evaluations never overlap (a transaction-scoped advisory lock); alert.fired / alert.resolved
// events and their webhook deliveries are recorded in the same transaction.

/** A node's metrics older than this do not count for the metric rules (the heartbeat rule covers a silent node). */
export const METRICS_FRESH_SECONDS = 600;

// Each metric rule's value per node from its latest report.
const METRIC_VALUE: Record<string, string> = {
  cpu: `(n.metrics->>'cpuPercent')::float8`,
  load: `(n.metrics->'load'->>0)::float8`,
  memory: `CASE WHEN (n.metrics->'memory'->>'totalMb')::float8 > 0 THEN 100 * (1 - (n.metrics->'memory'->>'availableMb')::float8 / (n.metrics->'memory'->>'totalMb')::float8) END`,
  rootfs: `CASE WHEN (n.metrics->'rootFs'->>'totalMb')::float8 > 0 THEN 100 * (1 - (n.metrics->'rootFs'->>'freeMb')::float8 / (n.metrics->'rootFs'->>'totalMb')::float8) END`,
};

const OWN_LIMIT = (name: string) => `(CASE WHEN o.package_id IS NOT NULL THEN p.limits ELSE o.limits END ->> '${name}')::float8`;

// (rule_key, subject, node_name, site_id, org_id, org_path, value, threshold, summary) of every
// enabled rule whose condition holds now. `rules` is a CTE of the enabled rules.
const OBSERVED_SQL = `
  WITH rules AS (SELECT * FROM jsonb_to_recordset(?::jsonb) AS r(key text, kind text, threshold float8, condition text)),
  platform AS (SELECT id, path FROM panel_orgs WHERE type = 'platform'),
  node_values AS (
    SELECT r.key, r.threshold, r.condition, n.name, CASE r.kind
        WHEN 'heartbeat_age' THEN extract(epoch FROM now() - coalesce(n.last_heartbeat_at, n.created_at))::float8
        ${Object.entries(METRIC_VALUE).map(([k, v]) => `WHEN '${k}' THEN CASE WHEN n.metrics_at >= now() - make_interval(secs => ${METRICS_FRESH_SECONDS}) THEN ${v} END`).join('\n        ')}
      END AS value
    FROM rules r CROSS JOIN panel_nodes n WHERE r.kind IN ('heartbeat_age', ${Object.keys(METRIC_VALUE).map((k) => `'${k}'`).join(', ')})),
  site_use AS (
    SELECT s.id AS site_id, s.org_id, so.path, s.domain, s.quota_mb, (u->>'diskMb')::float8 AS disk_mb, (u->>'inodes')::float8 AS inodes
    FROM panel_sites s JOIN panel_orgs so ON so.id = s.org_id JOIN panel_nodes n ON n.name = s.node_name
    CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(n.site_usage) = 'array' THEN n.site_usage ELSE '[]'::jsonb END) u
    WHERE u->>'siteId' = s.id::text),
  org_limits AS (
    SELECT o.id, o.path, o.name, ${OWN_LIMIT('disk_mb')} AS disk_mb, ${OWN_LIMIT('inodes')} AS inodes
    FROM panel_orgs o LEFT JOIN panel_packages p ON p.id = o.package_id),
  -- every site counts at each org of its path (the path lists the org ids from the root), joined by id
  org_use AS (
    SELECT l.id, l.path, l.name, l.disk_mb AS disk_limit, l.inodes AS inode_limit, sum(u.disk_mb) AS disk_mb, sum(u.inodes) AS inodes
    FROM site_use u CROSS JOIN LATERAL unnest(string_to_array(rtrim(u.path, '/'), '/')) AS anc(id)
    JOIN org_limits l ON l.id::text = anc.id
    WHERE l.disk_mb IS NOT NULL OR l.inodes IS NOT NULL GROUP BY l.id, l.path, l.name, l.disk_mb, l.inodes)
  SELECT v.key AS rule_key, 'node:' || v.name AS subject, v.name AS node_name, NULL::uuid AS site_id, pl.id AS org_id, pl.path AS org_path, v.value, v.threshold,
    'node ' || v.name || ': ' || replace(v.condition, '{threshold}', v.threshold::text) AS summary
  FROM node_values v CROSS JOIN platform pl WHERE v.value > v.threshold
  UNION ALL
  SELECT r.key, 'site:' || u.site_id, NULL, u.site_id, u.org_id, u.path, 100 * u.disk_mb / u.quota_mb, r.threshold,
    'site ' || u.domain || ': ' || replace(r.condition, '{threshold}', r.threshold::text)
  FROM rules r JOIN site_use u ON r.kind = 'disk_quota' AND u.quota_mb > 0 AND 100 * u.disk_mb / u.quota_mb >= r.threshold
  UNION ALL
  SELECT r.key, 'org:' || u.id, NULL, NULL, u.id, u.path, 100 * CASE r.kind WHEN 'disk_quota' THEN u.disk_mb / u.disk_limit ELSE u.inodes / u.inode_limit END, r.threshold,
    '"' || u.name || '": ' || replace(r.condition, '{threshold}', r.threshold::text)
  FROM rules r JOIN org_use u ON
    (r.kind = 'disk_quota' AND u.disk_limit > 0 AND 100 * u.disk_mb / u.disk_limit >= r.threshold) OR
    (r.kind = 'inode_quota' AND u.inode_limit > 0 AND 100 * u.inodes / u.inode_limit >= r.threshold)
  UNION ALL
  SELECT r.key, 'site:' || s.id, s.node_name, s.id, pl.id, pl.path, 1, r.threshold, 'site ' || s.domain || ': ' || r.condition
  FROM rules r JOIN panel_reconcile_sites rs ON r.kind = 'reconcile_missing' AND rs.status = 'missing'
  JOIN panel_sites s ON s.id = rs.site_id CROSS JOIN platform pl
  UNION ALL
  SELECT r.key, 'database:' || d.id, d.node_name, NULL, pl.id, pl.path, 1, r.threshold, 'database ' || d.name || ' on ' || d.node_name || ': ' || r.condition
  FROM rules r JOIN panel_reconcile_databases rd ON r.kind = 'reconcile_missing' AND rd.status = 'missing'
  JOIN panel_databases d ON d.id = rd.database_id CROSS JOIN platform pl
  UNION ALL
  SELECT r.key, 'orphan:' || (f->>'path'), '${HOSTING_NODE}', NULL, pl.id, pl.path, 1, r.threshold, (f->>'path') || ': ' || r.condition
  FROM rules r JOIN (SELECT orphans FROM panel_reconcile_passes WHERE status = 'done' ORDER BY finished_at DESC LIMIT 1) lp ON r.kind = 'reconcile_orphan'
  CROSS JOIN LATERAL jsonb_array_elements(coalesce(lp.orphans->'files', '[]'::jsonb)) f CROSS JOIN platform pl`;

export interface EvaluationResult {
  samples: number;
  pruned: number;
  observed: number;
  fired: number;
  reopened: number;
  resolved: number;
  events: number;
  ms: number;
}

/** Takes the samples and evaluates every rule once (see the top of this file). */
export async function evaluateAlerts(db: Db): Promise<EvaluationResult> {
  const started = process.hrtime.bigint();
  const samples = await takeSamples(db);
  const pruned = await pruneSamples(db);
  const r = await db.transaction(async (trx) => {
    await trx.raw('SELECT pg_advisory_xact_lock(hashtext(?))', ['panel_alert_eval']);
    const rules = (await effectiveRules(trx)).filter((x) => x.enabled);
    await trx.raw(`CREATE TEMP TABLE alert_observed ON COMMIT DROP AS ${OBSERVED_SQL}`, [JSON.stringify(rules.map((x) => ({ key: x.key, kind: x.kind, threshold: x.threshold, condition: x.condition })))]);
    const observed = Number((await trx.raw('SELECT count(*) AS n FROM alert_observed')).rows[0].n);
    // Cleared conditions: forget them, resolve their alerts.
    await trx.raw(`DELETE FROM panel_alert_pending p WHERE NOT EXISTS (SELECT 1 FROM alert_observed o WHERE o.rule_key = p.rule_key AND o.subject = p.subject)`);
    const resolved: AlertRow[] = (
      await trx.raw(
        `UPDATE panel_alerts a SET state = 'resolved', resolved_at = now()
         WHERE a.state <> 'resolved' AND NOT EXISTS (SELECT 1 FROM alert_observed o WHERE o.rule_key = a.rule_key AND o.subject = a.subject)
         RETURNING a.*`,
      )
    ).rows;
    await trx.raw(`INSERT INTO panel_alert_pending (rule_key, subject, since) SELECT rule_key, subject, now() FROM alert_observed ON CONFLICT DO NOTHING`);
    // Conditions that held for their for-time and have not fired in this episode yet.
    await trx.raw(
      `CREATE TEMP TABLE alert_due ON COMMIT DROP AS
       WITH due AS (
         UPDATE panel_alert_pending p SET fired = true FROM jsonb_to_recordset(?::jsonb) AS r(key text, for_seconds int)
         WHERE r.key = p.rule_key AND NOT p.fired AND p.since + make_interval(secs => r.for_seconds) <= now()
         RETURNING p.rule_key, p.subject)
       SELECT o.*, r.severity, r.reopen_seconds FROM due d JOIN alert_observed o USING (rule_key, subject)
       JOIN jsonb_to_recordset(?::jsonb) AS r(key text, severity text, reopen_seconds int) ON r.key = d.rule_key`,
      [JSON.stringify(rules.map((x) => ({ key: x.key, for_seconds: x.for_seconds }))), JSON.stringify(rules.map((x) => ({ key: x.key, severity: x.severity, reopen_seconds: x.reopen_seconds })))],
    );
    const reopened: AlertRow[] = (
      await trx.raw(
        `UPDATE panel_alerts a SET state = 'open', reopened = a.reopened + 1, fired_at = now(), acknowledged_at = NULL, resolved_at = NULL,
           value = d.value, threshold = d.threshold, severity = d.severity, summary = d.summary
         FROM alert_due d
         WHERE a.id = (SELECT x.id FROM panel_alerts x WHERE x.rule_key = d.rule_key AND x.subject = d.subject AND x.state = 'resolved'
                         AND x.resolved_at >= now() - make_interval(secs => d.reopen_seconds) ORDER BY x.resolved_at DESC LIMIT 1)
         RETURNING a.*`,
      )
    ).rows;
    const fired: AlertRow[] = (
      await trx.raw(
        `INSERT INTO panel_alerts (id, rule_key, subject, node_name, site_id, org_id, org_path, severity, state, summary, value, threshold, opened_at, fired_at)
         SELECT gen_random_uuid(), d.rule_key, d.subject, d.node_name, d.site_id, d.org_id, d.org_path, d.severity, 'open', d.summary, d.value, d.threshold, now(), now()
         FROM alert_due d WHERE NOT EXISTS (SELECT 1 FROM panel_alerts a WHERE a.rule_key = d.rule_key AND a.subject = d.subject AND a.state <> 'resolved')
         ON CONFLICT (rule_key, subject) WHERE state <> 'resolved' DO NOTHING
         RETURNING *`,
      )
    ).rows;
    const history = [...fired.map((a) => ({ a, kind: 'fired' })), ...reopened.map((a) => ({ a, kind: 'reopened' })), ...resolved.map((a) => ({ a, kind: 'resolved' }))];
    if (history.length) {
      await trx.raw(
        `INSERT INTO panel_alert_events (alert_id, kind, actor, note, value)
         SELECT a.id, h.kind, 'system', CASE h.kind WHEN 'resolved' THEN 'the condition no longer holds' END, CASE WHEN h.kind <> 'resolved' THEN a.value END
         FROM jsonb_to_recordset(?::jsonb) AS h(id uuid, kind text) JOIN panel_alerts a ON a.id = h.id`,
        [JSON.stringify(history.map((h) => ({ id: h.a.id, kind: h.kind })))],
      );
    }
    const events = await emitAlertEvents(trx, [...fired, ...reopened], resolved);
    return { observed, fired: fired.length, reopened: reopened.length, resolved: resolved.length, events };
  });
  return { samples, pruned, ...r, ms: Number(process.hrtime.bigint() - started) / 1e6 };
}

/** One alert.fired / alert.resolved event per changed alert, with the alert as it is now. */
async function emitAlertEvents(trx: Knex.Transaction, fired: AlertRow[], resolved: AlertRow[]): Promise<number> {
  const events = [...fired.map((a) => ({ a, type: 'alert.fired' })), ...resolved.map((a) => ({ a, type: 'alert.resolved' }))];
  await emitEvents(trx, events.map(({ a, type }) => ({ orgId: a.org_id, type, data: { alert: alertView(a) } })));
  return events.length;
}
