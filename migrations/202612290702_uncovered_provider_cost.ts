import type { Knex } from 'knex';

// A provider cost above the hold is charged up to the hold only (billing_source
// provider_cost_capped); the part not charged is kept here so the operator can reconcile the
// accounts' charges with the provider's bill (`admin report uncovered`, issue 23 defect 3).
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('reservations', (t) => t.decimal('uncovered_credits', 38, 12).notNullable().defaultTo(0));
  await knex.raw(`CREATE INDEX reservations_uncovered ON reservations (settled_at) WHERE uncovered_credits > 0`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX reservations_uncovered');
  await knex.schema.alterTable('reservations', (t) => t.dropColumn('uncovered_credits'));
}
