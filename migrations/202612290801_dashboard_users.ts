import type { Knex } from 'knex';

// The gateway dashboard's users (account owners and members who sign in with a password and an
// optional TOTP code), their server-side sessions and the sign-in failure counts that throttle
// password guessing per email and per client IP.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('dashboard_users', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('account_id').notNullable().references('id').inTable('accounts').onDelete('CASCADE');
    t.text('email').notNullable(); // lower-cased
    t.text('password_hash').notNullable(); // argon2id
    t.text('role').notNullable().defaultTo('owner').checkIn(['owner', 'member'], 'dashboard_users_role');
    t.text('totp_secret_sealed'); // null: no second factor
    t.text('totp_pending_sealed'); // an enrolment begun, not yet confirmed with a code
    t.bigInteger('totp_last_step'); // a TOTP code is accepted once
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('last_sign_in_at', { useTz: true });
    t.unique(['email']);
    t.index(['account_id']);
  });

  // The cookie holds a random token; only its SHA-256 is stored. The CSRF token is per session.
  await knex.schema.createTable('dashboard_sessions', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.text('token_hash').notNullable().unique();
    t.uuid('user_id').notNullable().references('id').inTable('dashboard_users').onDelete('CASCADE');
    t.text('csrf_token').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.index(['user_id']);
  });

  await knex.schema.createTable('dashboard_signin_failures', (t) => {
    t.text('scope').notNullable().checkIn(['email', 'ip'], 'dashboard_signin_failures_scope');
    t.text('key').notNullable();
    t.timestamp('window_start', { useTz: true }).notNullable();
    t.integer('failures').notNullable();
    t.primary(['scope', 'key']);
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const t of ['dashboard_signin_failures', 'dashboard_sessions', 'dashboard_users']) await knex.schema.dropTable(t);
}
