import type { Knex } from 'knex';

// What a node's agent reports beyond the columns of 20261228000001_panel_nodes (spec 2 section 2.6):
// - agent_reconnects_seen: the reconnect count the running agent process last reported (it counts
//   from 0 in every process), so that panel_nodes.agent_reconnects adds up over restarts;
// - site_usage / site_usage_at: the latest disk and inode use per site docroot on the node
//   (SiteUsage[] of domain/panel/node-ops.ts), for the soft quotas of spec 2.3 rule 3.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('panel_nodes', (t) => {
    t.integer('agent_reconnects_seen').notNullable().defaultTo(0);
    t.jsonb('site_usage');
    t.timestamp('site_usage_at', { useTz: true });
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('panel_nodes', (t) => {
    t.dropColumn('site_usage_at');
    t.dropColumn('site_usage');
    t.dropColumn('agent_reconnects_seen');
  });
}
