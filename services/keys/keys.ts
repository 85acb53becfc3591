import { z } from 'zod';
import Decimal from 'decimal.js';
import { normalize } from '../../domain/credits/pricing';
import { generateKey, hashKey, keyPrefix, type KeyFormat } from './key-format';
import type { Db } from '../../platform/db';
import { InvalidInput, NotFound } from '../shared/errors';

// API keys and their per-key settings (spec 3 A 2), shared by the admin CLI, the admin HTTP API,
// `npm start` seeding and the tests.


const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const uuid = z.string().regex(UUID, 'must be a UUID');

const DATE = /^\d{4}-\d{2}-\d{2}$/;

/**
 * Per-key settings, snake_case as in the admin HTTP API. Absent: unchanged (or none, on
 * create); null: removed. Values come out in a normal form that parses again to itself.
 */
export const keySettingsSchema = z.object({
  /** rupiah (= credits), exact: a decimal string or a JSON number */
  spend_limit: z
    .union([z.string(), z.number()])
    .transform((v) => String(v).trim())
    .pipe(z.string().regex(/^\d{1,24}(\.\d{1,12})?$/, 'must be a non-negative decimal with at most 12 decimals'))
    .transform((v) => normalize(v))
    .nullable()
    .optional(),
  /** requests per minute */
  rpm: z.coerce.number().int('must be a whole number').min(1).max(1_000_000).nullable().optional(),
  /**
   * A date, valid through that whole UTC day ("after it the key is rejected", spec 3 A 2: stored
   * as 00:00 UTC of the next day), or an ISO 8601 instant with offset; from then on it is rejected.
   */
  expires_at: z
    .string()
    .refine((s) => (DATE.test(s) || z.string().datetime({ offset: true }).safeParse(s).success) && !Number.isNaN(Date.parse(DATE.test(s) ? `${s}T00:00:00Z` : s)), {
      message: 'must be YYYY-MM-DD or an ISO 8601 date-time with offset',
    })
    .transform((s) => (DATE.test(s) ? new Date(Date.parse(`${s}T00:00:00Z`) + 86_400_000) : new Date(s)).toISOString())
    .nullable()
    .optional(),
  /** response cache opt-in: seconds an answer of a temperature-0 request is kept (any key format) */
  cache_ttl: z.coerce.number().int('must be a whole number').min(1).max(30 * 86_400).nullable().optional(),
  /** model ids; a comma-separated string is accepted too (the CLI's --models) */
  models: z
    .union([z.string().transform((v) => v.split(',').map((x) => x.trim()).filter(Boolean)), z.array(z.string().trim())])
    .pipe(z.array(z.string().min(1).max(200)).min(1, 'must name at least one model (null removes the list)').max(1000))
    .transform((m) => [...new Set(m)])
    .nullable()
    .optional(),
});

export type KeySettingsInput = z.input<typeof keySettingsSchema>;
type KeySettings = z.output<typeof keySettingsSchema>;

const COLUMNS = { spend_limit: 'spend_limit', rpm: 'rpm', expires_at: 'expires_at', models: 'allowed_models', cache_ttl: 'cache_ttl_seconds' } as const;
/** Settings every key format takes (the others are the keyed variant's). */
const ANY_FORMAT = new Set(['cache_ttl']);

function settingColumns(s: KeySettings): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [field, column] of Object.entries(COLUMNS)) {
    const v = s[field as keyof KeySettings];
    if (v !== undefined) out[column] = v;
  }
  return out;
}

/** Per-key settings are enforced by the keyed variant, which takes only `mt-` keys. */
function requireMt(format: string, s: KeySettings): void {
  const set = Object.keys(COLUMNS).filter((f) => !ANY_FORMAT.has(f) && s[f as keyof KeySettings] !== undefined && s[f as keyof KeySettings] !== null);
  if (set.length > 0 && format !== 'mt') {
    throw new InvalidInput(set[0], `${set.join(', ')}: per-key settings belong to mt keys of the keyed variant (format mt), not to ${format} keys`);
  }
}

const VIEW = ['id', 'account_id', 'label', 'format', 'key_prefix', 'created_at', 'revoked_at', 'spend_limit', 'spend', 'spend_limit_refused', 'rpm', 'expires_at', 'allowed_models', 'cache_ttl_seconds'];

