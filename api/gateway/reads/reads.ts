import type { Context } from 'koa';
import { z } from 'zod';
import { GatewayError } from '../../../domain/shared/errors';
import { lt, sub, toNumber } from '../../../domain/credits/pricing';
import { uncovered } from '../shared/usage-view';
import type { Db } from '../../../platform/db';
import type { AuthRecord } from '../../../services/keys/auth-store';
import { isExpired } from '../shared/auth';
import type { Catalog } from '../../../services/catalog/catalog';
import type { CatalogModel } from '../../../domain/catalog/model';
import { validate } from '../../shared/validate';
import { accountRow, findGeneration, keyOfAccount, keySpend, keyUsageWindows, usageBreakdown, type UsageRow } from '../../../services/credits/reads';

const PAID = new Set(['starter', 'pro', 'business']);
/** No control characters (U+0000–U+001F, U+007F): an id that has them is a client error. */
const printable = (s: string) => [...s].every((c) => c.charCodeAt(0) > 0x1f && c.charCodeAt(0) !== 0x7f);
const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** GET /v1/credits (spec 1 section 2.4): read fresh from the account row. */
export function credits(db: Db) {
  return async (ctx: Context) => {
    const auth: AuthRecord = ctx.state.auth;
    const a = await accountRow(db, auth.accountId);
    ctx.body = {
      data: {
        total_credits: toNumber(a.total_credits),
        total_usage: toNumber(a.total_usage),
        remaining_credits: toNumber(sub(a.total_credits, a.total_usage)),
        reserved_credits: toNumber(a.reserved_credits),
        pending_requests: a.pending_requests,
        tier: a.tier,
        expires_at: iso(a.plan_expires_at),
        cycle_started_at: iso(a.cycle_started_at),
        is_expired: a.plan_expires_at !== null && a.plan_expires_at.getTime() <= Date.now(),
      },
    };
  };
}

/** GET /v1/key (spec 1 section 2.5) with UTC day, ISO-week and month windows. */
export function keyInfo(db: Db) {
  return async (ctx: Context) => {
    const auth: AuthRecord = ctx.state.auth;
    const [a, key, s] = await Promise.all([
      accountRow(db, auth.accountId),
      // A per-key spend limit exists only in the keyed variant (spec 3 A); spend counts held + charged.
      auth.spendLimit === null ? null : keySpend(db, auth.keyId),
      keyUsageWindows(db, auth.keyId),
    ]);
    const expired = isExpired(auth);
    const balanceCredits = sub(a.total_credits, a.total_usage);
    const balance = toNumber(balanceCredits);
    // Without a key limit the balance is the limit (spec 1 section 2.5); with one, the smaller.
    const keyLeft = key?.spend_limit == null ? null : sub(key.spend_limit, key.spend);
    const remaining = keyLeft !== null && lt(keyLeft, balanceCredits) ? keyLeft : balanceCredits;
    ctx.body = {
      data: {
        id: auth.keyId,
        label: auth.label,
        key_prefix: auth.keyPrefix,
        created_at: iso(auth.keyCreatedAt),
        limit: key?.spend_limit == null ? null : toNumber(key.spend_limit),
        limit_reset: null,
        limit_remaining: expired || lt(remaining, '0') ? 0 : toNumber(remaining),
        usage: toNumber(s.usage),
        usage_daily: toNumber(s.usage_daily),
        usage_weekly: toNumber(s.usage_weekly),
        usage_monthly: toNumber(s.usage_monthly),
        is_free_tier: !PAID.has(auth.tier),
        balance,
        tier: auth.tier,
        expires_at: iso(auth.planExpiresAt),
        is_expired: expired,
        requests: s.requests,
        requests_daily: s.requests_daily,
        requests_weekly: s.requests_weekly,
        requests_monthly: s.requests_monthly,
        last_used_at: iso(s.last_used_at),
      },
    };
  };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const generationQuery = z.object({ id: z.string().min(1).max(200).refine(printable, 'must not contain control characters') }).strict();

/** GET /v1/generation?id= : by request id, or by the body id of a non-streaming answer. */
export function generation(db: Db) {
  return async (ctx: Context) => {
    const auth: AuthRecord = ctx.state.auth;
    const { id } = validate(generationQuery, ctx.query);
    const r = await findGeneration(db, auth.accountId, id);
    if (!r) throw new GatewayError('not_found', { detail: `No generation with id '${id}' on this account.`, param: 'id' });
    const pending = r.status === 'held';
    ctx.body = {
      data: {
        id: r.id,
        body_id: r.body_id,
        model: r.model,
        provider: r.provider,
        // text requests: the route that answered ({provider, upstream_model}) and every attempt; from
        // the recorded outcome as soon as the answer was sent, before settlement copies it to the row
        route: r.route ?? r.report?.routing ?? null,
        endpoint: r.endpoint,
        modality: r.modality,
        usage_details: r.usage_details,
        status: r.status,
        outcome: r.outcome,
        billing_source: pending ? 'pending' : r.billing_source,
        is_estimate: pending ? true : r.is_estimate,
        cost: pending ? toNumber(r.held_credits) : toNumber(r.charge),
        cost_details: {
          input_credits: toNumber(r.input_credits),
          cache_write_credits: toNumber(r.cache_write_credits),
          cache_read_credits: toNumber(r.cache_read_credits),
          output_credits: toNumber(r.output_credits),
          pricing_adjustment_credits: toNumber(r.pricing_adjustment_credits),
          ...uncovered(r),
        },
        reserved_credits: toNumber(r.held_credits),
        tokens: {
          prompt_tokens: r.prompt_tokens,
          completion_tokens: r.completion_tokens,
          cached_tokens: r.cached_tokens,
          cache_write_tokens: r.cache_write_tokens,
          reasoning_tokens: r.reasoning_tokens,
        },
        http_status: r.http_status,
        latency_ms: r.latency_ms,
        error: r.error,
        created_at: iso(r.created_at),
        settled_at: iso(r.settled_at),
      },
    };
  };
}

const DAY = /^\d{4}-\d{2}-\d{2}$/;
// ISO 8601 instants; one without a zone is UTC (spec 1 section 4.6), never the server's local time.
const INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})?$/;
const HAS_ZONE = /(Z|[+-]\d{2}:\d{2})$/;
/** A validated `from`/`to` value as an instant: a bare day is its 00:00 UTC. */
const instantOf = (s: string): Date => new Date(DAY.test(s) ? `${s}T00:00:00Z` : HAS_ZONE.test(s) ? s : `${s}Z`);
const realDay = (s: string) => {
  const t = Date.parse(`${s}T00:00:00Z`);
  return DAY.test(s) && !Number.isNaN(t) && new Date(t).toISOString().slice(0, 10) === s;
};
const day = z.string().refine(realDay, 'must be a calendar day YYYY-MM-DD');
const instant = z.string().refine((s) => realDay(s) || (INSTANT.test(s) && realDay(s.slice(0, 10)) && !Number.isNaN(instantOf(s).getTime())), 'must be YYYY-MM-DD or ISO 8601');
export const usageQuery = z
  .object({
    from: instant.optional(),
    to: instant.optional(),
    date: day.optional(),
    model: z.string().min(1).optional(),
    provider: z.string().min(1).optional(),
    api_key: z.string().regex(UUID, 'must be a key id (UUID)').optional(),
  })
  .strict();

