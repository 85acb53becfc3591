import { setTimeout as sleep } from 'node:timers/promises';
import { Counter, Gauge } from 'prom-client';
import { GatewayError } from '../../../domain/shared/errors';
import type { CatalogRoute } from '../../../domain/catalog/model';
import { routeKey, type CircuitBreakers } from '../../../domain/catalog/routing';
import type { Candidate } from '../../../domain/catalog/preferences';
import { KeyCooldowns, RouteMeasures } from '../../../domain/catalog/route-health';
import type { RouteAttempt, Routing } from '../../../domain/credits/reservation';
import { keyRefused, UpstreamFailure, type UpstreamResponse } from '../../../providers/upstream';
import { registry } from '../../../platform/metrics';
import { withAttemptAttributes } from '../../../platform/tracing';
import { readRefusal, type Refusal, type RefusalOptions } from '../shared/upstream-failure';

// Fallback over a request's candidates (issue 23 feature 1; issue 36 parts 2 and 3): each
// candidate route is tried, retried by its catalog policy (backoff with jitter, Retry-After within
// the request's budget), then the request moves on, within the same hold. A provider failure
// before it answered 200 (no connection, a timeout before its headers, 5xx, 429, a rejected key)
// moves on; once a route answered 200 the request stays on it: nothing was sent to the client
// before that, and everything may be after, so nothing is ever retried after the first byte.

const fallbacks = new Counter({ name: 'gateway_route_fallbacks_total', help: 'Requests moved to their next candidate route after a provider failure, by model, failed provider and reason (connect, http_<status>, circuit_open)', labelNames: ['model', 'provider', 'reason'] as const, registers: [registry] });
const retries = new Counter({ name: 'gateway_route_retries_total', help: 'Attempts sent again on the same route after a provider failure, by model, provider and reason (connect, http_<status>)', labelNames: ['model', 'provider', 'reason'] as const, registers: [registry] });
const cooldowns = new Counter({ name: 'gateway_upstream_key_cooldowns_total', help: 'Provider keys put to cool down after their provider rejected them (401/403), by provider', labelNames: ['provider'] as const, registers: [registry] });

/** This process's view of its upstreams: route measures (provider.sort) and cooled keys. One per process. */
export class UpstreamHealth {
  readonly measures = new RouteMeasures();
  readonly keys: KeyCooldowns;

  constructor(s: RoutingSettings, now: () => number) {
    // counted as they cool down (the gauge below shows those cooling now)
    this.keys = new KeyCooldowns(s.keyCooldownMs, now, (provider) => cooldowns.inc({ provider }));
    live.add(new WeakRef(this));
  }
}

export interface RoutingSettings {
  /** what a request may wait in total between retries (backoff and Retry-After) */
  retryBudgetMs: number;
  /** how long a provider key rejected with 401/403 is skipped */
  keyCooldownMs: number;
}

export const ROUTING_DEFAULTS: RoutingSettings = { retryBudgetMs: 10_000, keyCooldownMs: 60_000 };

// The gauges read every live process view at scrape time (tests run several gateways in one process).
const live = new Set<WeakRef<UpstreamHealth>>();
function eachHealth(f: (h: UpstreamHealth) => void) {
  for (const ref of live) {
    const h = ref.deref();
    if (h) f(h);
    else live.delete(ref);
  }
}
/** The labels of a route key (provider ids hold no '/'; an upstream model may). */
const splitKey = (k: string) => {
  const i = k.indexOf('/');
  return { provider: k.slice(0, i), upstream_model: k.slice(i + 1) };
};
new Gauge({
  name: 'gateway_route_latency_ms',
  help: "Moving average of the ms to a route's answer headers, by provider and upstream model (provider.sort latency)",
  labelNames: ['provider', 'upstream_model'] as const,
  registers: [registry],
  collect() {
    this.reset();
    eachHealth((h) => h.measures.entries().forEach(([k, m]) => m.latencyMs !== null && this.set(splitKey(k), m.latencyMs)));
  },
});
new Gauge({
  name: 'gateway_route_throughput_tokens_per_second',
  help: "Moving average of a route's output tokens per second, by provider and upstream model (provider.sort throughput)",
  labelNames: ['provider', 'upstream_model'] as const,
  registers: [registry],
  collect() {
    this.reset();
    eachHealth((h) => h.measures.entries().forEach(([k, m]) => m.tokensPerSecond !== null && this.set(splitKey(k), m.tokensPerSecond)));
  },
});
new Gauge({
  name: 'gateway_upstream_keys_cooling',
  help: 'Provider keys skipped now because their provider rejected them (401/403), by provider',
  labelNames: ['provider'] as const,
  registers: [registry],
  collect() {
    this.reset();
    eachHealth((h) => h.keys.list().forEach((c) => this.inc({ provider: c.provider })));
  },
});

