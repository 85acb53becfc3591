// Limits (spec 2 section 2.3): the tightest value set on an org or any level above is in force;
// an absent value inherits; absent everywhere means no limit. Pure.

import type { EnforcedLimits, SiteLimits } from './node-ops';

/** API field names and units of every limit. `mailboxes` is kept and passed through unchanged. */
export const LIMITS = {
  cpu_percent: '% of one core',
  memory_mb: 'MB',
  disk_mb: 'MB',
  disk_io_bps: 'bytes per second',
  iops: 'operations per second',
  processes: 'count',
  php_workers: 'per site',
  inodes: 'files',
  websites: 'count',
  domains: 'count',
  databases: 'count',
  dns_zones: 'count',
  customer_accounts: 'count',
  resellers: 'count',
  mailboxes: 'count (email hosting is planned; not enforced)',
} as const;

export type LimitName = keyof typeof LIMITS;
export const LIMIT_NAMES = Object.keys(LIMITS) as LimitName[];

/** Counted items count against the account and every level above; at a limit nothing new is created below. */
export const COUNTED = ['websites', 'domains', 'databases', 'dns_zones', 'customer_accounts', 'resellers'] as const;
export type CountedItem = (typeof COUNTED)[number];

export type Limits = Partial<Record<LimitName, number>>;

export interface LevelLimits {
  orgId: string;
  name: string;
  limits: Limits;
}

export interface Effective {
  value: number | null;
  /** the org whose value binds (the tightest; the nearest one on a tie), null when unlimited */
  setBy: { org_id: string; name: string } | null;
}

/** Effective limits of the last org of `chain` (root first, the org itself last). */
export function resolveLimits(chain: LevelLimits[]): Record<LimitName, Effective> {
  const out = {} as Record<LimitName, Effective>;
  for (const name of LIMIT_NAMES) {
    let best: Effective = { value: null, setBy: null };
    for (const level of chain) {
      const v = level.limits[name];
      if (v === undefined || v === null) continue;
      if (best.value === null || v <= best.value) best = { value: v, setBy: { org_id: level.orgId, name: level.name } };
    }
    out[name] = best;
  }
  return out;
}

/** The limit names of `proposed` whose value is above what `own` allows (the editor's own limits). */
export function aboveOwn(proposed: Limits, own: Record<LimitName, Effective>): Array<{ limit: LimitName; value: number; own: number }> {
  const over: Array<{ limit: LimitName; value: number; own: number }> = [];
  for (const name of LIMIT_NAMES) {
    const v = proposed[name];
    const cap = own[name].value;
    if (v !== undefined && cap !== null && v > cap) over.push({ limit: name, value: v, own: cap });
  }
  return over;
}

/** The limits a site's node binds in its control group (the rest are counted, not enforced there). */
export function siteLimits(effective: Record<LimitName, Effective>): SiteLimits {
  return {
    cpuPercent: effective.cpu_percent.value,
    memoryMb: effective.memory_mb.value,
    processes: effective.processes.value,
    diskIoBps: effective.disk_io_bps.value,
    iops: effective.iops.value,
  };
}

/**
 * A site's limits as the API shows them: each value with what binds it on the site's node,
 * `enforced` (the kernel, the site's control group; PHP workers: the pool) or `bookkeeping`
 * (counted and shown, not bound there). `node` null or absent: the node never said, so nothing is enforced.
 */
export function siteLimitsView(l: SiteLimits, phpWorkers: number | null, node: EnforcedLimits | null | undefined) {
  const v = (value: number | null, enforced: boolean | undefined) => ({ value, on_node: enforced ? ('enforced' as const) : ('bookkeeping' as const) });
  return {
    cpu_percent: v(l.cpuPercent, node?.cpu),
    memory_mb: v(l.memoryMb, node?.memory),
    processes: v(l.processes, node?.pids),
    disk_io_bps: v(l.diskIoBps, node?.io),
    iops: v(l.iops, node?.io),
    php_workers: v(phpWorkers, true),
  };
}
