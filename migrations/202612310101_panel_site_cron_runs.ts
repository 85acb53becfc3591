import type { Knex } from 'knex';

// The last runs of each site's cron lines as its node reports them with heartbeats (issue 32 item 1):
// keyed by node and the node's run id, so a report sent twice changes nothing; the rows go with the site.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('panel_site_cron_runs', (t) => {
    t.text('node_name').notNullable();
    t.text('id').notNullable();
    t.uuid('site_id').notNullable().references('panel_sites.id').onDelete('CASCADE');
    t.text('line').notNullable();
    t.timestamp('started_at', { useTz: true }).notNullable();
    t.timestamp('finished_at', { useTz: true });
    t.text('status').notNullable();
    t.integer('exit_code');
    t.text('output').notNullable();
    t.text('run_user').notNullable();
    t.primary(['node_name', 'id']);
    t.index(['site_id', 'started_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('panel_site_cron_runs');
}
