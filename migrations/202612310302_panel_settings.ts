import type { Knex } from 'knex';

// Platform-wide settings (PANEL.md section 2): one row per setting, read by every panel process on
// the next request; a command-line flag only seeds a missing row. First: the roles that must use
// two-factor sign-in (issue 32 item 5).
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('panel_settings', (t) => {
    t.text('key').primary();
    t.jsonb('value').notNullable();
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.text('updated_by').notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('panel_settings');
}
