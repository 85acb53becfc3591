import type { Knex } from 'knex';

// Credits are numeric(38,12): exact, no floating point anywhere in storage.
const CREDITS = [38, 12] as const;

export async function up(knex: Knex): Promise<void> {
  await knex.raw('CREATE EXTENSION IF NOT EXISTS pgcrypto');

  await knex.schema.createTable('accounts', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.text('name').notNullable();
    t.text('tier').notNullable().defaultTo('user');
    t.decimal('total_credits', ...CREDITS).notNullable().defaultTo(0);
    // total_usage includes active holds; reserved_credits is their sum, pending_requests their count.
    t.decimal('total_usage', ...CREDITS).notNullable().defaultTo(0);
    t.decimal('reserved_credits', ...CREDITS).notNullable().defaultTo(0);
    t.integer('pending_requests').notNullable().defaultTo(0);
    t.timestamp('plan_expires_at', { useTz: true });
    t.timestamp('cycle_started_at', { useTz: true }).defaultTo(knex.fn.now());
    t.boolean('active').notNullable().defaultTo(true);
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw(`ALTER TABLE accounts ADD CONSTRAINT accounts_tier_check
    CHECK (tier IN ('free_trial','starter','pro','business','user'))`);
  await knex.raw(`ALTER TABLE accounts ADD CONSTRAINT accounts_balance_check
    CHECK (total_usage <= total_credits AND reserved_credits >= 0 AND pending_requests >= 0)`);

  await knex.schema.createTable('api_keys', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('account_id').notNullable().references('accounts.id');
    t.text('key_hash').notNullable().unique();
    t.text('key_prefix').notNullable();
    t.text('format').notNullable();
    t.text('label').notNullable().defaultTo('');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('revoked_at', { useTz: true });
    t.index(['account_id']);
  });

  await knex.schema.createTable('providers', (t) => {
    t.text('id').primary();
    t.text('kind').notNullable(); // adapter folder: openai | anthropic
    t.text('base_url').notNullable();
    t.specificType('api_keys', 'text[]').notNullable().defaultTo('{}');
    // Provider cost is reported in the provider's currency; this converts it to credits.
    t.decimal('credits_per_cost_unit', ...CREDITS).notNullable().defaultTo(1);
  });

  await knex.schema.createTable('models', (t) => {
    t.text('id').primary();
    t.text('provider_id').notNullable().references('providers.id');
    t.text('upstream_model').notNullable();
    t.specificType('capabilities', 'text[]').notNullable();
    t.specificType('tiers', 'text[]').notNullable();
    t.boolean('free_trial').notNullable().defaultTo(false);
    t.boolean('active').notNullable().defaultTo(true);
    t.integer('max_output_tokens').notNullable().defaultTo(4096);
    t.decimal('input_multiplier', ...CREDITS).notNullable();
    t.decimal('output_multiplier', ...CREDITS).notNullable();
    t.decimal('cache_multiplier', ...CREDITS).notNullable();
    t.decimal('cache_creation_multiplier', ...CREDITS).notNullable();
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });

  // One row per billable request: the hold, its tariff snapshot and its settlement.
  await knex.schema.createTable('reservations', (t) => {
    t.uuid('id').primary(); // the request id (x-gateway-request-id)
    t.uuid('account_id').notNullable().references('accounts.id');
    t.uuid('key_id').notNullable().references('api_keys.id');
    t.text('model').notNullable();
    t.text('provider').notNullable();
    t.text('endpoint').notNullable();
    t.text('body_id'); // chatcmpl-…, msg_…, resp_…: also accepted by /v1/generation
    t.text('status').notNullable().defaultTo('held'); // held | settled | released | cancelled
    t.decimal('held_credits', ...CREDITS).notNullable();
    t.decimal('balance_before', ...CREDITS).notNullable();
    t.decimal('input_multiplier', ...CREDITS).notNullable();
    t.decimal('output_multiplier', ...CREDITS).notNullable();
    t.decimal('cache_multiplier', ...CREDITS).notNullable();
    t.decimal('cache_creation_multiplier', ...CREDITS).notNullable();
    t.boolean('complimentary').notNullable().defaultTo(false);
    t.text('billing_source');
    t.text('outcome'); // completed | cancelled | failed | abandoned
    t.integer('http_status');
    t.integer('prompt_tokens');
    t.integer('completion_tokens');
    t.integer('cached_tokens');
    t.integer('cache_write_tokens');
    t.integer('reasoning_tokens');
    t.decimal('provider_cost', ...CREDITS);
    t.decimal('charge', ...CREDITS);
    t.decimal('input_credits', ...CREDITS);
    t.decimal('cache_write_credits', ...CREDITS);
    t.decimal('cache_read_credits', ...CREDITS);
    t.decimal('output_credits', ...CREDITS);
    t.decimal('pricing_adjustment_credits', ...CREDITS);
    t.boolean('is_estimate');
    t.text('error');
    t.integer('latency_ms');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('settled_at', { useTz: true });
    t.index(['account_id', 'settled_at']);
    t.index(['key_id', 'settled_at']);
    t.index(['status', 'created_at']);
    t.index(['body_id']);
  });

  // Every movement of credits. total_credits = Σ grant; total_usage = Σ hold − Σ release + Σ charge.
  await knex.schema.createTable('ledger', (t) => {
    t.bigIncrements('id');
    t.uuid('account_id').notNullable().references('accounts.id');
    t.uuid('reservation_id').references('reservations.id');
    t.text('kind').notNullable(); // grant | hold | release | charge
    t.decimal('amount', ...CREDITS).notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['account_id']);
    t.unique(['reservation_id', 'kind']);
  });
  await knex.raw(`ALTER TABLE ledger ADD CONSTRAINT ledger_kind_check CHECK (kind IN ('grant','hold','release','charge'))`);

  // Key and catalog caches in every API process listen here (LISTEN/NOTIFY).
  await knex.raw(`
    CREATE FUNCTION notify_cache_change() RETURNS trigger AS $$
    BEGIN
      PERFORM pg_notify('cache_invalidation', TG_TABLE_NAME || ':' || COALESCE(NEW.id::text, OLD.id::text));
      RETURN NULL;
    END $$ LANGUAGE plpgsql`);
  for (const table of ['api_keys', 'accounts', 'models', 'providers']) {
    const cols = ({ accounts: 'UPDATE OF tier, plan_expires_at, active', api_keys: 'UPDATE OF revoked_at, key_hash, account_id' } as Record<string, string>)[table] ?? 'UPDATE';
    await knex.raw(`CREATE TRIGGER ${table}_cache AFTER ${cols} OR DELETE ON ${table}
      FOR EACH ROW EXECUTE FUNCTION notify_cache_change()`);
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const t of ['ledger', 'reservations', 'models', 'providers', 'api_keys', 'accounts']) await knex.schema.dropTableIfExists(t);
  await knex.raw('DROP FUNCTION IF EXISTS notify_cache_change()');
}