const MAX_RANGE_MS = 93 * 86_400_000;

/** GET /v1/usage (spec 1 section 4.6): settled requests only, broken down by model, provider, day, key. */
export function usage(db: Db) {
  return async (ctx: Context) => {
    const auth: AuthRecord = ctx.state.auth;
    const q = validate(usageQuery, ctx.query);
    let from: Date;
    let to: Date;
    if (q.date) {
      from = new Date(`${q.date}T00:00:00Z`);
      to = new Date(from.getTime() + 86_400_000);
    } else {
      // A bare day as `to` includes that whole day.
      to = q.to ? (DAY.test(q.to) ? new Date(instantOf(q.to).getTime() + 86_400_000) : instantOf(q.to)) : new Date();
      from = q.from ? instantOf(q.from) : new Date(to.getTime() - 30 * 86_400_000);
    }
    if (from >= to) throw new GatewayError('invalid_parameter', { param: 'from', detail: 'must be before to' });
    if (to.getTime() - from.getTime() > MAX_RANGE_MS) throw new GatewayError('invalid_parameter', { param: 'to', detail: 'the range is at most 93 days' });
    if (q.api_key) {
      if (!(await keyOfAccount(db, auth.accountId, q.api_key))) throw new GatewayError('not_found', { detail: `No API key '${q.api_key}' on this account.`, param: 'api_key' });
    }
    const { total, byModel, byProvider, byDay, byKey } = await usageBreakdown(db, { accountId: auth.accountId, from, to, model: q.model, provider: q.provider, keyId: q.api_key });
    const shape = (rows: UsageRow[], name: string) =>
      rows.map((r) => ({ [name]: r.key, requests: r.requests, credits: toNumber(r.credits), prompt_tokens: r.prompt_tokens, completion_tokens: r.completion_tokens }));
    const t = total;
    ctx.body = {
      data: {
        from: from.toISOString(),
        to: to.toISOString(),
        total: { requests: t.requests, credits: toNumber(t.credits), prompt_tokens: t.prompt_tokens, completion_tokens: t.completion_tokens },
        by_model: shape(byModel, 'model'),
        by_provider: shape(byProvider, 'provider'),
        by_day: shape(byDay, 'day'),
        by_key: shape(byKey, 'api_key'),
      },
    };
  };
}

/** GET /v1/models: every model the key may call (its allowed list, when it has one), with capabilities. */
/** The models this key may call: active, on its tier, in its allowed list (keyed variant). */
const visible = (auth: AuthRecord) => (m: CatalogModel) => m.active && m.tiers.includes(auth.tier) && (!auth.allowedModels || auth.allowedModels.includes(m.id));
const modelView = (m: CatalogModel) => ({ id: m.id, object: 'model', owned_by: m.provider_id, capabilities: m.capabilities, max_output_tokens: m.max_output_tokens });

export function models(catalog: Catalog) {
  return async (ctx: Context) => {
    const list = (await catalog.allModels()).filter(visible(ctx.state.auth));
    ctx.body = { object: 'list', data: list.sort((a, b) => a.id.localeCompare(b.id)).map(modelView) };
  };
}

/** GET /v1/models/{id}: one entry of the listing; a model the key cannot see is 404 like an unknown one. */
export function model(catalog: Catalog) {
  return async (ctx: Context) => {
    const m = await catalog.model(ctx.params.id);
    if (!m || !visible(ctx.state.auth)(m)) throw new GatewayError('not_found', { detail: `The model '${ctx.params.id}' does not exist or is not available to this key.`, param: 'model' });
    ctx.body = modelView(m);
  };
}
