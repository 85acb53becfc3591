import type { RouteMeasure } from './preferences';

// What this process measured of its upstreams (issue 36 parts 2 and 3): each route's latency and
// throughput (moving averages, for `provider.sort`), and the provider keys a provider rejected
// (401/403), skipped until their cool-down ends. Pure: the caller passes the clock. Not shared
// between processes: each learns from its own traffic.

/** Weight of a new sample in the moving averages. */
const ALPHA = 0.3;
const ewma = (prev: number | null, x: number) => (prev === null ? x : prev + ALPHA * (x - prev));

export class RouteMeasures {
  private readonly byRoute = new Map<string, RouteMeasure>();

  /** ms from sending to the provider's answer headers */
  latency(key: string, ms: number): void {
    const m = this.get(key);
    this.byRoute.set(key, { ...m, latencyMs: ewma(m.latencyMs, ms) });
  }

  /** output tokens per second of a whole answer */
  throughput(key: string, tokensPerSecond: number): void {
    const m = this.get(key);
    this.byRoute.set(key, { ...m, tokensPerSecond: ewma(m.tokensPerSecond, tokensPerSecond) });
  }

  get(key: string): RouteMeasure {
    return this.byRoute.get(key) ?? { latencyMs: null, tokensPerSecond: null };
  }

  entries(): Array<[string, RouteMeasure]> {
    return [...this.byRoute.entries()];
  }
}

export interface CooledKey {
  provider: string;
  /** the key's fingerprint (never the key): its last 4 characters */
  key: string;
  until: number;
  /** the status the provider rejected it with */
  status: number;
}

/** The last characters of a key: enough to tell an operator's keys apart, never the secret. */
export const keyFingerprint = (key: string) => `…${key.slice(-4)}`;

/** Provider keys rejected by their provider, skipped until `until`. */
export class KeyCooldowns {
  private readonly cooled = new Map<string, CooledKey>();

  constructor(
    readonly cooldownMs: number,
    private readonly now: () => number,
    /** told of each key that starts a cool-down (a counter) */
    private readonly onCooled: (provider: string) => void = () => {},
  ) {}

  private static id(provider: string, key: string) {
    return `${provider}\u0000${key}`;
  }

  /** The provider's keys to use, cooled ones left out; when every key is cooled, the one free first. */
  usable(provider: string, keys: readonly string[]): string[] {
    const now = this.now();
    const live = keys.filter((k) => (this.cooled.get(KeyCooldowns.id(provider, k))?.until ?? 0) <= now);
    if (live.length || !keys.length) return live;
    return [[...keys].sort((a, b) => this.cooled.get(KeyCooldowns.id(provider, a))!.until - this.cooled.get(KeyCooldowns.id(provider, b))!.until)[0]];
  }

  rejected(provider: string, key: string, status: number): void {
    this.onCooled(provider);
    this.cooled.set(KeyCooldowns.id(provider, key), { provider, key: keyFingerprint(key), until: this.now() + this.cooldownMs, status });
  }

  accepted(provider: string, key: string): void {
    this.cooled.delete(KeyCooldowns.id(provider, key));
  }

  /** The keys cooling down now (the admin API and /metrics). */
  list(): CooledKey[] {
    const now = this.now();
    return [...this.cooled.values()].filter((c) => c.until > now);
  }
}
