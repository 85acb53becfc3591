import type { Knex } from 'knex';

// DNS zones of customer accounts (spec 2 section 2.3, a counted item). The records are the panel's
// record; the hosting node's BIND zone file is rendered from them.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('panel_dns_zones', (t) => {
    t.uuid('id').primary();
    t.uuid('org_id').notNullable().references('id').inTable('panel_orgs');
    t.text('name').notNullable().unique();
    t.jsonb('records').notNullable().defaultTo('[]');
    t.bigInteger('serial').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['org_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('panel_dns_zones');
}
