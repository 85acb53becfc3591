import type { Knex } from 'knex';

// Retries per route (issue 36 part 3): how often a route is tried again before the request moves
// on, the base of its exponential backoff, and the failures that trigger a retry ('connect' for a
// connection that failed or timed out before the provider's headers, else HTTP statuses).
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('model_routes', (t) => {
    t.integer('retries').notNullable().defaultTo(0);
    t.integer('retry_backoff_ms').notNullable().defaultTo(250);
    t.specificType('retry_on', 'text[]').notNullable().defaultTo(knex.raw(`'{connect,429,500,502,503,504}'::text[]`));
  });
  await knex.raw('ALTER TABLE model_routes ADD CONSTRAINT model_routes_retries CHECK (retries BETWEEN 0 AND 10), ADD CONSTRAINT model_routes_retry_backoff CHECK (retry_backoff_ms BETWEEN 0 AND 60000)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('model_routes', (t) => {
    t.dropColumn('retry_on');
    t.dropColumn('retry_backoff_ms');
    t.dropColumn('retries');
  });
}
