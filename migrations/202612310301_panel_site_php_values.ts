import type { Knex } from 'knex';

// Per-site PHP values (issue 32 item 7): memory_limit, upload_max_filesize, max_execution_time … set
// by the site's owner within the operator's bounds (domain/panel/php-values.ts); empty: PHP's defaults.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('panel_sites', (t) => t.jsonb('php_values').notNullable().defaultTo('{}'));
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('panel_sites', (t) => t.dropColumn('php_values'));
}
