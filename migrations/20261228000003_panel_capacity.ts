import type { Knex } from 'knex';

// Declared capacity of the cluster (spec 2 section 4.2 "Declare capacity"): one row while declared;
// no row means the check is off.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('panel_capacity', (t) => {
    t.integer('id').primary().checkIn(['1'], 'panel_capacity_singleton');
    t.bigInteger('cpu_percent');
    t.bigInteger('memory_mb');
    t.bigInteger('disk_mb');
    t.integer('overcommit_percent').notNullable().defaultTo(100);
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('panel_capacity');
}
