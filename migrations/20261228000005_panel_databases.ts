import type { Knex } from 'knex';

// Customer databases (spec 2 sections 2.3 and 2.6: a counted item, `databases`): one MariaDB
// database and its own user on a node with the `db` role. The panel keeps no password: the one
// generated at creation is returned once and travels to the node inside the node operation, whose
// row loses it when the operation ends (services/panel/nodes/nodes.ts). A name and a user are unique per
// node (one MariaDB server per node).
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('panel_databases', (t) => {
    t.uuid('id').primary();
    t.uuid('org_id').notNullable().references('id').inTable('panel_orgs');
    t.text('node_name').notNullable().references('name').inTable('panel_nodes');
    t.text('name').notNullable();
    t.text('db_user').notNullable();
    // pending: an operation for its node is under way; active: created on the node; failed: the
    // node refused or failed the last operation (or never answered in time)
    t.text('status').notNullable().defaultTo('pending').checkIn(['pending', 'active', 'failed'], 'panel_databases_status');
    // a delete is under way: the row goes once the node dropped the database
    t.boolean('deleting').notNullable().defaultTo(false);
    t.text('error');
    t.uuid('last_op_id');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.unique(['node_name', 'name'], { indexName: 'panel_databases_node_name_unique' });
    t.unique(['node_name', 'db_user'], { indexName: 'panel_databases_node_user_unique' });
    t.index(['org_id', 'name']);
    t.index(['status', 'updated_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('panel_databases');
}
