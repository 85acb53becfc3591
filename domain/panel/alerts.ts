// Alert rules (spec 2 sections 2.6, 4.2, 8): the built-in rules with their default values, and the
// pure checks of a rule change. Rules are evaluated at every metrics sample (services/panel/alerts);
// a node rule's subject is `node:<name>`, a soft-quota rule's `site:<id>` or `org:<id>`.

export type Severity = 'warning' | 'critical';
export const SEVERITIES: readonly Severity[] = ['warning', 'critical'];

/** What a rule measures; each kind has one set-based query in services/panel/alerts/evaluate.ts. */
export type RuleKind = 'heartbeat_age' | 'cpu' | 'load' | 'memory' | 'rootfs' | 'disk_quota' | 'inode_quota' | 'reconcile_missing' | 'reconcile_orphan';

export interface RuleValues {
  threshold: number;
  /** the condition holds this long before the alert fires (seconds) */
  for_seconds: number;
  /** a resolved alert whose condition returns within this time re-opens (seconds); later: a new alert */
  reopen_seconds: number;
  severity: Severity;
  enabled: boolean;
}

export interface BuiltInRule extends RuleValues {
  key: string;
  kind: RuleKind;
  /** the condition in words, `{threshold}` standing for the threshold */
  condition: string;
  unit: string;
  /** platform: node rules, seen at the root only; account: soft quotas, seen by the account's chain */
  scope: 'platform' | 'account';
}

const node = (key: string, kind: RuleKind, condition: string, unit: string, v: RuleValues): BuiltInRule => ({ key, kind, condition, unit, scope: 'platform', ...v });
const quota = (key: string, kind: RuleKind, condition: string, v: RuleValues): BuiltInRule => ({ key, kind, condition, unit: '%', scope: 'account', ...v });

export const BUILT_IN_RULES: readonly BuiltInRule[] = [
  node('node_heartbeat', 'heartbeat_age', 'no heartbeat for more than {threshold} s', 's', { threshold: 120, for_seconds: 0, reopen_seconds: 900, severity: 'critical', enabled: true }),
  node('node_cpu', 'cpu', 'CPU busy above {threshold} %', '%', { threshold: 90, for_seconds: 300, reopen_seconds: 900, severity: 'warning', enabled: true }),
  node('node_load', 'load', '1-minute load above {threshold}', '', { threshold: 8, for_seconds: 300, reopen_seconds: 900, severity: 'warning', enabled: true }),
  node('node_memory', 'memory', 'memory in use above {threshold} %', '%', { threshold: 90, for_seconds: 300, reopen_seconds: 900, severity: 'warning', enabled: true }),
  node('node_rootfs', 'rootfs', 'root filesystem in use above {threshold} %', '%', { threshold: 90, for_seconds: 60, reopen_seconds: 3600, severity: 'critical', enabled: true }),
  quota('disk_quota_80', 'disk_quota', 'disk use at or above {threshold} % of the quota', { threshold: 80, for_seconds: 0, reopen_seconds: 3600, severity: 'warning', enabled: true }),
  quota('disk_quota_100', 'disk_quota', 'disk use at or above {threshold} % of the quota', { threshold: 100, for_seconds: 0, reopen_seconds: 3600, severity: 'critical', enabled: true }),
  quota('inode_quota_80', 'inode_quota', 'files at or above {threshold} % of the inode limit', { threshold: 80, for_seconds: 0, reopen_seconds: 3600, severity: 'warning', enabled: true }),
  quota('inode_quota_100', 'inode_quota', 'files at or above {threshold} % of the inode limit', { threshold: 100, for_seconds: 0, reopen_seconds: 3600, severity: 'critical', enabled: true }),
  // what the latest reconciliation pass found (a yes/no condition: the threshold is unused)
  node('reconcile_missing', 'reconcile_missing', 'reconciliation found a managed file, the docroot, the whole site, or a database or its user missing on the node', '', { threshold: 0, for_seconds: 0, reopen_seconds: 3600, severity: 'critical', enabled: true }),
  node('reconcile_orphan', 'reconcile_orphan', 'reconciliation found a managed file of no site the panel knows (a stray config)', '', { threshold: 0, for_seconds: 0, reopen_seconds: 3600, severity: 'warning', enabled: true }),
];

export const builtInRule = (key: string): BuiltInRule | undefined => BUILT_IN_RULES.find((r) => r.key === key);

/** Longest for-time and re-open window a rule may have: 7 days. */
export const MAX_RULE_SECONDS = 7 * 86_400;

/** Why a rule's values are not acceptable (field and reason), or null. */
export function ruleValuesProblem(rule: BuiltInRule, v: RuleValues): { field: string; detail: string } | null {
  if (!Number.isFinite(v.threshold) || v.threshold < 0) return { field: 'threshold', detail: 'a number of at least 0' };
  if (rule.unit === '%' && v.threshold > 1000) return { field: 'threshold', detail: 'a percentage of at most 1000' };
  for (const f of ['for_seconds', 'reopen_seconds'] as const) {
    if (!Number.isInteger(v[f]) || v[f] < 0 || v[f] > MAX_RULE_SECONDS) return { field: f, detail: `whole seconds from 0 to ${MAX_RULE_SECONDS}` };
  }
  return null;
}

/** Alert states (spec 2 section 3): open → acknowledged → resolved; resolved → open inside the re-open window. */
export type AlertState = 'open' | 'acknowledged' | 'resolved';

/** Webhook event types (spec 2 section 6). */
export const EVENT_TYPES = ['alert.fired', 'alert.resolved'] as const;
export type EventType = (typeof EVENT_TYPES)[number];
