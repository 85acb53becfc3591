import type { Knex } from 'knex';

// The keyed variant's request log is pruned by age (REQUEST_LOG_RETENTION_DAYS): the prune
// reads the oldest rows, which the (key_id, created_at) index cannot find.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('request_log', (t) => t.index(['created_at']));
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('request_log', (t) => t.dropIndex(['created_at']));
}
