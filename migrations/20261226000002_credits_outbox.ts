import type { Knex } from 'knex';

// The outcome outbox: the API records each request's outcome on its reservation row (durable,
// off the client's path); the settlement relay claims recorded outcomes in batches and names the
// workflow that settles each (`settlement-<first request id>`, or `reservation-<id>` for an
// uncertain or late-cost outcome), so a claim whose workflow did not start is started again.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('reservations', (t) => {
    t.jsonb('report');
    t.timestamp('reported_at', { useTz: true });
    t.text('settlement_workflow_id');
    t.timestamp('settlement_claimed_at', { useTz: true });
  });
  await knex.raw(`CREATE INDEX reservations_outbox ON reservations (reported_at) WHERE status = 'held' AND reported_at IS NOT NULL AND settlement_workflow_id IS NULL`);
  await knex.raw(`CREATE INDEX reservations_claimed ON reservations (settlement_claimed_at) WHERE status = 'held' AND settlement_workflow_id IS NOT NULL`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX reservations_claimed');
  await knex.raw('DROP INDEX reservations_outbox');
  await knex.schema.alterTable('reservations', (t) => {
    t.dropColumn('settlement_claimed_at');
    t.dropColumn('settlement_workflow_id');
    t.dropColumn('reported_at');
    t.dropColumn('report');
  });
}
