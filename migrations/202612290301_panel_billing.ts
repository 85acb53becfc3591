import type { Knex } from 'knex';

// Billing (spec 2 sections 2.8, 3; PANEL.md sections 3, 4): plans owned by an org and billing the
// orgs directly below it; which plan bills an org from which metered hour on (history rows, so a
// month shows both plans of a change); the metered facts, one row per hour and billed org (and per
// billed org's site and database), whose primary keys make a repeated hour a no-op; and the closed
// statements, one per org and month, immutable (a trigger refuses any change).
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('panel_billing_plans', (t) => {
    t.uuid('id').primary();
    t.uuid('owner_org_id').notNullable().references('id').inTable('panel_orgs').onDelete('CASCADE');
    t.text('name').notNullable();
    t.text('currency').notNullable();
    t.integer('minor_units').notNullable();
    t.decimal('base_price', 24, 6).notNullable();
    t.decimal('account_price', 24, 6).notNullable();
    // package id → price per account on it (decimal strings)
    t.jsonb('package_prices').notNullable().defaultTo('{}');
    t.text('rates_text').notNullable();
    t.jsonb('rates').notNullable();
    // a deleted plan stays readable for the metered hours that name it
    t.timestamp('deleted_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw('CREATE UNIQUE INDEX panel_billing_plans_owner_name ON panel_billing_plans (owner_org_id, lower(name)) WHERE deleted_at IS NULL');

  // plan_id null: not billed from effective_from on
  await knex.schema.createTable('panel_billing_assignments', (t) => {
    t.bigIncrements('id').primary();
    t.uuid('org_id').notNullable().references('id').inTable('panel_orgs').onDelete('CASCADE');
    t.uuid('plan_id').references('id').inTable('panel_billing_plans');
    t.timestamp('effective_from', { useTz: true }).notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['org_id', 'effective_from']);
    t.index(['plan_id']);
  });

  await knex.schema.createTable('panel_meter_hours', (t) => {
    t.timestamp('hour', { useTz: true }).primary();
    t.timestamp('recorded_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.integer('orgs').notNullable();
    t.integer('sites').notNullable();
    t.integer('databases').notNullable();
  });
  await knex.schema.createTable('panel_meter_orgs', (t) => {
    t.timestamp('hour', { useTz: true }).notNullable();
    t.uuid('org_id').notNullable();
    t.uuid('plan_id').notNullable();
    t.uuid('billed_by').notNullable();
    t.text('org_status').notNullable();
    // package id ('' for none) → customer accounts on it, this org included if it is one
    t.jsonb('accounts').notNullable();
    t.primary(['hour', 'org_id']);
    t.index(['org_id', 'hour']);
    t.index(['billed_by', 'hour']);
  });
  for (const [table, item] of [['panel_meter_sites', 'site_id'], ['panel_meter_databases', 'database_id']] as const) {
    await knex.schema.createTable(table, (t) => {
      t.timestamp('hour', { useTz: true }).notNullable();
      t.uuid('org_id').notNullable();
      t.uuid(item).notNullable();
      t.text('node_name').notNullable();
      t.text('region');
      t.text('physical_region');
      t.text('zone');
      t.text('cell');
      if (item === 'site_id') {
        t.text('status').notNullable();
        t.integer('quota_mb').notNullable();
      }
      t.primary(['hour', 'org_id', item]);
      t.index(['org_id', 'hour']);
    });
  }

  await knex.schema.createTable('panel_statements', (t) => {
    t.uuid('id').primary();
    // no foreign key: an issued statement outlives its org
    t.uuid('org_id').notNullable();
    t.text('period').notNullable();
    t.uuid('billed_by').notNullable();
    t.text('org_name').notNullable();
    t.text('org_status').notNullable();
    t.integer('metered_hours').notNullable();
    // the plans of the month with their hours, the rated lines, one total per currency
    t.jsonb('plans').notNullable();
    t.jsonb('lines').notNullable();
    t.jsonb('totals').notNullable();
    t.timestamp('closed_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.unique(['org_id', 'period']);
    t.index(['billed_by', 'period']);
  });
  await knex.raw(`
    CREATE FUNCTION panel_statements_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'a closed statement never changes'; END $$;
    CREATE TRIGGER panel_statements_immutable BEFORE UPDATE OR DELETE ON panel_statements
      FOR EACH ROW EXECUTE FUNCTION panel_statements_immutable();`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('panel_statements');
  await knex.raw('DROP FUNCTION panel_statements_immutable()');
  for (const t of ['panel_meter_databases', 'panel_meter_sites', 'panel_meter_orgs', 'panel_meter_hours', 'panel_billing_assignments', 'panel_billing_plans']) await knex.schema.dropTable(t);
}
