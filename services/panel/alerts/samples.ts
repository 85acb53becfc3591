import type { Knex } from 'knex';
import { invalid, notFound } from '../../../domain/panel/errors';
import { isNodeName } from '../../../domain/panel/node-ops';

// Node metric samples (spec 2 section 2.6, issue 17 item 1): at every metrics interval the latest
// metrics each node record holds (written by agent heartbeats and the hosting node's own reports,
// nodes.ts recordHeartbeat) become one sample row; a report not newer than the last sample adds
// nothing. Samples older than RAW_DAYS are rolled up into hourly rows (averages, the highest CPU,
// the number of samples), and those are kept RETENTION_DAYS. Charts read both, averaged per step.

type Q = Knex | Knex.Transaction;

export const RETENTION_DAYS = 14;
/** full-resolution samples are kept this long, then hourly */
export const RAW_DAYS = 2;
/** most points a chart request may ask for */
export const MAX_POINTS = 1500;

const pct = (used: string, total: string) => `CASE WHEN (${total})::float8 > 0 THEN 100 * (${used}) / (${total})::float8 END`;

// One row per node from its record; the primary key (node, metrics_at) makes a repeated sample a no-op.
const SAMPLE_SQL = `
  INSERT INTO panel_node_samples (node_name, at, cpu_percent, load1, load5, load15, memory_used_percent, rootfs_used_percent, uptime_seconds, rx_bytes, tx_bytes)
  SELECT n.name, n.metrics_at,
    (m->>'cpuPercent')::float8, (m->'load'->>0)::float8, (m->'load'->>1)::float8, (m->'load'->>2)::float8,
    ${pct(`(m->'memory'->>'totalMb')::float8 - (m->'memory'->>'availableMb')::float8`, `m->'memory'->>'totalMb'`)},
    ${pct(`(m->'rootFs'->>'totalMb')::float8 - (m->'rootFs'->>'freeMb')::float8`, `m->'rootFs'->>'totalMb'`)},
    (m->>'uptimeSeconds')::float8::bigint, (m->'network'->>'rxBytes')::float8::bigint, (m->'network'->>'txBytes')::float8::bigint
  FROM panel_nodes n CROSS JOIN LATERAL (SELECT n.metrics AS m) x
  WHERE n.metrics_at IS NOT NULL AND jsonb_typeof(n.metrics) = 'object'
  ON CONFLICT (node_name, at) DO NOTHING`;

/** Takes one sample of every node that reported since its last one; returns how many were taken. */
export async function takeSamples(q: Q): Promise<number> {
  const r = await q.raw(SAMPLE_SQL);
  return r.rowCount ?? 0;
}

const SERIES = ['cpu_percent', 'load1', 'load5', 'load15', 'memory_used_percent', 'rootfs_used_percent'] as const;
// the mean of hourly means weighted by their samples, nulls left out
const weighted = (c: string, n: string) => `sum(${c} * ${n}) / nullif(sum(${n}) FILTER (WHERE ${c} IS NOT NULL), 0)`;

/**
 * Rolls the samples of whole hours older than RAW_DAYS up into hourly rows (an hour rolled up again
 * merges, weighted by samples), deletes them, and deletes hourly rows older than the retention.
 * Returns how many sample rows went.
 */
export async function pruneSamples(db: Knex, now: Date = new Date()): Promise<number> {
  const cutoff = new Date(Math.floor((now.getTime() - RAW_DAYS * 86_400_000) / 3_600_000) * 3_600_000);
  return db.transaction(async (trx) => {
    await trx.raw(
      `INSERT INTO panel_node_samples_hourly AS h (node_name, hour, samples, cpu_percent_max, ${SERIES.join(', ')})
       SELECT node_name, date_trunc('hour', at), count(*), max(cpu_percent), ${SERIES.map((c) => `avg(${c})`).join(', ')}
       FROM panel_node_samples WHERE at < ? GROUP BY 1, 2
       ON CONFLICT (node_name, hour) DO UPDATE SET samples = h.samples + excluded.samples, cpu_percent_max = greatest(h.cpu_percent_max, excluded.cpu_percent_max),
         ${SERIES.map((c) => `${c} = (coalesce(h.${c} * h.samples, 0) + coalesce(excluded.${c} * excluded.samples, 0)) / (h.samples + excluded.samples)`).join(', ')}`,
      [cutoff],
    );
    const pruned = await trx('panel_node_samples').where('at', '<', cutoff).delete();
    await trx('panel_node_samples_hourly').where('hour', '<', new Date(now.getTime() - RETENTION_DAYS * 86_400_000)).delete();
    return pruned;
  });
}

export interface ChartQuery {
  from?: string;
  to?: string;
  step?: string;
}

function instant(field: string, v: string | undefined, fallback: Date): Date {
  if (v === undefined) return fallback;
  const d = /^\d{4}-\d{2}-\d{2}T/.test(v) ? new Date(v) : new Date(NaN);
  if (Number.isNaN(d.getTime())) throw invalid(field, 'an ISO 8601 time such as 2026-12-29T10:00:00Z');
  return d;
}

/** The validated window and step (seconds) of a chart request: at most MAX_POINTS points, within the retention. */
export function chartWindow(c: ChartQuery, now: Date = new Date()): { from: Date; to: Date; step: number } {
  const to = instant('to', c.to, now);
  const from = instant('from', c.from, new Date(to.getTime() - 3_600_000));
  if (from >= to) throw invalid('from', 'must be before to');
  const span = (to.getTime() - from.getTime()) / 1000;
  if (span > (RETENTION_DAYS + 1) * 86_400) throw invalid('from', `samples are kept ${RETENTION_DAYS} days: ask for at most ${RETENTION_DAYS + 1} days`);
  let step = Math.max(60, Math.ceil(span / 300));
  if (c.step !== undefined) {
    if (!/^\d{1,7}$/.test(c.step) || Number(c.step) < 1) throw invalid('step', 'whole seconds, at least 1');
    step = Number(c.step);
  }
  if (span / step > MAX_POINTS) throw invalid('step', `${Math.ceil(span / step)} points asked for, at most ${MAX_POINTS}: use a step of at least ${Math.ceil(span / MAX_POINTS)} s`);
  return { from, to, step };
}

/** `GET /v1/cluster/nodes/{node}/metrics`: the node's samples averaged per step (points without samples are absent). */
export async function nodeChart(q: Q, node: string, c: ChartQuery) {
  if (!isNodeName(node) || !(await q('panel_nodes').where({ name: node }).first('name'))) throw notFound('node');
  const { from, to, step } = chartWindow(c);
  const { rows } = await q.raw(
    `WITH s AS (
       SELECT at AS t, 1 AS n, cpu_percent AS cpu_percent_max, ${SERIES.join(', ')} FROM panel_node_samples WHERE node_name = ? AND at >= ? AND at < ?
       UNION ALL
       SELECT hour, samples, cpu_percent_max, ${SERIES.join(', ')} FROM panel_node_samples_hourly WHERE node_name = ? AND hour >= ? AND hour < ?)
     SELECT date_bin(make_interval(secs => ?), t, ?::timestamptz) AS t, sum(n)::int AS samples,
       ${SERIES.map((x) => `(${weighted(x, 'n')})::float8 AS ${x}`).join(', ')}, max(cpu_percent_max)::float8 AS cpu_percent_max
     FROM s GROUP BY 1 ORDER BY 1`,
    [node, from, to, node, from, to, step, from],
  );
  return { node, from, to, step, retention_days: RETENTION_DAYS, full_resolution_days: RAW_DAYS, points: rows };
}
