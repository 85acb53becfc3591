import type { Knex } from 'knex';

// A restore point keeps the site's operator PHP settings (allow_url_fopen, disabled_functions) as
// they were when it was taken, so a restore into another account carries them (issue 32 item 9).
// Older restore points have none: their restore takes the source site's current settings.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('panel_restore_points', (t) => t.jsonb('php_settings'));
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('panel_restore_points', (t) => t.dropColumn('php_settings'));
}
