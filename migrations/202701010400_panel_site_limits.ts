import type { Knex } from 'knex';

// Limits that bind on the node (issue 34 §1): each site carries its account's effective CPU, memory,
// process and disk I/O limits, which its node writes into the site's control group. Kept on the
// site row (like php_workers) so the spec a node applies is rendered from the row alone; a change
// of limits or package above rewrites the rows below and queues their node operations.
const NONE = { cpuPercent: null, memoryMb: null, processes: null, diskIoBps: null, iops: null };

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('panel_sites', (t) => t.jsonb('limits').notNullable().defaultTo(JSON.stringify(NONE)));
  // existing sites: the tightest value along each org's path (own limits, or its package's)
  await knex.raw(`
    UPDATE panel_sites s SET limits = l.limits FROM (
      SELECT o.id AS org_id, jsonb_build_object(
        'cpuPercent', min((x.own->>'cpu_percent')::bigint), 'memoryMb', min((x.own->>'memory_mb')::bigint),
        'processes', min((x.own->>'processes')::bigint), 'diskIoBps', min((x.own->>'disk_io_bps')::bigint),
        'iops', min((x.own->>'iops')::bigint)) AS limits
      FROM panel_orgs o
      JOIN LATERAL (
        SELECT CASE WHEN a.package_id IS NULL THEN a.limits ELSE coalesce(p.limits, '{}'::jsonb) END AS own
        FROM panel_orgs a LEFT JOIN panel_packages p ON p.id = a.package_id
        WHERE o.path LIKE a.path || '%'
      ) x ON true
      GROUP BY o.id
    ) l WHERE l.org_id = s.org_id`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('panel_sites', (t) => t.dropColumn('limits'));
}