interface KeyRow {
  id: string;
  account_id: string;
  label: string;
  format: string;
  key_prefix: string;
  created_at: Date;
  revoked_at: Date | null;
  spend_limit: string | null;
  spend: string;
  /** the limit in force when a request was first refused for it (services/accounts/limit-refusals.ts) */
  spend_limit_refused: string | null;
  rpm: number | null;
  expires_at: Date | null;
  allowed_models: string[] | null;
  cache_ttl_seconds: number | null;
}

/** A key as operators see it; amounts are exact decimal strings. Never the key itself. */
export function keyView(r: KeyRow) {
  return {
    id: r.id,
    account_id: r.account_id,
    label: r.label,
    format: r.format,
    key_prefix: r.key_prefix,
    created_at: r.created_at.toISOString(),
    revoked_at: r.revoked_at?.toISOString() ?? null,
    spend_limit: r.spend_limit === null ? null : normalize(r.spend_limit),
    spend: normalize(r.spend),
    /** spent up to the limit, or a request was refused for the limit now in force */
    limit_reached: r.spend_limit !== null && (new Decimal(r.spend).gte(r.spend_limit) || (r.spend_limit_refused !== null && new Decimal(r.spend_limit_refused).eq(r.spend_limit))),
    rpm: r.rpm,
    expires_at: r.expires_at?.toISOString() ?? null,
    models: r.allowed_models,
    cache_ttl: r.cache_ttl_seconds,
  };
}

export type KeyView = ReturnType<typeof keyView>;

export type GatewayVariant = 'credits' | 'keyed';

/** The key formats each variant's API accepts; the first is the default of `key create`. */
export const VARIANT_KEY_FORMATS: Record<GatewayVariant, KeyFormat[]> = { credits: ['gw_ai', 'rk_live'], keyed: ['mt'] };

export interface CreateKeyInput {
  accountId: string;
  label?: string;
  format?: KeyFormat;
  settings?: KeySettingsInput;
  /** the running variant: the default format is its own, and formats it would reject are refused */
  variant?: GatewayVariant;
}

/** A key limited to models the catalog does not know would only ever be refused. */
async function requireKnownModels(db: Db, s: KeySettings): Promise<void> {
  if (!s.models) return;
  const known = new Set((await db('models').whereIn('id', s.models).select('id')).map((m: { id: string }) => m.id));
  const unknown = s.models.filter((m) => !known.has(m));
  if (unknown.length > 0) throw new InvalidInput('models', `models: unknown model id${unknown.length > 1 ? 's' : ''} ${unknown.map((m) => `'${m}'`).join(', ')} (see \`admin model list\`)`);
}

/** Creates a key; the full key is in the answer only. */
export async function createKey(db: Db, input: CreateKeyInput): Promise<KeyView & { key: string }> {
  const allowed = input.variant ? VARIANT_KEY_FORMATS[input.variant] : undefined;
  const format = z.enum(['gw_ai', 'rk_live', 'mt']).parse(input.format ?? allowed?.[0] ?? 'gw_ai');
  if (allowed && !allowed.includes(format)) {
    throw new InvalidInput('format', `format: the ${input.variant} variant running here accepts only ${allowed.join(' or ')} keys, a ${format} key would be refused`);
  }
  uuid.parse(input.accountId);
  const settings = keySettingsSchema.parse(input.settings ?? {});
  requireMt(format, settings);
  await requireKnownModels(db, settings);
  const account = await db('accounts').where({ id: input.accountId }).first('id');
  if (!account) throw new NotFound(`account ${input.accountId} not found`);
  const key = generateKey(format);
  const [row] = await db('api_keys')
    .insert({ account_id: input.accountId, key_hash: hashKey(key), key_prefix: keyPrefix(key), format, label: input.label ?? '', ...settingColumns(settings) })
    .returning(VIEW);
  return { ...keyView(row), key };
}

