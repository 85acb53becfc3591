import type { Knex } from 'knex';

// The legacy import's certificates step (spec 2 section 4.4.4: after websites, before databases):
// each certificate of the archive whose key matches is attached to the imported website it covers.
const WITHOUT = ['dns_zones', 'websites', 'databases', 'site_files', 'sql_loads'];
const WITH = ['dns_zones', 'websites', 'certificates', 'databases', 'site_files', 'sql_loads'];

const steps = (list: string[]) => list.map((s) => `'${s}'`).join(', ');

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`ALTER TABLE panel_import_items DROP CONSTRAINT panel_import_items_step, ADD CONSTRAINT panel_import_items_step CHECK (step IN (${steps(WITH)}))`);
}

export async function down(knex: Knex): Promise<void> {
  await knex('panel_import_items').where({ step: 'certificates' }).delete();
  await knex.raw(`ALTER TABLE panel_import_items DROP CONSTRAINT panel_import_items_step, ADD CONSTRAINT panel_import_items_step CHECK (step IN (${steps(WITHOUT)}))`);
}
