import type { Knex } from 'knex';

// The opt-in response cache (issue 36 part 4): one row per (account, canonical request hash), shared
// by every API process and kept across restarts. A hit is one lookup on the primary key; expired rows
// are removed by a periodic pass (index on expires_at), the oldest evicted past the size bounds
// (index on created_at). Opt-in per key (api_keys.cache_ttl_seconds); a hit is billed at the model's
// cache_hit_credits (default 0).
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE response_cache (
      account_id uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
      key_hash bytea NOT NULL,
      model text NOT NULL,
      stream boolean NOT NULL,
      body text NOT NULL,
      usage jsonb,
      bytes integer NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL,
      PRIMARY KEY (account_id, key_hash)
    )`);
  await knex.raw('CREATE INDEX response_cache_expires_at ON response_cache (expires_at)');
  await knex.raw('CREATE INDEX response_cache_created_at ON response_cache (created_at)');
  await knex.schema.alterTable('api_keys', (t) => t.integer('cache_ttl_seconds'));
  await knex.schema.alterTable('models', (t) => t.decimal('cache_hit_credits', 38, 12).notNullable().defaultTo(0));
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('models', (t) => t.dropColumn('cache_hit_credits'));
  await knex.schema.alterTable('api_keys', (t) => t.dropColumn('cache_ttl_seconds'));
  await knex.schema.dropTable('response_cache');
}
