import type { Knex } from 'knex';

// The hosting panel's core (spec 2 sections 2.1-2.5, 2.7, 5): the org tree, packages, logins,
// sessions, API tokens, sign-in throttling and the audit log.
//
// The tree is a parent pointer plus a materialized path of ids (`<root>/<child>/…/<self>/`), so a
// subtree is one index range scan (`path LIKE '<prefix>%'`, text_pattern_ops) and the ancestors
// of an org are the ids of its path. Paths are ASCII and compared in the "C" collation, so one
// btree index serves both the prefix range and the tree order of a listing. Limits are a JSON object of whole numbers per org (custom) or
// per package; an org uses its package's limits while it has one.
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('panel_packages', (t) => {
    t.uuid('id').primary();
    t.uuid('owner_org_id').notNullable();
    t.text('name').notNullable();
    t.jsonb('limits').notNullable().defaultTo('{}');
    t.text('preferred_region');
    t.text('required_region');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw('CREATE UNIQUE INDEX panel_packages_owner_name ON panel_packages (owner_org_id, lower(name))');

  await knex.schema.createTable('panel_orgs', (t) => {
    t.uuid('id').primary();
    t.uuid('parent_id').references('id').inTable('panel_orgs');
    t.specificType('path', 'text COLLATE "C"').notNullable().unique();
    t.integer('depth').notNullable();
    t.text('type').notNullable().checkIn(['platform', 'provider', 'reseller', 'customer'], 'panel_orgs_type');
    t.text('name').notNullable();
    t.text('status').notNullable().defaultTo('active').checkIn(['active', 'suspended'], 'panel_orgs_status');
    t.timestamp('suspended_at', { useTz: true });
    t.uuid('package_id').references('id').inTable('panel_packages');
    t.jsonb('limits').notNullable().defaultTo('{}');
    t.specificType('powers', 'text[]').notNullable().defaultTo('{}');
    t.text('preferred_region');
    t.text('required_region');
    t.text('display_name');
    t.text('accent_color');
    t.text('support_email');
    t.text('login_hostname').unique();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['parent_id', 'name']);
    t.index(['package_id']);
  });
  // Name search (`?q=`) is a substring match: a trigram index keeps it from scanning the tree.
  await knex.raw('CREATE EXTENSION IF NOT EXISTS pg_trgm');
  await knex.raw('CREATE INDEX panel_orgs_name_trgm ON panel_orgs USING gin (name gin_trgm_ops)');
  await knex.raw(`CREATE UNIQUE INDEX panel_orgs_one_platform ON panel_orgs (type) WHERE type = 'platform'`);
  await knex.schema.alterTable('panel_packages', (t) => t.foreign('owner_org_id').references('id').inTable('panel_orgs'));

  await knex.schema.createTable('panel_logins', (t) => {
    t.uuid('id').primary();
    t.uuid('org_id').notNullable().references('id').inTable('panel_orgs');
    t.text('username').notNullable().unique();
    t.text('password_hash').notNullable();
    t.text('role').notNullable().checkIn(['platform_admin', 'provider_admin', 'reseller', 'account_owner', 'read_only'], 'panel_logins_role');
    t.text('status').notNullable().defaultTo('active').checkIn(['active', 'suspended'], 'panel_logins_status');
    // Initial and reset passwords are temporary: until changed, only the password change works.
    t.boolean('must_change_password').notNullable().defaultTo(true);
    t.timestamp('password_changed_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    // TOTP secrets are sealed (platform/secret-box.ts); `pending` is an enrolment not yet confirmed.
    t.text('totp_secret_sealed');
    t.text('totp_pending_sealed');
    t.timestamp('two_factor_enabled_at', { useTz: true });
    t.specificType('recovery_code_hashes', 'text[]').notNullable().defaultTo('{}');
    // The last TOTP time step accepted, so a code is used once.
    t.bigInteger('totp_last_step');
    t.timestamp('last_sign_in_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['org_id']);
  });

  await knex.schema.createTable('panel_sessions', (t) => {
    t.uuid('id').primary();
    t.text('token_hash').notNullable().unique();
    t.uuid('login_id').notNullable().references('id').inTable('panel_logins').onDelete('CASCADE');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('last_seen_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.text('ip');
    t.text('user_agent');
    t.index(['login_id']);
  });

  await knex.schema.createTable('panel_api_tokens', (t) => {
    t.uuid('id').primary();
    t.uuid('login_id').notNullable().references('id').inTable('panel_logins').onDelete('CASCADE');
    t.text('name').notNullable();
    t.text('token_hash').notNullable().unique();
    t.text('prefix').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('last_used_at', { useTz: true });
    t.timestamp('revoked_at', { useTz: true });
    t.index(['login_id']);
  });

  // Failed sign-ins per login and per client IP, shared by every API process.
  await knex.schema.createTable('panel_signin_failures', (t) => {
    t.text('scope').notNullable().checkIn(['login', 'ip'], 'panel_signin_failures_scope');
    t.text('key').notNullable();
    t.timestamp('window_start', { useTz: true }).notNullable();
    t.integer('failures').notNullable();
    t.timestamp('locked_until', { useTz: true });
    t.primary(['scope', 'key']);
  });

  // Every change: who, where, what, before and after. org_path is copied so an org's audit stays
  // readable per subtree after the org itself is deleted.
  await knex.schema.createTable('panel_audit', (t) => {
    t.bigIncrements('id').primary();
    t.timestamp('at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.text('request_id');
    t.uuid('actor_login_id');
    t.text('actor_username');
    t.uuid('org_id').notNullable();
    t.specificType('org_path', 'text COLLATE "C"').notNullable();
    t.text('action').notNullable();
    t.text('target_type').notNullable();
    t.text('target_id').notNullable();
    t.jsonb('before');
    t.jsonb('after');
  });
  await knex.raw('CREATE INDEX panel_audit_org_path ON panel_audit (org_path, id)');
}

export async function down(knex: Knex): Promise<void> {
  for (const t of ['panel_audit', 'panel_signin_failures', 'panel_api_tokens', 'panel_sessions', 'panel_logins']) await knex.schema.dropTable(t);
  await knex.schema.alterTable('panel_packages', (t) => t.dropForeign(['owner_org_id']));
  await knex.schema.dropTable('panel_orgs');
  await knex.schema.dropTable('panel_packages');
}
