import { z } from 'zod';
import type { Db } from '../../platform/db';
import { SIMULATOR_MODELS } from '../../simulator/catalog';

// Operator actions, shared by the admin CLI, `npm start` seeding and the tests. Keys and their
// per-key settings live in ./keys (also used by the admin HTTP API).
export { createKey, getKey, listKeyRequests, listKeys, revokeKey, updateKey } from '../keys/keys';

export const TIERS = ['free_trial', 'starter', 'pro', 'business', 'user'] as const;
const credits = z.string().regex(/^\d{1,24}(\.\d{1,12})?$/, 'must be a non-negative decimal with at most 12 decimals');

export const accountInput = z.object({
  name: z.string().min(1).max(200),
  tier: z.enum(TIERS).default('user'),
  credits: credits.default('0'),
  planExpiresAt: z.string().datetime({ offset: true }).nullable().default(null),
});

export async function createAccount(db: Db, input: z.input<typeof accountInput>) {
  const a = accountInput.parse(input);
  return db.transaction(async (trx) => {
    const [row] = await trx('accounts')
      .insert({ name: a.name, tier: a.tier, total_credits: a.credits, plan_expires_at: a.planExpiresAt })
      .returning(['id', 'name', 'tier', 'total_credits', 'plan_expires_at', 'created_at']);
    if (a.credits !== '0') await trx('ledger').insert({ account_id: row.id, kind: 'grant', amount: a.credits });
    return row;
  });
}

/** Adds credits: the balance and its ledger row in one statement. */
export async function addCredits(db: Db, accountId: string, amount: string) {
  credits.parse(amount);
  const res = await db.raw(
    `WITH a AS (UPDATE accounts SET total_credits = total_credits + :amount WHERE id = :id RETURNING id, total_credits, total_usage),
          l AS (INSERT INTO ledger (account_id, kind, amount) SELECT id, 'grant', :amount FROM a)
     SELECT id, total_credits, total_credits - total_usage AS remaining_credits FROM a`,
    { id: accountId, amount },
  );
  if (!res.rows[0]) throw new Error(`account ${accountId} not found`);
  return res.rows[0];
}

export async function deactivateAccount(db: Db, accountId: string) {
  const [row] = await db('accounts').where({ id: accountId }).update({ active: false }).returning(['id', 'active']);
  if (!row) throw new Error(`account ${accountId} not found`);
  return row;
}

const csv = z.string().transform((v) => v.split(',').map((x) => x.trim()).filter(Boolean));
const bool = z.enum(['true', 'false']).transform((v) => v === 'true');

export const modelInput = z.object({
  id: z.string().min(1).max(200),
  provider: z.string().min(1),
  upstream: z.string().min(1),
  capabilities: csv,
  tiers: csv.pipe(z.array(z.enum(TIERS)).min(1)),
  input: credits,
  output: credits,
  cache: credits,
  'cache-write': credits,
  // chat audio tokens; absent: billed at the text rate of the same direction
  'audio-input': credits.optional(),
  'audio-output': credits.optional(),
  'max-output-tokens': z.coerce.number().int().positive().default(4096),
  'free-trial': bool.default(false),
  active: bool.default(true),
});

/** Creates or replaces a catalog entry; API processes reload the catalog on NOTIFY. */
export async function setModel(db: Db, input: z.input<typeof modelInput>) {
  const m = modelInput.parse(input);
  const row = {
    id: m.id,
    provider_id: m.provider,
    upstream_model: m.upstream,
    capabilities: m.capabilities,
    tiers: m.tiers,
    input_multiplier: m.input,
    output_multiplier: m.output,
    cache_multiplier: m.cache,
    cache_creation_multiplier: m['cache-write'],
    audio_input_multiplier: m['audio-input'] ?? null,
    audio_output_multiplier: m['audio-output'] ?? null,
    max_output_tokens: m['max-output-tokens'],
    free_trial: m['free-trial'],
    active: m.active,
    updated_at: db.fn.now(),
  };
  const [saved] = await db('models').insert(row).onConflict('id').merge().returning('*');
  return saved;
}

export const listModels = (db: Db) => db('models').orderBy('id').select();

export const providerInput = z.object({
  id: z.string().min(1).max(100),
  kind: z.enum(['openai']),
  'base-url': z.string().url(),
  'api-keys': csv.default([]),
  'credits-per-cost-unit': credits.default('1'),
});

export async function setProvider(db: Db, input: z.input<typeof providerInput>) {
  const p = providerInput.parse(input);
  const row = { id: p.id, kind: p.kind, base_url: p['base-url'].replace(/\/?$/, '/'), api_keys: p['api-keys'], credits_per_cost_unit: p['credits-per-cost-unit'] };
  const [saved] = await db('providers').insert(row).onConflict('id').merge().returning(['id', 'kind', 'base_url', 'credits_per_cost_unit']);
  return { ...saved, api_keys: p['api-keys'].length };
}

/** Registers the simulator as a provider and its models in the catalog (idempotent). */
export async function seedSimulatorCatalog(db: Db, simulatorUrl: string) {
  // One provider per wire format the simulator speaks.
  const providerOf = { openai: 'simulator', anthropic: 'simulator-anthropic' } as const;
  for (const [kind, id] of Object.entries(providerOf)) {
    await db('providers')
      .insert({ id, kind, base_url: simulatorUrl.replace(/\/?$/, '/'), api_keys: ['sim-upstream-key'], credits_per_cost_unit: '1' })
      .onConflict('id')
      .merge(['base_url', 'kind']);
  }
  for (const { wire, ...m } of SIMULATOR_MODELS) {
    await db('models')
      .insert({ audio_input_multiplier: null, audio_output_multiplier: null, ...m, provider_id: providerOf[wire] })
      .onConflict('id')
      .merge();
  }
  return { providers: Object.values(providerOf), models: SIMULATOR_MODELS.map((m) => m.id) };
}
