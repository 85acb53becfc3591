import type { Knex } from 'knex';

// A provider kind's own settings (issue 36): Azure OpenAI's API version, say. A JSON object whose
// keys each kind validates when the provider is set (services/catalog/entries.ts); `{}` for kinds without any.

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('providers', (t) => t.jsonb('settings').notNullable().defaultTo('{}'));
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('providers', (t) => t.dropColumn('settings'));
}
