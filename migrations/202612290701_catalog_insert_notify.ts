import type { Knex } from 'knex';

// A model or provider added while API processes run must reach their catalogs: the catalog
// triggers fired on UPDATE and DELETE only, so a new row (an INSERT, also the insert branch of
// `model set`'s upsert) stayed unknown until a restart (issue 23, defect 1).
const TABLES = ['models', 'providers'];

export async function up(knex: Knex): Promise<void> {
  for (const table of TABLES) {
    await knex.raw(`DROP TRIGGER ${table}_cache ON ${table}`);
    await knex.raw(`CREATE TRIGGER ${table}_cache AFTER INSERT OR UPDATE OR DELETE ON ${table}
      FOR EACH ROW EXECUTE FUNCTION notify_cache_change()`);
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const table of TABLES) {
    await knex.raw(`DROP TRIGGER ${table}_cache ON ${table}`);
    await knex.raw(`CREATE TRIGGER ${table}_cache AFTER UPDATE OR DELETE ON ${table}
      FOR EACH ROW EXECUTE FUNCTION notify_cache_change()`);
  }
}
