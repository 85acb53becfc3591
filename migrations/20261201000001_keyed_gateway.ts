import type { Knex } from 'knex';

// The key-authenticated gateway variant (spec 3 A): per-key settings, the key's spend, the
// shared per-key minute counter, wrong-key attempts per IP, and the request log.
const CREDITS = [38, 12] as const;

// Columns whose change must evict the key from every API process's cache. `spend` is not among
// them: it changes on every request and is only ever read inside the hold statement.
const KEY_CACHE_COLUMNS = 'revoked_at, key_hash, account_id, label, spend_limit, rpm, expires_at, allowed_models';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('api_keys', (t) => {
    t.decimal('spend_limit', ...CREDITS); // rupiah (= credits); null: no limit
    t.decimal('spend', ...CREDITS).notNullable().defaultTo(0); // held + charged, keyed variant only
    t.integer('rpm'); // requests per minute; null: no limit
    t.timestamp('expires_at', { useTz: true }); // null: never
    t.specificType('allowed_models', 'text[]'); // null: every model of the plan
  });
  await knex.raw(`ALTER TABLE api_keys ADD CONSTRAINT api_keys_settings_check
    CHECK ((spend_limit IS NULL OR spend_limit >= 0) AND (rpm IS NULL OR rpm > 0))`);

  // Whether the hold also added to api_keys.spend, so that settlement corrects exactly those.
  await knex.schema.alterTable('reservations', (t) => {
    t.boolean('key_spend_tracked').notNullable().defaultTo(false);
  });

  // One row per key: the count of the current UTC minute, shared by every API process.
  await knex.schema.createTable('key_rate_windows', (t) => {
    t.uuid('key_id').primary().references('api_keys.id').onDelete('CASCADE');
    t.timestamp('window_start', { useTz: true }).notNullable();
    t.integer('count').notNullable();
  });

  // Wrong-key attempts per client IP; locked_until is the shared lockout.
  await knex.schema.createTable('auth_failures', (t) => {
    t.text('ip').primary();
    t.integer('failures').notNullable();
    t.timestamp('window_started_at', { useTz: true }).notNullable();
    t.timestamp('locked_until', { useTz: true });
    t.index(['locked_until']);
  });

  // Every request of the keyed variant, written in batches after the answer. The id is the
  // request id (x-request-id, also the reservation id of a billable request).
  await knex.schema.createTable('request_log', (t) => {
    t.uuid('id').primary();
    t.uuid('key_id'); // null when the key was missing, malformed or unknown
    t.uuid('account_id');
    t.text('method').notNullable();
    t.text('path').notNullable();
    t.text('model');
    t.integer('status').notNullable();
    t.integer('latency_ms').notNullable();
    t.decimal('cost', ...CREDITS); // the charge shown in the answer, when it showed one
    t.text('ip');
    t.text('error_code');
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.index(['key_id', 'created_at']);
  });

  await knex.raw('DROP TRIGGER api_keys_cache ON api_keys');
  await knex.raw(`CREATE TRIGGER api_keys_cache AFTER UPDATE OF ${KEY_CACHE_COLUMNS} OR DELETE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION notify_cache_change()`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TRIGGER api_keys_cache ON api_keys');
  await knex.raw(`CREATE TRIGGER api_keys_cache AFTER UPDATE OF revoked_at, key_hash, account_id OR DELETE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION notify_cache_change()`);
  for (const t of ['request_log', 'auth_failures', 'key_rate_windows']) await knex.schema.dropTableIfExists(t);
  await knex.schema.alterTable('reservations', (t) => t.dropColumn('key_spend_tracked'));
  await knex.raw('ALTER TABLE api_keys DROP CONSTRAINT api_keys_settings_check');
  await knex.schema.alterTable('api_keys', (t) => {
    for (const c of ['spend_limit', 'spend', 'rpm', 'expires_at', 'allowed_models']) t.dropColumn(c);
  });
}
