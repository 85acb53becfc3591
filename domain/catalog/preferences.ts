import type { CatalogModel, CatalogRoute } from './model';
import { routeKey } from './routing';

// A request's own routing (issue 36 part 2), as OpenRouter accepts it: `models` (the model, then
// fallback models, in order) and `provider` (order, allow_fallbacks, only, ignore, sort). Pure:
// the caller passes each route's measured latency and throughput. The result is the ordered list
// of candidates a request tries, or why every route was left out.

export type RouteSort = 'price' | 'latency' | 'throughput';

export interface ProviderPreferences {
  order?: string[];
  allow_fallbacks?: boolean;
  only?: string[];
  ignore?: string[];
  sort?: RouteSort;
}

/** One model a request may be answered by, with its routes in the catalog's order. */
export interface ModelRoutes {
  model: CatalogModel;
  routes: CatalogRoute[];
}

export interface Candidate {
  model: CatalogModel;
  route: CatalogRoute;
}

export interface RouteMeasure {
  /** ms to the provider's answer headers (moving average); null: not measured yet */
  latencyMs: number | null;
  /** output tokens per second of whole answers (moving average); null: not measured yet */
  tokensPerSecond: number | null;
}

export interface LeftOut {
  model: string;
  provider: string;
  upstream_model: string;
  reason: string;
}

export type Plan = { ok: true; candidates: Candidate[] } | { ok: false; reasons: LeftOut[] };

/** A contradiction between the preferences: the field to name and why. */
export interface Contradiction {
  field: string;
  detail: string;
}

/** Preferences that cannot all hold (checked before the catalog is asked). */
export function contradiction(p: ProviderPreferences, fallbackModels: number): Contradiction | null {
  for (const f of ['order', 'only', 'ignore'] as const) {
    const list = p[f] ?? [];
    const dup = list.find((x, i) => list.indexOf(x) !== i);
    if (dup !== undefined) return { field: `provider.${f}`, detail: `'${dup}' is listed twice` };
  }
  const ignored = new Set(p.ignore ?? []);
  const both = (p.only ?? []).find((x) => ignored.has(x));
  if (both !== undefined) return { field: 'provider.ignore', detail: `'${both}' is both in provider.only and provider.ignore` };
  const orderIgnored = (p.order ?? []).find((x) => ignored.has(x));
  if (orderIgnored !== undefined) return { field: 'provider.order', detail: `'${orderIgnored}' is in provider.ignore` };
  if (p.only) {
    const only = new Set(p.only);
    const outside = (p.order ?? []).find((x) => !only.has(x));
    if (outside !== undefined) return { field: 'provider.order', detail: `'${outside}' is not in provider.only` };
  }
  if (p.allow_fallbacks === false && !p.order && fallbackModels > 0) {
    return { field: 'provider.allow_fallbacks', detail: 'false forbids the fallback models that `models` lists (name the providers to keep to in provider.order)' };
  }
  return null;
}

/** The tariff's price of a token pair, for sort: "price" (a model's routes share their model's tariff). */
const priceOf = (m: CatalogModel) => Number(m.input_multiplier) + Number(m.output_multiplier);

/**
 * The routes a request tries, in order: each model's routes (the models in the request's order),
 * those `only` / `ignore` / `allow_fallbacks: false` leave out dropped, the providers of `order`
 * first in that order; `sort` then orders every candidate by price (lowest first), latency (lowest
 * first) or throughput (highest first), unmeasured routes last, ties in the order before.
 * `allow_fallbacks: false` keeps the providers of `order` only, or without `order` the first route.
 */
export function planRoutes(models: readonly ModelRoutes[], p: ProviderPreferences, measure: (key: string) => RouteMeasure): Plan {
  const reasons: LeftOut[] = [];
  const only = p.only ? new Set(p.only) : null;
  const ignore = new Set(p.ignore ?? []);
  const order = p.order ?? [];
  const strict = p.allow_fallbacks === false;
  const kept: Array<Candidate & { rank: number }> = [];
  for (const { model, routes } of models) {
    for (const route of routes) {
      const id = route.provider.id;
      const leave = (reason: string) => reasons.push({ model: model.id, provider: id, upstream_model: route.upstreamModel, reason });
      if (only && !only.has(id)) leave(`provider '${id}' is not in provider.only`);
      else if (ignore.has(id)) leave(`provider '${id}' is in provider.ignore`);
      else if (strict && order.length && !order.includes(id)) leave(`provider '${id}' is not in provider.order and provider.allow_fallbacks is false`);
      else kept.push({ model, route, rank: order.includes(id) ? order.indexOf(id) : order.length });
    }
  }
  // the providers of `order` first, within each model (stable: the catalog's order among the rest)
  const byModel = models.flatMap(({ model }) => kept.filter((c) => c.model === model).sort((a, b) => a.rank - b.rank));
  let ordered = byModel;
  if (p.sort) {
    const key = sortKey(p.sort, measure);
    ordered = byModel
      .map((c, i) => ({ c, i, k: key(c) }))
      .sort((a, b) => a.c.rank - b.c.rank || cmp(a.k, b.k) || a.i - b.i)
      .map((x) => x.c);
  }
  if (strict && !order.length) ordered = ordered.slice(0, 1);
  if (!ordered.length) return { ok: false, reasons };
  return { ok: true, candidates: ordered.map(({ model, route }) => ({ model, route })) };
}

/** null (not measured) sorts last. */
const cmp = (a: number | null, b: number | null) => (a === b ? 0 : a === null ? 1 : b === null ? -1 : a - b);

function sortKey(sort: RouteSort, measure: (key: string) => RouteMeasure): (c: Candidate) => number | null {
  if (sort === 'price') return (c) => priceOf(c.model);
  if (sort === 'latency') return (c) => measure(routeKey(c.route)).latencyMs;
  return (c) => {
    const t = measure(routeKey(c.route)).tokensPerSecond;
    return t === null ? null : -t;
  };
}
