import type { Knex } from 'knex';

// Routing with fallback (issue 23, feature 1): a model's upstream routes, tried by priority
// (lowest first; weights share the traffic of equal priorities). A model's provider and upstream
// model become its first route, so existing models behave as before; `models.provider_id` and
// `upstream_model` keep mirroring the top route for the endpoints that use one route (media,
// embeddings). The route a request used, and its attempts, are kept on its reservation.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('model_routes', (t) => {
    t.bigIncrements('id');
    t.text('model_id').notNullable().references('models.id').onDelete('CASCADE');
    t.text('provider_id').notNullable().references('providers.id');
    t.text('upstream_model').notNullable();
    t.integer('priority').notNullable().defaultTo(0);
    t.integer('weight').notNullable().defaultTo(1);
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.unique(['model_id', 'provider_id', 'upstream_model']);
  });
  await knex.raw('ALTER TABLE model_routes ADD CONSTRAINT model_routes_weight CHECK (weight BETWEEN 1 AND 1000), ADD CONSTRAINT model_routes_priority CHECK (priority BETWEEN 0 AND 1000)');
  await knex.raw(`INSERT INTO model_routes (model_id, provider_id, upstream_model) SELECT id, provider_id, upstream_model FROM models`);
  await knex.raw(`CREATE TRIGGER model_routes_cache AFTER INSERT OR UPDATE OR DELETE ON model_routes
    FOR EACH ROW EXECUTE FUNCTION notify_cache_change()`);
  await knex.schema.alterTable('reservations', (t) => t.jsonb('route'));
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('reservations', (t) => t.dropColumn('route'));
  await knex.schema.dropTable('model_routes');
}
