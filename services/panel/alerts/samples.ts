import type { Knex } from 'knex';
import { invalid, notFound } from '../../../domain/panel/errors';
import { isNodeName } from '../../../domain/panel/node-ops';

// Node metric samples (spec 2 section 2.6, issue 17 item 1): at every metrics interval the latest
// metrics each node record holds (written by agent heartbeats and the hosting node's own reports,
// nodes.ts recordHeartbeat) become one sample row; a report not newer than the last sample adds
// nothing. Samples older than RETENTION_DAYS are pruned. Charts read them averaged per step.

type Q = Knex | Knex.Transaction;

export const RETENTION_DAYS = 14;
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

/** Deletes samples older than the retention; returns how many. */
export async function pruneSamples(q: Q, now: Date = new Date()): Promise<number> {
  return q('panel_node_samples').where('at', '<', new Date(now.getTime() - RETENTION_DAYS * 86_400_000)).delete();
}

export interface ChartQuery {
  from?: string;
  to?: string;
  step?: string;
}

const SERIES = ['cpu_percent', 'load1', 'load5', 'load15', 'memory_used_percent', 'rootfs_used_percent'] as const;

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
    `SELECT date_bin(make_interval(secs => ?), at, ?::timestamptz) AS t, count(*)::int AS samples,
       ${SERIES.map((s) => `avg(${s})::float8 AS ${s}`).join(', ')}, max(cpu_percent)::float8 AS cpu_percent_max
     FROM panel_node_samples WHERE node_name = ? AND at >= ? AND at < ?
     GROUP BY 1 ORDER BY 1`,
    [step, from, node, from, to],
  );
  return { node, from, to, step, retention_days: RETENTION_DAYS, points: rows };
}
