import type { Knex } from 'knex';

// Reconciliation of the panel's hosting node (spec 2 sections 2.6, 3, 4.4.3; PANEL.md section 4):
// - panel_reconcile_passes: one row per pass (`reconcile-<pass_id>`); at most one is running
//   (a partial unique index), so "run now" while a pass runs returns that pass;
// - panel_reconcile_results: each site's verdict in a pass. A row in phase `remediating` is
//   written before the node is rewritten and turned `done` after, so a pass resumed after a crash
//   never rewrites a site it already finished;
// - panel_reconcile_sites: each site's latest view and its policy (observe unless confirmed);
// - panel_reconcile_events: what happened to each site (status changes, overwrites, policy);
// - panel_reconcile_confirmations: single-use tokens of reviewed policy changes.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('panel_reconcile_passes', (t) => {
    t.text('id').primary();
    t.text('mode').notNullable().checkIn(['dry-run', 'on'], 'panel_reconcile_passes_mode');
    t.text('trigger').notNullable().checkIn(['schedule', 'manual'], 'panel_reconcile_passes_trigger');
    t.text('status').notNullable().defaultTo('running').checkIn(['running', 'done', 'failed'], 'panel_reconcile_passes_status');
    t.timestamp('started_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('finished_at', { useTz: true });
    t.integer('sites').notNullable().defaultTo(0);
    t.jsonb('counts');
    t.jsonb('orphans');
    t.integer('remediated').notNullable().defaultTo(0);
    t.text('error');
    t.index(['started_at']);
  });
  await knex.raw(`CREATE UNIQUE INDEX panel_reconcile_passes_one_running ON panel_reconcile_passes ((true)) WHERE status = 'running'`);

  await knex.schema.createTable('panel_reconcile_results', (t) => {
    t.text('pass_id').notNullable().references('id').inTable('panel_reconcile_passes').onDelete('CASCADE');
    t.uuid('site_id').notNullable();
    t.text('phase').notNullable().checkIn(['remediating', 'done'], 'panel_reconcile_results_phase');
    t.text('status').notNullable();
    t.jsonb('findings').notNullable();
    t.jsonb('remediation');
    t.timestamp('recorded_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['pass_id', 'site_id']);
  });

  await knex.schema.createTable('panel_reconcile_sites', (t) => {
    t.uuid('site_id').primary().references('id').inTable('panel_sites').onDelete('CASCADE');
    t.text('policy').notNullable().defaultTo('observe').checkIn(['observe', 'remediate'], 'panel_reconcile_sites_policy');
    t.text('status');
    t.integer('panel_generation');
    t.integer('node_generation');
    t.text('expected_digest');
    t.text('node_digest');
    t.jsonb('findings').notNullable().defaultTo('[]');
    t.text('last_pass_id');
    t.timestamp('checked_at', { useTz: true });
    t.index(['status']);
  });

  await knex.schema.createTable('panel_reconcile_events', (t) => {
    t.bigIncrements('id');
    t.uuid('site_id').notNullable();
    t.text('pass_id');
    t.text('kind').notNullable();
    t.jsonb('detail').notNullable();
    t.timestamp('at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['site_id', 'id']);
  });

  await knex.schema.createTable('panel_reconcile_confirmations', (t) => {
    t.text('token_hash').primary();
    t.uuid('site_id').notNullable().references('id').inTable('panel_sites').onDelete('CASCADE');
    t.text('policy').notNullable();
    t.uuid('login_id').notNullable();
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('used_at', { useTz: true });
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('panel_reconcile_confirmations');
  await knex.schema.dropTable('panel_reconcile_events');
  await knex.schema.dropTable('panel_reconcile_sites');
  await knex.schema.dropTable('panel_reconcile_results');
  await knex.schema.dropTable('panel_reconcile_passes');
}
