import type { Db } from '../../../platform/db';
import { hourName, hourOf } from '../../../domain/panel/billing';
import { pruneUsageHours } from '../sites/resource-usage';

// Hourly metering (spec 2 sections 2.8, 4.3 `-billing-meter`; PANEL.md section 4 `meter-<hour>`):
// one transaction per hour records, for every org billed in that hour (its latest plan assignment
// effective at the hour's start names a plan), the facts rating needs: plan, status, customer
// accounts per package, each website (active or suspended) with its node and labels, allocated
// quota and what its control group used in the hour (issue 34), each active database with its node. Everything is set-based SQL (one statement per table,
// whatever the number of orgs), and the hour's row in panel_meter_hours is taken first: a repeated
// hour inserts nothing, and a crash mid-way rolls back whole.

const HOUR_MS = 3_600_000;
/** how many hours one catch-up reads at most (a month and a bit); the next tick reads the rest */
export const CATCH_UP_LIMIT = 800;

export interface MeteredHour {
  hour: string;
  /** the hour was recorded before: nothing written */
  already: boolean;
  orgs: number;
  sites: number;
  databases: number;
}

// An org's ancestors (itself included) are the ids of its path: sites and accounts reach every
// billed org above them by one hash join, rather than one prefix scan per billed org.
const ANCESTORS = `unnest(string_to_array(rtrim(%s.path, '/'), '/')::uuid[])`;

// The orgs billed in the hour: each org's latest assignment effective at the hour's start, naming a
// plan. Every statement derives them from the assignments (whose statistics the planner knows)
// rather than from the meter rows this transaction just wrote (which it does not).
const BILLED = `
  WITH cur AS (
    SELECT DISTINCT ON (a.org_id) a.org_id, a.plan_id FROM panel_billing_assignments a
    WHERE a.effective_from <= :hour ORDER BY a.org_id, a.effective_from DESC, a.id DESC
  ), billed AS (
    SELECT cur.org_id, cur.plan_id, p.owner_org_id, o.status FROM cur
    JOIN panel_orgs o ON o.id = cur.org_id JOIN panel_billing_plans p ON p.id = cur.plan_id
  )`;

const BILLED_ORGS = `${BILLED}, acc AS (
    SELECT b.org_id, coalesce(c.package_id::text, '') AS pkg, count(*)::int AS n
    FROM panel_orgs c CROSS JOIN LATERAL ${ANCESTORS.replace('%s', 'c')} AS anc(id) JOIN billed b ON b.org_id = anc.id
    WHERE c.type = 'customer' GROUP BY 1, 2
  ), acc_json AS (SELECT org_id, jsonb_object_agg(pkg, n) AS accounts FROM acc GROUP BY org_id)
  INSERT INTO panel_meter_orgs (hour, org_id, plan_id, billed_by, org_status, accounts)
  SELECT :hour, b.org_id, b.plan_id, b.owner_org_id, b.status, coalesce(acc_json.accounts, '{}'::jsonb)
  FROM billed b LEFT JOIN acc_json ON acc_json.org_id = b.org_id
  ON CONFLICT DO NOTHING`;

const SITES = `${BILLED}
  INSERT INTO panel_meter_sites (hour, org_id, site_id, node_name, region, physical_region, zone, cell, status, quota_mb, cpu_us, io_bytes, memory_peak_bytes, processes_max)
  SELECT :hour, b.org_id, s.id, s.node_name, n.logical_region, n.physical_region, n.zone, n.cell, s.status, s.quota_mb,
    coalesce(u.cpu_us, 0), coalesce(u.io_bytes, 0), coalesce(u.memory_peak_bytes, 0), coalesce(u.processes_max, 0)
  FROM panel_sites s JOIN panel_orgs so ON so.id = s.org_id
  CROSS JOIN LATERAL ${ANCESTORS.replace('%s', 'so')} AS anc(id)
  JOIN billed b ON b.org_id = anc.id
  JOIN panel_nodes n ON n.name = s.node_name
  LEFT JOIN panel_site_usage_hours u ON u.site_id = s.id AND u.hour = :hour
  WHERE s.status IN ('active', 'suspended')
  ON CONFLICT DO NOTHING`;

const DATABASES = `${BILLED}
  INSERT INTO panel_meter_databases (hour, org_id, database_id, node_name, region, physical_region, zone, cell)
  SELECT :hour, b.org_id, d.id, d.node_name, n.logical_region, n.physical_region, n.zone, n.cell
  FROM panel_databases d JOIN panel_orgs dorg ON dorg.id = d.org_id
  CROSS JOIN LATERAL ${ANCESTORS.replace('%s', 'dorg')} AS anc(id)
  JOIN billed b ON b.org_id = anc.id
  JOIN panel_nodes n ON n.name = d.node_name
  WHERE d.status = 'active'
  ON CONFLICT DO NOTHING`;

/** Records the metered facts of `hour` (YYYY-MM-DDTHH) once; a repeat writes nothing. */
export async function recordHour(db: Db, name: string): Promise<MeteredHour> {
  const hour = new Date(`${name}:00:00Z`);
  if (Number.isNaN(hour.getTime()) || hourName(hour) !== name) throw new Error(`not a metered hour: ${name}`);
  return db.transaction(async (trx) => {
    const taken = await trx.raw('INSERT INTO panel_meter_hours (hour, orgs, sites, databases) VALUES (?, 0, 0, 0) ON CONFLICT DO NOTHING RETURNING hour', [hour]);
    // hours long metered: billing reads their copy (panel_meter_sites) from then on
    await pruneUsageHours(trx, hour);
    if (taken.rowCount === 0) {
      const row = await trx('panel_meter_hours').where({ hour }).first();
      return { hour: name, already: true, orgs: row.orgs, sites: row.sites, databases: row.databases };
    }
    const orgs = (await trx.raw(BILLED_ORGS, { hour })).rowCount ?? 0;
    const sites = (await trx.raw(SITES, { hour })).rowCount ?? 0;
    const databases = (await trx.raw(DATABASES, { hour })).rowCount ?? 0;
    await trx('panel_meter_hours').where({ hour }).update({ orgs, sites, databases });
    return { hour: name, already: false, orgs, sites, databases };
    // one snapshot for the three statements: they see the same billed orgs, sites and databases
  }, { isolationLevel: 'repeatable read' });
}

/**
 * The hours to meter now, oldest first: from the hour after the last one recorded (or, before the
 * first, from the first plan assignment's hour) to the last hour that has ended by `now`.
 */
export async function dueHours(db: Db, now: Date, limit = CATCH_UP_LIMIT): Promise<string[]> {
  const last = hourOf(now).getTime() - HOUR_MS;
  const {
    rows: [row],
  } = await db.raw('SELECT (SELECT max(hour) FROM panel_meter_hours) AS recorded, (SELECT min(effective_from) FROM panel_billing_assignments WHERE plan_id IS NOT NULL) AS first');
  if (!row.recorded && !row.first) return [];
  let from = row.recorded ? new Date(row.recorded).getTime() + HOUR_MS : hourOf(new Date(row.first)).getTime();
  const hours: string[] = [];
  for (; from <= last && hours.length < limit; from += HOUR_MS) hours.push(hourName(new Date(from)));
  return hours;
}
