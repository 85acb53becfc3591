import type { Knex } from 'knex';

// Low-balance and spend events (issue 23, feature 5): webhook endpoints per account, and the
// deliveries settlement records in its own statement (`balance.low` when an account's balance
// crosses below its threshold, `key.spend_limit_reached` when a key's spend reaches its limit).
// A `account-webhook-<delivery id>` workflow delivers each, signed and retried.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('accounts', (t) => {
    t.decimal('low_balance_threshold', 38, 12);
    // false once balance.low fired, until the balance is at or above the threshold again
    t.boolean('low_balance_armed').notNullable().defaultTo(true);
    t.timestamp('low_balance_crossed_at', { useTz: true });
  });
  await knex.schema.alterTable('api_keys', (t) => t.timestamp('spend_limit_reached_at', { useTz: true }));
  await knex.schema.createTable('account_webhook_endpoints', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('account_id').notNullable().references('accounts.id').onDelete('CASCADE');
    t.text('url').notNullable();
    t.text('secret_sealed').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index('account_id');
  });
  await knex.schema.createTable('account_webhook_deliveries', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('endpoint_id').notNullable().references('account_webhook_endpoints.id').onDelete('CASCADE');
    t.text('event_type').notNullable();
    t.jsonb('payload').notNullable();
    t.text('status').notNullable().defaultTo('pending');
    t.integer('attempts').notNullable().defaultTo(0);
    t.integer('last_status_code');
    t.text('last_error');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    // handed to Temporal (null: not yet)
    t.timestamp('started_at', { useTz: true });
    t.timestamp('finished_at', { useTz: true });
    t.index('endpoint_id');
  });
  await knex.raw(`ALTER TABLE account_webhook_deliveries ADD CONSTRAINT account_webhook_deliveries_status CHECK (status IN ('pending','delivered','failed'))`);
  await knex.raw(`CREATE INDEX account_webhook_deliveries_unstarted ON account_webhook_deliveries (created_at) WHERE started_at IS NULL`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('account_webhook_deliveries');
  await knex.schema.dropTable('account_webhook_endpoints');
  await knex.schema.alterTable('api_keys', (t) => t.dropColumn('spend_limit_reached_at'));
  await knex.schema.alterTable('accounts', (t) => {
    for (const c of ['low_balance_threshold', 'low_balance_armed', 'low_balance_crossed_at']) t.dropColumn(c);
  });
}
