import type { CatalogRoute } from './model';

// Route order and per-route circuit breaking (issue 23, feature 1). Pure: the caller passes the
// clock and the random source. The breaker's state lives in each API process (not shared).

/**
 * The order a request tries the routes: by priority, lowest first; within one priority a
 * weighted random order (a route of weight 3 comes first three times as often as one of weight 1).
 */
export function routeOrder(routes: readonly CatalogRoute[], random: () => number): CatalogRoute[] {
  const out: CatalogRoute[] = [];
  const priorities = [...new Set(routes.map((r) => r.priority))].sort((a, b) => a - b);
  for (const p of priorities) {
    const group = routes.filter((r) => r.priority === p);
    while (group.length) {
      let pick = random() * group.reduce((s, r) => s + r.weight, 0);
      let i = 0;
      while (i < group.length - 1 && pick >= group[i].weight) pick -= group[i++].weight;
      out.push(...group.splice(i, 1));
    }
  }
  return out;
}

export const routeKey = (r: CatalogRoute) => `${r.provider.id}/${r.upstreamModel}`;

export interface BreakerSettings {
  /** consecutive failures that open a route's circuit */
  failures: number;
  /** … counted only when they all fall within this many ms */
  windowMs: number;
  /** an open route is skipped this long, then one trial request may use it (half-open) */
  cooldownMs: number;
}

export const BREAKER_DEFAULTS: BreakerSettings = { failures: 5, windowMs: 60_000, cooldownMs: 30_000 };

interface RouteState {
  failures: number;
  firstFailureAt: number;
  openUntil: number | null;
  trial: boolean;
}

export type BreakerState = 'closed' | 'open' | 'half_open';

/** Per-route circuit breakers: closed → open after repeated failures → half-open (one trial) → closed or open again. */
export class CircuitBreakers {
  private routes = new Map<string, RouteState>();

  constructor(
    private readonly s: BreakerSettings,
    private readonly now: () => number,
  ) {}

  private state(key: string): RouteState {
    let st = this.routes.get(key);
    if (!st) this.routes.set(key, (st = { failures: 0, firstFailureAt: 0, openUntil: null, trial: false }));
    return st;
  }

  stateOf(key: string): BreakerState {
    const st = this.routes.get(key);
    if (!st || st.openUntil === null) return 'closed';
    return this.now() < st.openUntil || st.trial ? 'open' : 'half_open';
  }

  /** Whether a request may use the route now; a half-open route is taken by its one trial. */
  acquire(key: string): boolean {
    const st = this.state(key);
    if (st.openUntil === null) return true;
    if (this.now() < st.openUntil || st.trial) return false;
    st.trial = true;
    return true;
  }

  /** Whether the route is open with its one trial out (nothing may use it until that trial ends). */
  trialOut(key: string): boolean {
    const st = this.routes.get(key);
    return !!st && st.openUntil !== null && st.trial;
  }

  /**
   * Every route is open: the one whose cool-down ends first takes its trial now rather than the
   * request being refused (a breaker sheds load from a failing route, never keeps a recovered one
   * refused for its whole cool-down). Null when every route's trial is out already.
   */
  acquireEarliest(keys: readonly string[]): string | null {
    let pick: [string, RouteState] | null = null;
    for (const key of keys) {
      const st = this.routes.get(key);
      if (st && st.openUntil !== null && !st.trial && (!pick || st.openUntil < pick[1].openUntil!)) pick = [key, st];
    }
    if (!pick) return null;
    pick[1].trial = true;
    return pick[0];
  }

  /** The provider answered (whatever it said about the request): the route works. */
  succeeded(key: string): void {
    this.routes.delete(key);
  }

  /** The provider failed (no connection, timeout, 5xx, 429). */
  failed(key: string): void {
    const st = this.state(key);
    const now = this.now();
    if (st.trial || st.openUntil !== null) {
      // the half-open trial failed: open again for a new cool-down
      Object.assign(st, { trial: false, openUntil: now + this.s.cooldownMs });
      return;
    }
    if (st.failures === 0 || now - st.firstFailureAt > this.s.windowMs) Object.assign(st, { failures: 0, firstFailureAt: now });
    st.failures++;
    if (st.failures >= this.s.failures) st.openUntil = now + this.s.cooldownMs;
  }

  /** A use that ended without a verdict on the provider (the client went away): frees the trial. */
  released(key: string): void {
    const st = this.routes.get(key);
    if (st) st.trial = false;
  }
}
