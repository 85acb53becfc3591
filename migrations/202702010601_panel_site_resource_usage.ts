import type { Knex } from 'knex';

// What each site's control group used (issue 34 §1: usage per site from the groups feeds metering
// and the usage page). The nodes report counters since each group was made; the panel keeps the
// latest reading per site (panel_site_counters) and adds what grew since to the hour it was read in
// (panel_site_usage_hours): CPU microseconds and I/O bytes summed, memory peak and processes as the
// hour's highest. Integers throughout. Each metered site-hour copies its hour's usage.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('panel_site_counters', (t) => {
    t.uuid('site_id').primary().references('id').inTable('panel_sites').onDelete('CASCADE');
    t.bigInteger('cpu_us').notNullable();
    t.bigInteger('io_bytes').notNullable();
    t.bigInteger('memory_peak_bytes').notNullable();
    t.timestamp('at', { useTz: true }).notNullable();
  });
  await knex.schema.createTable('panel_site_usage_hours', (t) => {
    t.uuid('site_id').notNullable().references('id').inTable('panel_sites').onDelete('CASCADE');
    t.timestamp('hour', { useTz: true }).notNullable();
    t.bigInteger('cpu_us').notNullable().defaultTo(0);
    t.bigInteger('io_bytes').notNullable().defaultTo(0);
    t.bigInteger('memory_peak_bytes').notNullable().defaultTo(0);
    t.integer('processes_max').notNullable().defaultTo(0);
    t.primary(['site_id', 'hour']);
  });
  await knex.schema.alterTable('panel_meter_sites', (t) => {
    t.bigInteger('cpu_us').notNullable().defaultTo(0);
    t.bigInteger('io_bytes').notNullable().defaultTo(0);
    t.bigInteger('memory_peak_bytes').notNullable().defaultTo(0);
    t.integer('processes_max').notNullable().defaultTo(0);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('panel_meter_sites', (t) => {
    for (const c of ['cpu_us', 'io_bytes', 'memory_peak_bytes', 'processes_max']) t.dropColumn(c);
  });
  await knex.schema.dropTable('panel_site_usage_hours');
  await knex.schema.dropTable('panel_site_counters');
}
