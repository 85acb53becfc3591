import assert from 'node:assert/strict';
import { RETRY_DEFAULTS, type CatalogRoute } from '../../domain/catalog/model';
import { CircuitBreakers, routeOrder } from '../../domain/catalog/routing';

// The pure rules behind routing (domain/catalog/routing.ts): the order of routes and the breaker's states.

const route = (provider: string, priority: number, weight = 1): CatalogRoute => ({
  provider: { id: provider, kind: 'openai', base_url: 'http://x/', api_keys: [], credits_per_cost_unit: '1', settings: {} },
  upstreamModel: 'm',
  retry: RETRY_DEFAULTS,
  priority,
  weight,
});

describe('routing rules', () => {
  it('orders by priority, and by weight among equal priorities', () => {
    const routes = [route('c', 1), route('a', 0, 3), route('b', 0, 1)];
    const firsts = { a: 0, b: 0 } as Record<string, number>;
    // a deterministic spread of random values over [0, 1)
    for (let i = 0; i < 400; i++) {
      const order = routeOrder(routes, () => (i + 0.5) / 400);
      assert.equal(order[2].provider.id, 'c', 'a higher priority number comes last');
      firsts[order[0].provider.id]++;
    }
    assert.deepEqual(firsts, { a: 300, b: 100 }, 'weight 3 against 1 puts a first three times as often as b');
  });

  it('opens after N failures within the window, half-opens for one trial after the cool-down', () => {
    let now = 0;
    const b = new CircuitBreakers({ failures: 3, windowMs: 1000, cooldownMs: 500 }, () => now);
    // Failures spread wider than the window do not open it.
    for (const t of [0, 600, 1200]) {
      now = t;
      assert.ok(b.acquire('r'), `failures spread wider than the window keep the breaker closed at ${t} ms`);
      b.failed('r');
    }
    assert.equal(b.stateOf('r'), 'closed', 'failures spread wider than the window leave the breaker closed');
    now = 1300;
    b.failed('r');
    now = 1400;
    b.failed('r');
    assert.equal(b.stateOf('r'), 'open', 'the third failure within the window opens the breaker');
    assert.equal(b.acquire('r'), false, 'an open breaker lets no request through');
    now = 1900;
    assert.equal(b.stateOf('r'), 'half_open', 'after the cool-down the breaker is half-open');
    assert.equal(b.acquire('r'), true, 'one trial');
    assert.equal(b.acquire('r'), false, 'only one');
    b.failed('r');
    assert.equal(b.stateOf('r'), 'open', 'a failed trial opens the breaker again');
    now = 2400;
    assert.ok(b.acquire('r'), 'after the open interval one trial passes');
    b.released('r'); // the client went away: the trial is given back
    assert.ok(b.acquire('r'), 'a trial given back can be taken again');
    b.succeeded('r');
    assert.equal(b.stateOf('r'), 'closed', 'a successful trial closes the breaker');
    assert.ok(b.acquire('r'), 'a successful trial closes the breaker');
  });

  it('issue 33 item 4: every route open, the one whose cool-down ends first takes its trial now; one trial per route at a time', () => {
    let now = 0;
    const b = new CircuitBreakers({ failures: 1, windowMs: 1000, cooldownMs: 500 }, () => now);
    b.failed('a');
    now = 100;
    b.failed('b'); // a's cool-down ends at 500, b's at 600
    assert.equal(b.acquire('a'), false, 'a is open: not taken by the usual acquire');
    assert.equal(b.trialOut('a'), false, 'no trial is out on a yet');
    assert.equal(b.acquireEarliest(['b', 'a']), 'a', 'a cools down first: its trial is taken early');
    assert.equal(b.trialOut('a'), true, 'a has its trial out');
    assert.equal(b.acquireEarliest(['b', 'a']), 'b', 'with a trial out on a, b takes its own');
    assert.equal(b.acquireEarliest(['b', 'a']), null, 'every trial is out: nothing more is sent');
    b.succeeded('a');
    assert.equal(b.stateOf('a'), 'closed', 'the early trial worked: a is closed');
    b.failed('b');
    assert.equal(b.stateOf('b'), 'open', 'the early trial failed: b is open again');
    assert.equal(b.trialOut('b'), false, 'and its trial is free for the next request');
    assert.equal(b.acquireEarliest(['b', 'x']), 'b', 'a route never failed (x) is not a candidate');
  });
});
