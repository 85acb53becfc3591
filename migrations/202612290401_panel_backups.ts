import type { Knex } from 'knex';

// Backups (spec 2 sections 2.6, 4.1 /v1/backups/*, 4.2 "Backups at platform level", 4.4.5-4.4.6, 8):
// - panel_restore_points: one per backup of a site, on the site's node (off-site copies are
//   PLANNED). `pending` while its node operation runs; `ready` once the node wrote the archive
//   (file relative to the node's -backup-dir, its SHA-256 and size); `failed` with the error. No
//   foreign key to the site: restore points outlive a deleted site.
// - panel_backup_schedules: per site, daily or hourly, keep the newest N (a Temporal schedule runs
//   each due backup as a node operation).
// - panel_inspections: restore points extracted on the hosting node for 24 hours (a durable timer
//   removes them; "Remove now" earlier).
// - panel_restores: every restore (into an account, or of a deleted site from its archive) with
//   its duration, for the recovery metrics.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('panel_restore_points', (t) => {
    t.uuid('id').primary();
    t.uuid('site_id').notNullable();
    t.uuid('org_id').notNullable().references('id').inTable('panel_orgs');
    t.text('node_name').notNullable().references('name').inTable('panel_nodes');
    t.text('domain').notNullable();
    t.text('trigger').notNullable().checkIn(['manual', 'scheduled'], 'panel_restore_points_trigger');
    t.text('status').notNullable().defaultTo('pending').checkIn(['pending', 'ready', 'failed', 'deleting'], 'panel_restore_points_status');
    t.specificType('databases', 'text[]').notNullable().defaultTo('{}');
    t.text('file');
    t.text('sha256');
    t.bigInteger('bytes');
    t.text('error');
    t.uuid('op_id');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('finished_at', { useTz: true });
    t.index(['site_id', 'created_at']);
    t.index(['status']);
  });
  await knex.schema.createTable('panel_backup_schedules', (t) => {
    t.uuid('site_id').primary().references('id').inTable('panel_sites').onDelete('CASCADE');
    t.text('every').notNullable().checkIn(['hourly', 'daily'], 'panel_backup_schedules_every');
    t.integer('keep').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.schema.createTable('panel_inspections', (t) => {
    t.uuid('id').primary();
    t.uuid('restore_point_id').notNullable().references('id').inTable('panel_restore_points');
    t.text('path');
    t.text('status').notNullable().defaultTo('extracting').checkIn(['extracting', 'ready', 'removed', 'failed'], 'panel_inspections_status');
    t.text('error');
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('removed_at', { useTz: true });
    t.index(['status']);
  });
  await knex.schema.createTable('panel_restores', (t) => {
    t.uuid('id').primary();
    t.text('kind').notNullable().checkIn(['into_account', 'site_archive'], 'panel_restores_kind');
    t.uuid('restore_point_id');
    t.uuid('site_id').notNullable();
    t.uuid('org_id');
    t.text('status').notNullable().defaultTo('running').checkIn(['running', 'done', 'failed'], 'panel_restores_status');
    t.text('error');
    t.timestamp('started_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('finished_at', { useTz: true });
    t.index(['started_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('panel_restores');
  await knex.schema.dropTable('panel_inspections');
  await knex.schema.dropTable('panel_backup_schedules');
  await knex.schema.dropTable('panel_restore_points');
}
