import type { Knex } from 'knex';

// Websites of customer accounts and where they run (spec 2 sections 2.6, 3, 4.4.1-4.4.2): one row
// per site with the panel's generation of its configuration and the one its node last applied,
// and one row per domain name (the site's domain and every alias), so that a domain is unique
// across the platform by a primary key rather than by a check that races.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('panel_sites', (t) => {
    t.uuid('id').primary();
    t.uuid('org_id').notNullable().references('id').inTable('panel_orgs');
    t.text('domain').notNullable().unique();
    t.specificType('aliases', 'text[]').notNullable().defaultTo('{}');
    // null: a static site (no PHP pool)
    t.text('php_version');
    t.specificType('cron', 'text[]').notNullable().defaultTo('{}');
    t.text('node_name').notNullable().references('name').inTable('panel_nodes');
    // pending: an operation for its node is under way; failed: the node refused or failed it (or
    // never answered in time); active / suspended: the node applied the latest generation.
    t.text('status').notNullable().defaultTo('pending').checkIn(['pending', 'active', 'suspended', 'failed'], 'panel_sites_status');
    // what the panel wants: suspended or not, and whether a delete is under way
    t.boolean('suspended').notNullable().defaultTo(false);
    t.boolean('deleting').notNullable().defaultTo(false);
    // the site's disk quota (soft, spec 2.3 rule 3): counted against disk_mb of every level above
    t.integer('quota_mb').notNullable();
    t.integer('php_workers');
    // operator PHP settings (php.admin): nothing inside the website overrides them
    t.boolean('allow_url_fopen').notNullable().defaultTo(false);
    t.specificType('disabled_functions', 'text[]').notNullable().defaultTo('{}');
    t.integer('generation').notNullable().defaultTo(1);
    t.integer('applied_generation').notNullable().defaultTo(0);
    // why the site is on its node, as decided at creation (GET /v1/sites/{id}/placement)
    t.jsonb('placement').notNullable();
    t.text('error');
    t.uuid('last_op_id');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['org_id', 'domain']);
    t.index(['node_name']);
  });

  await knex.schema.createTable('panel_domains', (t) => {
    t.text('domain').primary();
    t.uuid('site_id').notNullable().references('id').inTable('panel_sites').onDelete('CASCADE');
    t.index(['site_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('panel_domains');
  await knex.schema.dropTable('panel_sites');
}
