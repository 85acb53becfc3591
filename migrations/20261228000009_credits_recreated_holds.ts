import type { Knex } from 'knex';

// A hold commits without waiting for the disk; a PostgreSQL crash may lose it, and the outcome
// write then writes it again with the outcome (services/credits/hold-statement.ts). When that
// happened is kept on the row, for operators and the fault tests.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('reservations', (t) => t.timestamp('hold_recreated_at', { useTz: true }));
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('reservations', (t) => t.dropColumn('hold_recreated_at'));
}
