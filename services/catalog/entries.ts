import { z } from 'zod';
import type { Db } from '../../platform/db';
import { PROVIDER_KINDS, providerSettingsIssues } from '../../providers';
import { credits, TIERS } from '../accounts/accounts';
import { followModelChange, knownProvider } from './routes';

// Catalog entries (models and providers) as operators set them; API processes reload the
// catalog on NOTIFY (services/catalog/catalog.ts).

const csv = z.string().transform((v) => v.split(',').map((x) => x.trim()).filter(Boolean));
const bool = z.enum(['true', 'false']).transform((v) => v === 'true');

// Media attributes and unit prices (models.details): a JSON object on the CLI (--details), an
// object in the admin API. Prices are exact decimal strings in credits; the rest as the media
// endpoints read it (docs/admin.md lists the keys).
const prices = z.record(z.string(), credits);
const detailsObject = z
  .object({
    pricing: z.union([prices, z.object({ per_input_token: credits, per_output_token: credits })]).optional(),
    pricing_skus: prices.optional(),
    voices: z.array(z.string().min(1)).optional(),
    supported_durations: z.array(z.number().int().positive()).min(1).optional(),
    max_images: z.number().int().positive().optional(),
    max_input_images: z.number().int().nonnegative().optional(),
  })
  .passthrough();
const details = z.union([
  z.string().transform((v, ctx) => {
    try {
      return JSON.parse(v) as unknown;
    } catch {
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'must be a JSON object' });
      return z.NEVER;
    }
  }),
  z.record(z.string(), z.unknown()),
]).pipe(detailsObject);

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
  // credits per answer from the response cache; absent: kept (a new model: 0)
  'cache-hit': credits.optional(),
  'max-output-tokens': z.coerce.number().int().positive().default(4096),
  'free-trial': bool.default(false),
  active: bool.default(true),
  // absent: the model's details are kept (a new model gets none)
  details: details.optional(),
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
    ...(m.details === undefined ? {} : { details: m.details }),
    ...(m['cache-hit'] === undefined ? {} : { cache_hit_credits: m['cache-hit'] }),
    updated_at: db.fn.now(),
  };
  return db.transaction(async (trx) => {
    await knownProvider(trx, m.provider);
    const old = await trx('models').where({ id: m.id }).forUpdate().first('provider_id', 'upstream_model');
    const [saved] = await trx('models').insert(row).onConflict('id').merge().returning('*');
    await followModelChange(trx, m.id, old, { provider_id: m.provider, upstream_model: m.upstream });
    return saved;
  });
}

export const listModels = (db: Db) => db('models').orderBy('id').select();

export const providerInput = z.object({
  id: z.string().min(1).max(100),
  // the registered provider kinds (providers/index.ts)
  kind: z.enum(PROVIDER_KINDS),
  'base-url': z.string().url(),
  'api-keys': csv.default([]),
  'credits-per-cost-unit': credits.default('1'),
  // bedrock only: the AWS region the calls are signed for
  region: z.string().min(1).max(50).optional(),
  // azure-openai only: the API version every call names (Azure's `api-version` query parameter)
  'api-version': z.string().min(1).max(40).optional(),
});

// Each kind checks its own settings (providers/<kind>): Bedrock's region and credentials, Azure's API version.
const checkedProvider = providerInput.superRefine((p, ctx) => {
  for (const issue of providerSettingsIssues(p.kind, { region: p.region, apiVersion: p['api-version'], apiKeys: p['api-keys'] })) ctx.addIssue({ code: 'custom', path: [issue.field], message: issue.message });
});

/** The kind's own settings (providers.settings) from the validated flags. */
function settingsOf(p: z.output<typeof providerInput>): Record<string, unknown> {
  if (p.kind === 'azure-openai') return { api_version: p['api-version'] };
  if (p.kind === 'bedrock') return { region: p.region };
  return {};
}

export async function setProvider(db: Db, input: z.input<typeof providerInput>) {
  const p = checkedProvider.parse(input);
  const row = { id: p.id, kind: p.kind, base_url: p['base-url'].replace(/\/?$/, '/'), api_keys: p['api-keys'], credits_per_cost_unit: p['credits-per-cost-unit'], settings: settingsOf(p) };
  const [saved] = await db('providers').insert(row).onConflict('id').merge().returning(['id', 'kind', 'base_url', 'credits_per_cost_unit', 'settings']);
  return { ...saved, api_keys: p['api-keys'].length };
}
