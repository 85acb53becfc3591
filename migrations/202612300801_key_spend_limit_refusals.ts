import type { Knex } from 'knex';

// key.spend_limit_reached also fires the first time a request is refused for a key's spend limit
// (issue 33 item 8): the limit in force then is kept, so the event fires once per limit value and
// the dashboard shows the key as "limit reached" while that limit stands.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('api_keys', (t) => t.decimal('spend_limit_refused', 38, 12));
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('api_keys', (t) => t.dropColumn('spend_limit_refused'));
}
