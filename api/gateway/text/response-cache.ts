import { createHash } from 'node:crypto';
import type { Context } from 'koa';
import { GatewayError } from '../../../domain/shared/errors';
import type { CatalogModel } from '../../../domain/catalog/model';
import type { TokenUsage } from '../../../domain/credits/pricing';
import { chargeOf } from '../../../domain/credits/reservation';
import type { AuthRecord } from '../../../services/keys/auth-store';
import type { ResponseCache } from '../../../services/cache/responses';
import type { Reservations } from '../../../services/credits/holds';
import type { Db } from '../../../platform/db';
import { beginBillableCall } from '../shared/billable-call';
import { creditUsage } from '../shared/usage-view';
import { Counter } from 'prom-client';
import { registry } from '../../../platform/metrics';

// The response cache on the text request path (issue 36 part 4), consulted before any route is
// chosen: an exact match of the account's canonical request answers with the stored answer (a
// stream replayed as the same stream), through the same hold and outcome report as any request,
// charged the model's cache-hit price (billing_source cache). Only complete answers are stored.

export const CACHE_HEADER = 'x-gateway-cache';

const cacheLookups = new Counter({ name: 'gateway_cache_lookups_total', help: 'Response cache lookups of requests that opted in, by model and result (hit, miss)', labelNames: ['model', 'result'] as const, registers: [registry] });
/** The longest a client may ask an answer to be kept (30 days). */
export const MAX_TTL_SECONDS = 30 * 86_400;

/** Request fields that do not change the answer: left out of the key. */
const NOT_IN_KEY = new Set(['user', 'metadata', 'safety_identifier', 'prompt_cache_key', 'prompt_cache_retention']);

export interface CachePolicy {
  /** how long a stored answer stays (seconds) */
  ttl: number;
  keyHash: Buffer;
}

/**
 * Whether this request reads and fills the cache: `x-gateway-cache: ttl=<s>` opts in, `no-store`
 * bypasses, else the key's cache_ttl_seconds applies, to requests sampled at temperature 0 only
 * (an absent temperature is the provider's default, above 0). Null: not cached.
 */
export function cachePolicy(ctx: Context, auth: AuthRecord, endpoint: string, body: Record<string, unknown>): CachePolicy | null {
  const header = ctx.get(CACHE_HEADER).trim().toLowerCase();
  let ttl: number | null;
  if (header === '') ttl = body.temperature === 0 ? (auth.cacheTtlSeconds ?? null) : null;
  else if (header === 'no-store') ttl = null;
  else {
    const m = /^ttl=(\d{1,8})$/.exec(header);
    const n = m ? Number(m[1]) : NaN;
    if (!(n >= 1 && n <= MAX_TTL_SECONDS)) {
      throw new GatewayError('invalid_parameter', { param: CACHE_HEADER, detail: `must be ttl=<seconds> (1 to ${MAX_TTL_SECONDS}) or no-store` });
    }
    ttl = n;
  }
  return ttl === null ? null : { ttl, keyHash: requestHash(endpoint, body) };
}

/** SHA-256 of the endpoint and the request with its keys sorted, less the fields that do not change the answer. */
export function requestHash(endpoint: string, body: Record<string, unknown>): Buffer {
  const kept = Object.fromEntries(Object.entries(body).filter(([k]) => !NOT_IN_KEY.has(k)));
  return createHash('sha256').update(endpoint).update('\n').update(canonicalJson(kept)).digest();
}

function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (v && typeof v === 'object') {
    const entries = Object.entries(v as Record<string, unknown>).filter(([, x]) => x !== undefined);
    return `{${entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([k, x]) => `${JSON.stringify(k)}:${canonicalJson(x)}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

export interface CacheDeps {
  db: Db;
  reservations: Reservations;
  responseCache: ResponseCache;
}

export interface CacheRequest {
  started: number;
  endpoint: string;
  model: CatalogModel;
  complimentary: boolean;
  policy: CachePolicy;
}

/**
 * Answers from the cache when the account's request is stored and live: one hold at the model's
 * cache-hit price, one report (billing_source cache). False on a miss: the request goes on.
 */
export async function answerFromCache(deps: CacheDeps, ctx: Context, r: CacheRequest): Promise<boolean> {
  const auth: AuthRecord = ctx.state.auth;
  const hit = await deps.responseCache.lookup(auth.accountId, r.policy.keyHash);
  cacheLookups.inc({ model: r.model.id, result: hit ? 'hit' : 'miss' });
  if (!hit) return false;
  const { hold, report } = await beginBillableCall(deps, ctx, {
    started: r.started,
    hold: { model: r.model.id, provider: r.model.provider_id, endpoint: r.endpoint, tariff: r.model, held: r.complimentary ? '0' : r.model.cache_hit_credits, complimentary: r.complimentary, modality: 'text' },
  });
  const charge = chargeOf(hold, { usage: hit.usage, providerCost: null, billable: true, cacheHit: true });
  const credits = creditUsage(hold, charge);
  ctx.set(CACHE_HEADER, 'hit');
  ctx.set('x-gateway-request-id', hold.reservationId);
  ctx.set('x-gateway-cost', charge.charge);
  if (hit.stream) {
    ctx.set('cache-control', 'no-cache');
    ctx.type = 'text/event-stream; charset=utf-8';
    ctx.body = hit.body.split('\n').map((line) => (line.startsWith('data: {') && line.includes('"cost_details"') ? `data: ${JSON.stringify(withCredits(JSON.parse(line.slice(6)), credits))}` : line)).join('\n');
  } else {
    ctx.body = withCredits(JSON.parse(hit.body), credits);
  }
  report({ outcome: 'completed', billable: true, cacheHit: true, usage: hit.usage, providerCost: null, httpStatus: 200, bodyId: null });
  return true;
}

/** The stored answer's credit fields (chat's usage: cost, cost_details, balance; a body or a stream chunk) replaced by this request's. */
function withCredits(answer: unknown, credits: ReturnType<typeof creditUsage>): unknown {
  const o = answer as { usage?: unknown };
  if (!o || typeof o.usage !== 'object' || o.usage === null || !('cost_details' in o.usage)) return answer;
  return { ...o, usage: { ...o.usage, ...credits } };
}

/**
 * Stores a complete answer (never an error, never a cut stream) before its last byte goes out, so
 * `x-gateway-cache: miss` means stored and a repeat hits; a failed store is only logged.
 */
export function keepAnswer(deps: CacheDeps, ctx: Context, r: CacheRequest, body: string, stream: boolean, usage: TokenUsage | null): Promise<void> {
  const auth: AuthRecord = ctx.state.auth;
  return deps.responseCache.store(auth.accountId, r.policy.keyHash, r.model.id, { body, stream, usage }, r.policy.ttl);
}
