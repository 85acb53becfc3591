import type { Knex } from 'knex';

// SFTP keys of a site (issue 34 §2): at most 20 OpenSSH public keys, each with its label, type,
// bits, SHA-256 fingerprint and when it was added. Kept on the site row (like aliases and cron)
// so the spec its node applies is rendered from the row alone.

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('panel_sites', (t) => t.jsonb('sftp_keys').notNullable().defaultTo('[]'));
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('panel_sites', (t) => t.dropColumn('sftp_keys'));
}
