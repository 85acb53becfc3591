import type { Knex } from 'knex';
import type { CronRun } from '../../../domain/panel/cron';
import type { Db } from '../../../platform/db';
import type { Actor } from '../shared/actor';
import { siteInScope } from './sites';

// The last runs of a site's cron lines (issue 32 item 1): a node reports runs that started or
// finished since its last report with its heartbeat; they are stored for that node's own sites
// only (a run of a site the node does not hold is dropped), at most RUNS_KEPT per site.

type Q = Knex | Knex.Transaction;

export const RUNS_KEPT = 50;

/** Records runs a node reported (insert or update by node and run id), then keeps the newest RUNS_KEPT of each site. */
export async function recordCronRuns(q: Q, node: string, runs: CronRun[]): Promise<void> {
  if (!runs.length) return;
  const { rows } = await q.raw(
    `INSERT INTO panel_site_cron_runs AS c (node_name, id, site_id, line, started_at, finished_at, status, exit_code, output, run_user)
     SELECT ?, r.id, s.id, r.line, r."startedAt", r."finishedAt", r.status, r."exitCode", r.output, r.user
       FROM jsonb_to_recordset(?::jsonb) AS r(id text, "siteId" text, line text, "startedAt" timestamptz, "finishedAt" timestamptz, status text, "exitCode" int, output text, "user" text)
       JOIN panel_sites s ON s.id::text = r."siteId" AND s.node_name = ?
     ON CONFLICT (node_name, id) DO UPDATE SET finished_at = excluded.finished_at, status = excluded.status, exit_code = excluded.exit_code, output = excluded.output
     RETURNING site_id`,
    [node, JSON.stringify(runs), node],
  );
  const sites = [...new Set((rows as Array<{ site_id: string }>).map((r) => r.site_id))];
  if (!sites.length) return;
  await q.raw(
    `DELETE FROM panel_site_cron_runs c USING (
       SELECT node_name, id, row_number() OVER (PARTITION BY site_id ORDER BY started_at DESC, id) AS n FROM panel_site_cron_runs WHERE site_id = ANY(?::uuid[])
     ) old WHERE old.n > ? AND c.node_name = old.node_name AND c.id = old.id`,
    [sites, RUNS_KEPT],
  );
}

/** The last runs of a site's cron lines, newest first (what its node reported at its last heartbeat). */
export async function listCronRuns(db: Db, actor: Actor, siteId: string) {
  const site = await siteInScope(db, actor, siteId);
  const rows = await db('panel_site_cron_runs').where({ site_id: site.id }).orderBy([{ column: 'started_at', order: 'desc' }, { column: 'id' }]).limit(RUNS_KEPT);
  return {
    site_id: site.id,
    cron: site.cron,
    runs: rows.map((r) => ({
      id: r.id,
      line: r.line,
      started_at: r.started_at,
      finished_at: r.finished_at,
      status: r.status,
      exit_code: r.exit_code,
      user: r.run_user,
      output: r.output,
    })),
  };
}