/** The route used and every attempt, as the generation record shows them. */
export class RouteLog {
  readonly attempts: RouteAttempt[] = [];
  used: Candidate | null = null;

  note(c: Candidate, a: Omit<RouteAttempt, 'provider' | 'upstream_model' | 'model'>): void {
    this.attempts.push({ model: c.model.id, provider: c.route.provider.id, upstream_model: c.route.upstreamModel, ...a });
  }

  view(): Routing {
    const u = this.used;
    return { model: u?.model.id ?? null, provider: u?.route.provider.id ?? null, upstream_model: u?.route.upstreamModel ?? null, attempts: this.attempts };
  }
}

/** How the candidates ended: one answered 200 (or refused the request itself), or the last failure (null: every one was skipped). */
export type Routed<P> = { ok: true; route: P; res: UpstreamResponse; candidate: Candidate; sentAt: number } | { ok: false; failure: UpstreamFailure | Refusal | null };

export interface RouteCall<P> {
  breakers: CircuitBreakers;
  health: UpstreamHealth;
  log: RouteLog;
  /** what the request may wait in total between retries */
  retryBudgetMs: number;
  /** the client's going away: ends a wait between retries */
  signal: AbortSignal;
  /** the request for a candidate; null when the route cannot take it (skipped) */
  prepare: (c: Candidate) => P | null;
  send: (p: P) => Promise<UpstreamResponse>;
  refusal?: (p: P) => RefusalOptions;
}

// Answers that move the request on: the provider's trouble, or the gateway's keys rejected.
const movesOn = (res: UpstreamResponse) => res.statusCode === 429 || res.statusCode >= 500 || keyRefused(res);