/** Changes label and settings; every API process drops the key from its cache (NOTIFY). */
export async function updateKey(db: Db, id: string, input: { label?: string } & KeySettingsInput): Promise<KeyView> {
  uuid.parse(id);
  const { label, ...rest } = input;
  const settings = keySettingsSchema.parse(rest);
  const current = await db('api_keys').where({ id }).first('format');
  if (!current) throw new NotFound(`key ${id} not found`);
  requireMt(current.format, settings);
  await requireKnownModels(db, settings);
  const changes = { ...settingColumns(settings), ...(label === undefined ? {} : { label: z.string().max(200).parse(label) }) };
  const q = db('api_keys').where({ id });
  const [row] = Object.keys(changes).length > 0 ? await q.update(changes).returning(VIEW) : await q.select(VIEW);
  return keyView(row);
}

export async function getKey(db: Db, id: string): Promise<KeyView> {
  uuid.parse(id);
  const row = await db('api_keys').where({ id }).first(VIEW);
  if (!row) throw new NotFound(`key ${id} not found`);
  return keyView(row);
}

export async function listKeys(db: Db, accountId: string): Promise<KeyView[]> {
  uuid.parse(accountId);
  const account = await db('accounts').where({ id: accountId }).first('id');
  if (!account) throw new NotFound(`account ${accountId} not found`);
  const rows = await db('api_keys').where({ account_id: accountId }).orderBy('created_at').select(VIEW);
  return rows.map(keyView);
}

export async function revokeKey(db: Db, id: string) {
  uuid.parse(id);
  const [row] = await db('api_keys').where({ id }).whereNull('revoked_at').update({ revoked_at: db.fn.now() }).returning(['id', 'revoked_at']);
  if (!row) throw new NotFound(`active key ${id} not found`);
  return row as { id: string; revoked_at: Date };
}

export const requestListQuery = z
  .object({
    limit: z.coerce.number().int().min(1).max(1000).default(100),
    /** a request id from an earlier page: only older requests */
    before: uuid.optional(),
  })
  .strict();

export interface LoggedRow {
  id: string;
  key_id: string;
  method: string;
  path: string;
  model: string | null;
  status: number;
  error_code: string | null;
  latency_ms: number;
  cost: string | null;
  ip: string | null;
  created_at: Date;
  billing: string | null;
  billing_source: string | null;
  charge: string | null;
  held: string | null;
  route: unknown;
}

/**
 * The key's requests, newest first (the dashboard's requests page). The cost is the settled
 * charge of the request's reservation when there is one, else the charge the answer showed;
 * `billing` is the reservation's status (`held` while it settles), null for unbilled requests.
 */
export async function listKeyRequests(db: Db, keyId: string, query: z.input<typeof requestListQuery> = {}) {
  uuid.parse(keyId);
  const q = requestListQuery.parse(query);
  const key = await db('api_keys').where({ id: keyId }).first('id');
  if (!key) throw new NotFound(`key ${keyId} not found`);
  const rows: LoggedRow[] = await db('request_log as l')
    .leftJoin('reservations as r', 'r.id', 'l.id')
    .where('l.key_id', keyId)
    .modify((b) => {
      if (q.before) b.whereRaw('(l.created_at, l.id) < (SELECT created_at, id FROM request_log WHERE id = ?)', [q.before]);
    })
    .orderBy([
      { column: 'l.created_at', order: 'desc' },
      { column: 'l.id', order: 'desc' },
    ])
    .limit(q.limit + 1)
    .select('l.*', 'r.status as billing', 'r.billing_source', 'r.charge as charge', 'r.held_credits as held', 'r.route');
  const page = rows.slice(0, q.limit);
  return {
    data: page.map((r) => ({
      id: r.id,
      key_id: r.key_id,
      method: r.method,
      path: r.path,
      model: r.model,
      status: r.status,
      error_code: r.error_code,
      latency_ms: r.latency_ms,
      cost: r.charge !== null && r.billing !== 'held' ? normalize(r.charge) : r.cost === null ? null : normalize(r.cost),
      held: r.billing === 'held' && r.held !== null ? normalize(r.held) : null,
      billing: r.billing,
      // how the charge was decided (cache: answered from the response cache); pending while held
      billing_source: r.billing === 'held' ? 'pending' : r.billing_source,
      // the route that answered and the routes tried (text requests)
      route: r.route ?? null,
      ip: r.ip,
      created_at: r.created_at.toISOString(),
    })),
    has_more: rows.length > q.limit,
    next_before: rows.length > q.limit ? page[page.length - 1].id : null,
  };
}
