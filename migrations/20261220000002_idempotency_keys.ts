import type { Knex } from 'knex';

// Idempotency-Key per account and endpoint scope (spec 1 section 4.9).
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('idempotency_keys', (t) => {
    t.uuid('account_id').notNullable().references('accounts.id');
    t.text('scope').notNullable(); // images | audio | video
    t.text('key').notNullable();
    t.text('body_hash').notNullable();
    t.text('result_id'); // e.g. the video job id, once created
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['account_id', 'scope', 'key']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('idempotency_keys');
}
