import type { Knex } from 'knex';

// Media models (images, audio, video) and their billing: per-model attributes and unit prices,
// holds owned by a job workflow, and what the provider measured.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('models', (t) => {
    // capability-specific attributes and unit pricing in credits (spec 1 section 2.8), e.g.
    // { supported_parameters, max_images, pricing: { per_image: "0.04" } }
    t.jsonb('details').notNullable().defaultTo('{}');
  });
  await knex.schema.alterTable('reservations', (t) => {
    // the workflow that resolves this hold, when it is not reservation-<id> (e.g. video-<job_id>)
    t.text('owner_workflow_id');
    t.text('modality'); // text | image | audio | video
    t.jsonb('usage_details'); // what the provider measured: images, seconds, characters…
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('reservations', (t) => {
    t.dropColumn('owner_workflow_id');
    t.dropColumn('modality');
    t.dropColumn('usage_details');
  });
  await knex.schema.alterTable('models', (t) => t.dropColumn('details'));
}
