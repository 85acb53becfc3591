import type { Knex } from 'knex';

// Invitations of the gateway dashboard: an owner invites an email with a role; the link carries a
// random token (only its SHA-256 is stored), usable once before it expires, to choose a password.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('dashboard_invitations', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('account_id').notNullable().references('id').inTable('accounts').onDelete('CASCADE');
    t.text('email').notNullable(); // lower-cased
    t.text('role').notNullable().checkIn(['owner', 'member'], 'dashboard_invitations_role');
    t.text('token_hash').notNullable().unique();
    t.uuid('invited_by').references('id').inTable('dashboard_users').onDelete('SET NULL');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('accepted_at', { useTz: true });
    t.timestamp('cancelled_at', { useTz: true });
    t.index(['account_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('dashboard_invitations');
}
