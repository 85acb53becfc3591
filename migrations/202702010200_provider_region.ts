import type { Knex } from 'knex';

// The AWS region a `bedrock` provider signs its calls for (issue 36): a setting of the provider,
// not a secret; null for the kinds that have none. Its credentials are its api_keys.

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('providers', (t) => t.text('region'));
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('providers', (t) => t.dropColumn('region'));
}
