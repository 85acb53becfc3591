import type { Knex } from 'knex';

// Liveness, not age, decides abandonment: every API process keeps a heartbeat row, and each hold
// records the process that took it. The sweeper releases a hold without an outcome only when its
// process is dead (no heartbeat for a while), never because a request (a long stream) is old.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('api_processes', (t) => {
    t.uuid('id').primary();
    t.text('host').notNullable();
    t.integer('pid').notNullable();
    t.timestamp('started_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('heartbeat_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.schema.alterTable('reservations', (t) => t.uuid('api_process_id'));
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('reservations', (t) => t.dropColumn('api_process_id'));
  await knex.schema.dropTable('api_processes');
}
