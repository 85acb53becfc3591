import type { Knex } from 'knex';

// Suspension of an org reaches its nodes (issue 32 item 2): a site below a suspended org serves the
// suspended page (org_suspended, kept apart from the site's own `suspended`), and a database below
// one has its user locked (ACCOUNT LOCK). Reactivation clears only these marks, so a site suspended
// on its own stays suspended.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('panel_sites', (t) => t.boolean('org_suspended').notNullable().defaultTo(false));
  await knex.schema.alterTable('panel_databases', (t) => t.boolean('locked').notNullable().defaultTo(false));
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('panel_sites', (t) => t.dropColumn('org_suspended'));
  await knex.schema.alterTable('panel_databases', (t) => t.dropColumn('locked'));
}