/** ms a Retry-After header asks for (seconds or an HTTP date); null when absent or unreadable. */
export function retryAfterMs(v: string | undefined, now: number): number | null {
  if (!v) return null;
  if (/^\d+$/.test(v.trim())) return Number(v.trim()) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

/** Exponential backoff with jitter: base × 2^n, scaled by a random factor in [0.5, 1). */
const backoff = (r: CatalogRoute, n: number) => Math.round(r.retry.backoffMs * 2 ** n * (0.5 + Math.random() / 2));

/**
 * Tries the candidates in order until one answers 200 or refuses the request itself (a 4xx other
 * than 401, 403 and 429: returned as is, the next route would refuse it too). A failed attempt is
 * retried on its route while the route's policy and the request's retry budget allow. When every
 * candidate that could take the request is open, the one whose cool-down ends first takes its
 * trial now. A client that went away ends the attempts (the error is thrown).
 */
export async function sendOverRoutes<P>(candidates: readonly Candidate[], c: RouteCall<P>): Promise<Routed<P>> {
  let failure: UpstreamFailure | Refusal | null = null;
  let tried = false;
  const open: Array<[Candidate, P]> = [];
  let sent = 0;
  let waited = 0;
  /** One attempt on a route already acquired: the answer, or the failure's reason and wait asked for. */
  const attempt = async (cand: Candidate, p: P, retry: number, trial: boolean): Promise<Routed<P> | { reason: string; retryAfter: number | null }> => {
    const r = cand.route;
    const key = routeKey(r);
    tried = true;
    // The provider call's client span says which attempt it is (providers/upstream.ts).
    const attributes = { 'gateway.route.attempt': sent, 'gateway.route.upstream_model': r.upstreamModel, 'gateway.fallback': sent > 0 && retry === 0, 'gateway.retry': retry, 'gateway.early_trial': trial };
    sent++;
    const sentAt = Date.now();
    let res: UpstreamResponse;
    try {
      res = await withAttemptAttributes(attributes, () => c.send(p));
    } catch (err) {
      if (!(err instanceof UpstreamFailure)) {
        c.breakers.released(key);
        throw err;
      }
      c.breakers.failed(key);
      c.log.note(cand, { result: 'failed', http_status: null, error: err.message, ...(retry ? { retry } : {}) });
      failure = err;
      return { reason: 'connect', retryAfter: null };
    }
    if (res.statusCode === 200 || !movesOn(res)) {
      c.breakers.succeeded(key);
      if (res.statusCode === 200) c.health.measures.latency(key, Date.now() - sentAt);
      c.log.used = cand;
      c.log.note(cand, { result: res.statusCode === 200 ? 'ok' : 'refused', http_status: res.statusCode, error: null, ...(retry ? { retry } : {}) });
      return { ok: true, route: p, res, candidate: cand, sentAt };
    }
    c.breakers.failed(key);
    const refusal = await readRefusal(res, c.refusal?.(p));
    failure = refusal;
    c.log.note(cand, { result: 'failed', http_status: res.statusCode, error: refusal.detail, ...(retry ? { retry } : {}) });
    return { reason: String(res.statusCode), retryAfter: retryAfterMs(refusal.retryAfter, Date.now()) };
  };
  /** A route's attempts: the first, then its retries while its policy, its breaker and the budget allow. */
  const onRoute = async (cand: Candidate, p: P, trial = false): Promise<Routed<P> | string> => {
    const r = cand.route;
    for (let n = 0; ; n++) {
      const out = await attempt(cand, p, n, trial);
      if ('ok' in out) return out;
      const reason = out.reason === 'connect' ? 'connect' : `http_${out.reason}`;
      if (n >= r.retry.retries || !r.retry.on.includes(out.reason)) return reason;
      const wait = out.retryAfter ?? backoff(r, n);
      if (waited + wait > c.retryBudgetMs) {
        c.log.note(cand, { result: 'skipped', error: `no retry: waiting ${wait} ms would exceed the request's retry budget (${c.retryBudgetMs - waited} ms left)` });
        return reason;
      }
      if (!c.breakers.acquire(routeKey(r))) return 'circuit_open';
      retries.inc({ model: cand.model.id, provider: r.provider.id, reason });
      waited += wait;
      await sleep(wait, undefined, { signal: c.signal });
    }
  };
  for (const [i, cand] of candidates.entries()) {
    const last = i + 1 === candidates.length;
    const p = c.prepare(cand);
    if (p === null) {
      c.log.note(cand, { result: 'skipped', error: 'the request cannot be sent to this route' });
      continue;
    }
    if (!c.breakers.acquire(routeKey(cand.route))) {
      c.log.note(cand, { result: 'skipped', error: 'circuit open' });
      if (!last) fallbacks.inc({ model: cand.model.id, provider: cand.route.provider.id, reason: 'circuit_open' });
      open.push([cand, p]);
      continue;
    }
    const done = await onRoute(cand, p);
    if (typeof done !== 'string') return done;
    if (!last) fallbacks.inc({ model: cand.model.id, provider: cand.route.provider.id, reason: done });
  }
  if (!tried && open.length) {
    const key = c.breakers.acquireEarliest(open.map(([cand]) => routeKey(cand.route)));
    const early = open.find(([cand]) => routeKey(cand.route) === key);
    if (early) {
      const done = await onRoute(early[0], early[1], true);
      if (typeof done !== 'string') return done;
    }
  }
  return { ok: false, failure };
}

/** Every candidate is open with its one trial out: refused before anything is held (an open route whose trial is free takes one, sendOverRoutes). */
export function allRoutesOpen(candidates: readonly Candidate[], breakers: CircuitBreakers, model: string): void {
  if (candidates.every((c) => breakers.trialOut(routeKey(c.route)))) throw new GatewayError('provider_unavailable', { model });
}
