import type { Knex } from 'knex';

// Billing cycles (issue 23, feature 4): `account new-cycle` starts a purchase cycle. The remaining
// balance carries over (no credits are lost or made), the cycle's credits and usage start again,
// and each cycle start is kept here so an account's totals can be traced back across cycles.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('account_cycles', (t) => {
    t.bigIncrements('id');
    t.uuid('account_id').notNullable().references('accounts.id').onDelete('CASCADE');
    t.timestamp('started_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    // the last cycle's totals when it ended
    t.decimal('previous_total_credits', 38, 12).notNullable();
    t.decimal('previous_total_usage', 38, 12).notNullable();
    // remaining balance carried into the new cycle, and credits granted with it
    t.decimal('carried_over', 38, 12).notNullable();
    t.decimal('granted', 38, 12).notNullable();
    t.index(['account_id', 'started_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('account_cycles');
}
