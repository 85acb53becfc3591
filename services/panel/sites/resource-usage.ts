import type { Knex } from 'knex';
import type { SiteUsage } from '../../../domain/panel/node-ops';
import type { Db } from '../../../platform/db';
import type { Actor } from '../shared/actor';
import { siteInScope } from './sites';

// What each site's control group used (issue 34 §1), from the counters its node reports with every
// heartbeat: the only writer of panel_site_counters and panel_site_usage_hours (which metering prunes
// through pruneUsageHours once their hours are long metered). A reading adds what
// grew since the previous one to the hour it is read in; a counter that went down belongs to a
// group made again (a node restart), so all of it is new. The memory peak counts for an hour only
// when the group's peak rose since the previous reading (else the hour's peak is at most the current
// use). One statement per report, integers only; a report repeated adds nothing.

type Q = Knex | Knex.Transaction;

const RECORD_SQL = `
  WITH cur AS (
    SELECT s.id AS site_id,
      round((e->'group'->>'cpuSeconds')::numeric * 1000000)::bigint AS cpu_us,
      coalesce(round((e->'group'->>'ioBytes')::numeric), 0)::bigint AS io_bytes,
      round(coalesce((e->'group'->>'memoryPeakMb')::numeric, 0) * 1048576)::bigint AS peak,
      round(coalesce((e->'group'->>'memoryMb')::numeric, 0) * 1048576)::bigint AS mem,
      coalesce((e->'group'->>'processes')::int, 0) AS procs
    FROM jsonb_array_elements(?::jsonb) e JOIN panel_sites s ON s.id::text = e->>'siteId' AND s.node_name = ?
    WHERE jsonb_typeof(e->'group') = 'object'
  ), grown AS (
    SELECT c.site_id,
      CASE WHEN p.cpu_us IS NULL OR c.cpu_us < p.cpu_us THEN c.cpu_us ELSE c.cpu_us - p.cpu_us END AS cpu_us,
      CASE WHEN p.io_bytes IS NULL OR c.io_bytes < p.io_bytes THEN c.io_bytes ELSE c.io_bytes - p.io_bytes END AS io_bytes,
      CASE WHEN p.memory_peak_bytes IS DISTINCT FROM c.peak THEN greatest(c.peak, c.mem) ELSE c.mem END AS peak,
      c.procs
    FROM cur c LEFT JOIN panel_site_counters p ON p.site_id = c.site_id
  ), hours AS (
    INSERT INTO panel_site_usage_hours AS h (site_id, hour, cpu_us, io_bytes, memory_peak_bytes, processes_max)
    SELECT site_id, date_trunc('hour', now()), cpu_us, io_bytes, peak, procs FROM grown
    ON CONFLICT (site_id, hour) DO UPDATE SET cpu_us = h.cpu_us + excluded.cpu_us, io_bytes = h.io_bytes + excluded.io_bytes,
      memory_peak_bytes = greatest(h.memory_peak_bytes, excluded.memory_peak_bytes), processes_max = greatest(h.processes_max, excluded.processes_max)
  )
  INSERT INTO panel_site_counters AS k (site_id, cpu_us, io_bytes, memory_peak_bytes, at)
  SELECT site_id, cpu_us, io_bytes, peak, now() FROM cur
  ON CONFLICT (site_id) DO UPDATE SET cpu_us = excluded.cpu_us, io_bytes = excluded.io_bytes, memory_peak_bytes = excluded.memory_peak_bytes, at = excluded.at`;

/** Adds the growth of the groups' counters in a node's report to each site's current hour. */
export async function recordGroupUsage(q: Q, node: string, usage: SiteUsage[]): Promise<void> {
  if (!usage.some((u) => u.group)) return;
  await q.raw(RECORD_SQL, [JSON.stringify(usage), node]);
}

/** Hourly usage rows are kept this long after their hour is metered: the usage page shows 48 hours, billing reads the metered copy. */
export const USAGE_HOURS_KEPT_DAYS = 35;

/** Deletes the hourly usage rows older than USAGE_HOURS_KEPT_DAYS before `metered` (an hour metering has recorded). */
export async function pruneUsageHours(q: Q, metered: Date): Promise<number> {
  return q('panel_site_usage_hours').where('hour', '<', new Date(metered.getTime() - USAGE_HOURS_KEPT_DAYS * 86_400_000)).delete();
}

/** Hours of usage shown by the usage page. */
export const USAGE_HOURS_SHOWN = 48;

/**
 * `GET /v1/sites/{id}/usage`: the site's group as its node last reported it, and what it used in each
 * of the last 48 hours (CPU seconds, memory peak, processes, I/O bytes), newest first.
 */
export async function siteResourceUsage(db: Db, actor: Actor, siteId: string) {
  const site = await siteInScope(db, actor, siteId);
  const node = await db('panel_nodes').where({ name: site.node_name }).first('site_usage', 'site_usage_at', 'facts');
  const entry = (Array.isArray(node?.site_usage) ? node.site_usage : []).find((u: SiteUsage) => u.siteId === site.id) as SiteUsage | undefined;
  const hours: Array<{ hour: Date; cpu_us: string; io_bytes: string; memory_peak_bytes: string; processes_max: number }> = await db('panel_site_usage_hours')
    .where({ site_id: site.id })
    .orderBy('hour', 'desc')
    .limit(USAGE_HOURS_SHOWN);
  return {
    site_id: site.id,
    node: site.node_name,
    measured_at: node?.site_usage_at ?? null,
    disk_mb: entry?.diskMb ?? null,
    inodes: entry?.inodes ?? null,
    // null: the node runs the site in no control group, so it counts no CPU, memory, processes or I/O
    group: entry?.group
      ? { cpu_seconds: entry.group.cpuSeconds, memory_mb: entry.group.memoryMb, memory_peak_mb: entry.group.memoryPeakMb, processes: entry.group.processes, io_bytes: entry.group.ioBytes }
      : null,
    hours: hours.map((h) => ({
      hour: h.hour,
      cpu_seconds: Number(h.cpu_us) / 1e6,
      memory_peak_mb: Math.round((Number(h.memory_peak_bytes) / 1048576) * 100) / 100,
      processes_max: h.processes_max,
      io_bytes: Number(h.io_bytes),
    })),
  };
}
