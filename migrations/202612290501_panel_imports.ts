import type { Knex } from 'knex';

// Legacy account imports (spec 2 sections 3 "import run", 4.4.4): one row per uploaded archive with
// its plan, compatibility report and quota check, and one row per item of the plan in the spec's
// order. An item is recorded done before the next starts, so a run started again skips it; items
// that existed before the import are recorded as pre-existing and left untouched. No password is
// ever stored here.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('panel_imports', (t) => {
    t.uuid('id').primary();
    t.uuid('org_id').notNullable().references('id').inTable('panel_orgs');
    t.uuid('created_by').notNullable();
    t.text('archive_name').notNullable();
    // the uploaded copy while the import needs it; null once deleted (done or refused)
    t.text('archive_path');
    // refused: unsafe or over quota (copy deleted); ready: checked, not run; running; stopped: a
    // run ended early (a failed item), run again to continue; done
    t.text('status').notNullable().checkIn(['refused', 'ready', 'running', 'stopped', 'done'], 'panel_imports_status');
    t.jsonb('plan').notNullable();
    t.jsonb('report').notNullable();
    t.jsonb('quota').notNullable();
    t.text('error');
    t.integer('runs').notNullable().defaultTo(0);
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['org_id', 'created_at']);
  });
  await knex.schema.createTable('panel_import_items', (t) => {
    t.uuid('import_id').notNullable().references('id').inTable('panel_imports').onDelete('CASCADE');
    t.integer('seq').notNullable();
    t.text('step').notNullable().checkIn(['dns_zones', 'websites', 'databases', 'site_files', 'sql_loads'], 'panel_import_items_step');
    t.text('name').notNullable();
    t.text('state').notNullable().defaultTo('pending').checkIn(['pending', 'running', 'done', 'pre_existing', 'failed'], 'panel_import_items_state');
    t.jsonb('detail').notNullable().defaultTo('{}');
    t.text('error');
    t.integer('attempts').notNullable().defaultTo(0);
    t.timestamp('done_at', { useTz: true });
    t.primary(['import_id', 'seq']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('panel_import_items');
  await knex.schema.dropTable('panel_imports');
}
