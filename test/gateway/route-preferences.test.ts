import assert from 'node:assert/strict';
import { RETRY_DEFAULTS, type CatalogModel, type CatalogRoute } from '../../domain/catalog/model';
import { contradiction, planRoutes, type ModelRoutes, type RouteMeasure } from '../../domain/catalog/preferences';
import { KeyCooldowns } from '../../domain/catalog/route-health';

// The pure rules behind a request's own routing (domain/catalog/preferences.ts, route-health.ts):
// candidates from `models` and `provider`, their contradictions, and provider key cool-downs.

const model = (id: string, input: string, output: string) => ({ id, input_multiplier: input, output_multiplier: output }) as unknown as CatalogModel;
const route = (provider: string, upstream = 'u'): CatalogRoute => ({
  provider: { id: provider, kind: 'openai', base_url: 'http://x/', api_keys: [], credits_per_cost_unit: '1', settings: {} },
  upstreamModel: upstream,
  priority: 0,
  weight: 1,
  retry: RETRY_DEFAULTS,
});
const NONE: RouteMeasure = { latencyMs: null, tokensPerSecond: null };
const m1 = model('m1', '0.00001', '0.00003');
const m2 = model('m2', '0.000001', '0.000002');
const catalog: ModelRoutes[] = [
  { model: m1, routes: [route('a'), route('b'), route('c')] },
  { model: m2, routes: [route('b', 'v'), route('d', 'v')] },
];
const order = (p: Parameters<typeof planRoutes>[1], measure: (k: string) => RouteMeasure = () => NONE) => {
  const plan = planRoutes(catalog, p, measure);
  assert.ok(plan.ok, `a plan: ${JSON.stringify(plan)}`);
  return plan.candidates.map((c) => `${c.model.id}:${c.route.provider.id}`);
};

describe('routing preferences (pure)', () => {
  it('without preferences: every model in order, each model its routes in catalog order', () => {
    assert.deepEqual(order({}), ['m1:a', 'm1:b', 'm1:c', 'm2:b', 'm2:d'], 'catalog order');
  });

  it('only, ignore and order filter and order within each model', () => {
    assert.deepEqual(order({ only: ['b', 'd'] }), ['m1:b', 'm2:b', 'm2:d'], 'only');
    assert.deepEqual(order({ ignore: ['b'] }), ['m1:a', 'm1:c', 'm2:d'], 'ignore');
    assert.deepEqual(order({ order: ['c', 'd'] }), ['m1:c', 'm1:a', 'm1:b', 'm2:d', 'm2:b'], 'order first, then the rest');
    assert.deepEqual(order({ order: ['c', 'b'], allow_fallbacks: false }), ['m1:c', 'm1:b', 'm2:b'], 'allow_fallbacks false: only the ordered providers');
    assert.deepEqual(order({ allow_fallbacks: false }), ['m1:a'], 'allow_fallbacks false without order: the first candidate only');
  });

  it('sort: price across the models, latency and throughput by measure with unmeasured last', () => {
    assert.deepEqual(order({ sort: 'price' }), ['m2:b', 'm2:d', 'm1:a', 'm1:b', 'm1:c'], 'the cheaper model first, ties in order');
    const measured: Record<string, RouteMeasure> = { 'a/u': { latencyMs: 300, tokensPerSecond: 10 }, 'c/u': { latencyMs: 50, tokensPerSecond: 90 }, 'd/v': { latencyMs: 100, tokensPerSecond: 40 } };
    const measure = (k: string) => measured[k] ?? NONE;
    assert.deepEqual(order({ sort: 'latency' }, measure), ['m1:c', 'm2:d', 'm1:a', 'm1:b', 'm2:b'], 'lowest latency first, unmeasured last');
    assert.deepEqual(order({ sort: 'throughput' }, measure), ['m1:c', 'm2:d', 'm1:a', 'm1:b', 'm2:b'], 'highest throughput first');
    assert.deepEqual(order({ sort: 'latency', order: ['b'] }, measure), ['m1:b', 'm2:b', 'm1:c', 'm2:d', 'm1:a'], 'the ordered providers stay first');
  });

  it('no candidate left: every route with its reason', () => {
    const plan = planRoutes(catalog, { only: ['a'], ignore: ['z'] }, () => NONE);
    assert.ok(plan.ok, 'm1 via a is left');
    const none = planRoutes(catalog, { only: ['z'] }, () => NONE);
    assert.ok(!none.ok, 'nothing left');
    assert.equal(none.reasons.length, 5, 'a reason per route');
    assert.deepEqual(none.reasons[0], { model: 'm1', provider: 'a', upstream_model: 'u', reason: "provider 'a' is not in provider.only" }, 'the reason names the field');
  });

  it('contradictions name the field', () => {
    assert.equal(contradiction({ only: ['a'], ignore: ['a'] }, 0)?.field, 'provider.ignore', 'only and ignore');
    assert.equal(contradiction({ order: ['a'], ignore: ['a'] }, 0)?.field, 'provider.order', 'order and ignore');
    assert.equal(contradiction({ order: ['b'], only: ['a'] }, 0)?.field, 'provider.order', 'order outside only');
    assert.equal(contradiction({ order: ['a', 'a'] }, 0)?.field, 'provider.order', 'a duplicate');
    assert.equal(contradiction({ allow_fallbacks: false }, 1)?.field, 'provider.allow_fallbacks', 'no fallbacks but fallback models');
    assert.equal(contradiction({ allow_fallbacks: false, order: ['a'] }, 1), null, 'with order it is fine');
    assert.equal(contradiction({ order: ['a'], only: ['a', 'b'], ignore: ['c'], sort: 'price' }, 2), null, 'compatible preferences');
  });

  it('key cool-downs: a rejected key is skipped until its cool-down ends; all cooled, the earliest is tried', () => {
    let now = 1000;
    const cooled: string[] = [];
    const keys = new KeyCooldowns(500, () => now, (p) => cooled.push(p));
    assert.deepEqual(keys.usable('p', ['k1', 'k2']), ['k1', 'k2'], 'all usable at first');
    keys.rejected('p', 'k1', 401);
    assert.deepEqual(keys.usable('p', ['k1', 'k2']), ['k2'], 'k1 skipped');
    assert.deepEqual(keys.list(), [{ provider: 'p', key: '…k1', until: 1500, status: 401 }], 'listed with its fingerprint');
    now = 1100;
    keys.rejected('p', 'k2', 403);
    assert.deepEqual(keys.usable('p', ['k1', 'k2']), ['k1'], 'every key cooled: the one free first');
    now = 1500;
    assert.deepEqual(keys.usable('p', ['k1', 'k2']), ['k1'], 'k1 back after its cool-down');
    keys.accepted('p', 'k1');
    assert.deepEqual(keys.list().map((c) => c.key), ['…k2'], 'an accepted key is no longer listed');
    assert.deepEqual(cooled, ['p', 'p'], 'each cool-down told');
  });
});
