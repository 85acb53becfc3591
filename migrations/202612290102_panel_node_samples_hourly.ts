import type { Knex } from 'knex';

// Downsampled node metrics (issue 17 item 1): samples older than 2 days are rolled up into one row
// per node and hour (the number of samples, their averages and the highest CPU), kept 14 days.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('panel_node_samples_hourly', (t) => {
    t.text('node_name').notNullable().references('name').inTable('panel_nodes').onDelete('CASCADE');
    t.timestamp('hour', { useTz: true }).notNullable();
    t.integer('samples').notNullable();
    t.double('cpu_percent');
    t.double('cpu_percent_max');
    t.double('load1');
    t.double('load5');
    t.double('load15');
    t.double('memory_used_percent');
    t.double('rootfs_used_percent');
    t.primary(['node_name', 'hour']);
    t.index(['hour']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('panel_node_samples_hourly');
}
