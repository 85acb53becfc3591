import { Counter } from 'prom-client';
import { GatewayError } from '../../../domain/shared/errors';
import type { CatalogRoute } from '../../../domain/catalog/model';
import { routeKey, type CircuitBreakers } from '../../../domain/catalog/routing';
import type { RouteAttempt, Routing } from '../../../domain/credits/reservation';
import { UpstreamFailure, type UpstreamResponse } from '../../../providers/upstream';
import { registry } from '../../../platform/metrics';
import { withAttemptAttributes } from '../../../platform/tracing';
import { readRefusal, type Refusal, type RefusalOptions } from '../shared/upstream-failure';

// Fallback over a model's routes (issue 23, feature 1): a provider failure that happened before
// the provider answered 200 (no connection, a timeout before its headers, 5xx, 429) moves the
// request to the next route, within the same hold. Once a route answered 200 the request stays
// on it: nothing was sent to the client before that, and everything may be after.

/** Fallbacks by model and the provider of the route that failed (catalog entries: bounded). */
const fallbacks = new Counter({ name: 'gateway_route_fallbacks_total', help: 'Requests moved to their next route after a provider failure, by model and failed provider', labelNames: ['model', 'provider'] as const, registers: [registry] });

const retryable = (status: number) => status === 429 || status >= 500;

/** The route used and every attempt, as the generation record shows them. */
export class RouteLog {
  readonly attempts: RouteAttempt[] = [];
  used: CatalogRoute | null = null;

  note(r: CatalogRoute, a: Omit<RouteAttempt, 'provider' | 'upstream_model'>): void {
    this.attempts.push({ provider: r.provider.id, upstream_model: r.upstreamModel, ...a });
  }

  view(): Routing {
    return { provider: this.used?.provider.id ?? null, upstream_model: this.used?.upstreamModel ?? null, attempts: this.attempts };
  }
}

/** How the routes ended: one answered 200, or the last failure (null: every route was skipped). */
export type Routed<P> = { ok: true; route: P; res: UpstreamResponse } | { ok: false; failure: UpstreamFailure | Refusal | null };

export interface RouteCall<P> {
  model: string;
  breakers: CircuitBreakers;
  log: RouteLog;
  /** the request for a route; null when the route cannot take it (skipped) */
  prepare: (r: CatalogRoute) => P | null;
  send: (p: P) => Promise<UpstreamResponse>;
  refusal?: (p: P) => RefusalOptions;
}

/**
 * Tries the routes in order until one answers 200 or refuses the request itself (a 4xx other
 * than 429: returned as is, the next route would refuse it too). When every route that could take
 * the request is open, the one whose cool-down ends first takes its trial now. A client that went
 * away ends the attempts (the error is thrown).
 */
export async function sendOverRoutes<P>(routes: readonly CatalogRoute[], c: RouteCall<P>): Promise<Routed<P>> {
  let failure: UpstreamFailure | Refusal | null = null;
  let tried = false;
  const open: Array<[CatalogRoute, P]> = [];
  let sent = 0;
  /** One attempt on a route already acquired: the answer, or null to go on. */
  const attempt = async (r: CatalogRoute, p: P, last: boolean, trial = false): Promise<Routed<P> | null> => {
    const key = routeKey(r);
    tried = true;
    // The provider call's client span says which attempt it is (providers/upstream.ts).
    const attributes = { 'gateway.route.attempt': sent, 'gateway.route.upstream_model': r.upstreamModel, 'gateway.fallback': sent > 0, 'gateway.early_trial': trial };
    sent++;
    let res: UpstreamResponse;
    try {
      res = await withAttemptAttributes(attributes, () => c.send(p));
    } catch (err) {
      if (!(err instanceof UpstreamFailure)) {
        c.breakers.released(key);
        throw err;
      }
      c.breakers.failed(key);
      c.log.note(r, { result: 'failed', http_status: null, error: err.message });
      failure = err;
      if (!last) fallbacks.inc({ model: c.model, provider: r.provider.id });
      return null;
    }
    if (res.statusCode === 200 || !retryable(res.statusCode)) {
      c.breakers.succeeded(key);
      c.log.used = r;
      c.log.note(r, { result: res.statusCode === 200 ? 'ok' : 'refused', http_status: res.statusCode, error: null });
      return { ok: true, route: p, res };
    }
    c.breakers.failed(key);
    failure = await readRefusal(res, c.refusal?.(p));
    c.log.note(r, { result: 'failed', http_status: res.statusCode, error: failure.detail });
    if (!last) fallbacks.inc({ model: c.model, provider: r.provider.id });
    return null;
  };
  for (const [i, r] of routes.entries()) {
    const p = c.prepare(r);
    if (p === null) {
      c.log.note(r, { result: 'skipped', error: 'the request cannot be sent to this route' });
      continue;
    }
    if (!c.breakers.acquire(routeKey(r))) {
      c.log.note(r, { result: 'skipped', error: 'circuit open' });
      open.push([r, p]);
      continue;
    }
    const done = await attempt(r, p, i + 1 === routes.length);
    if (done) return done;
  }
  if (!tried && open.length) {
    const key = c.breakers.acquireEarliest(open.map(([r]) => routeKey(r)));
    const early = open.find(([r]) => routeKey(r) === key);
    if (early) return (await attempt(early[0], early[1], true, true)) ?? { ok: false, failure };
  }
  return { ok: false, failure };
}

/** Every route is open with its one trial out: refused before anything is held (an open route whose trial is free takes one, sendOverRoutes). */
export function allRoutesOpen(routes: readonly CatalogRoute[], breakers: CircuitBreakers, model: string): void {
  if (routes.every((r) => breakers.trialOut(routeKey(r)))) throw new GatewayError('provider_unavailable', { model });
}
