import type { Knex } from 'knex';

// Video jobs (spec 1 sections 2.7, 3.1): one row per job, moved only by its workflow
// (video-<id>), and one event row per state change. The gateway stores no video bytes.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('video_jobs', (t) => {
    t.text('id').primary(); // gen-vid-<digits>-<token>
    t.uuid('account_id').notNullable().references('accounts.id');
    t.uuid('key_id').notNullable();
    t.uuid('reservation_id').notNullable().references('reservations.id');
    t.text('model').notNullable();
    t.text('provider_id').notNullable();
    t.text('upstream_id'); // the provider's job id, once the provider accepted the create
    t.text('status').notNullable().defaultTo('pending'); // pending | in_progress | completed | failed | cancelled | expired
    t.text('error');
    t.integer('duration').notNullable();
    t.text('resolution').notNullable();
    t.integer('content_count').notNullable().defaultTo(1);
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('finished_at', { useTz: true });
    t.index(['account_id', 'created_at']);
  });
  await knex.schema.createTable('video_job_events', (t) => {
    t.bigIncrements('id');
    t.text('job_id').notNullable().references('video_jobs.id');
    t.text('status').notNullable();
    t.text('error');
    t.timestamp('at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['job_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('video_job_events');
  await knex.schema.dropTableIfExists('video_jobs');
}
