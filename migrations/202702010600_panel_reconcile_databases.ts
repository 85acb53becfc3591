import type { Knex } from 'knex';

// What the latest reconciliation pass found of each customer database on the hosting node (issue 32
// item 3): `missing` when its MariaDB database or user is gone, `in_sync` otherwise; what a remediate
// pass did about it (recreated empty, with its user and grants). One row per database, replaced by
// every pass; `found` is the verdict before remediation, `status` the one after.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('panel_reconcile_databases', (t) => {
    t.uuid('database_id').primary().references('id').inTable('panel_databases').onDelete('CASCADE');
    t.text('found').notNullable().checkIn(['in_sync', 'missing', 'pending'], 'panel_reconcile_databases_found');
    t.text('status').notNullable().checkIn(['in_sync', 'missing', 'pending'], 'panel_reconcile_databases_status');
    t.jsonb('findings').notNullable().defaultTo('[]');
    t.jsonb('remediation');
    t.text('last_pass_id').notNullable();
    t.timestamp('checked_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['last_pass_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('panel_reconcile_databases');
}
