// Reconciliation rules (spec 2 sections 2.6, 3, 4.4.3; PANEL.md section 4): how one site's managed
// files on the hosting node compare with what the panel's record renders, and what a pass reports.
// Pure, so the activities, the API and the tests share one classification.

/** A site's verdict: the spec lists `in sync`, `drift`, `missing` "and continues". */
export const RECONCILE_STATUSES = ['in_sync', 'drift', 'missing', 'unreadable', 'pending'] as const;
export type ReconcileStatus = (typeof RECONCILE_STATUSES)[number];
export const STATUS_WORDS: Record<ReconcileStatus | 'orphan', string> = {
  in_sync: 'in sync',
  drift: 'drift: a managed file or the applied generation differs from the panel',
  missing: 'missing: a managed file, the docroot, the whole site, or a database or its user is not on the node',
  unreadable: 'unreadable: a managed file could not be read',
  pending: 'pending: an operation of the site is in flight or failed, so it is not judged',
  orphan: 'orphan: a managed file on the node of no site the panel knows',
};

export type ReconcileMode = 'dry-run' | 'on';
export type ReconcilePolicy = 'observe' | 'remediate';
export type ManagedKind = 'vhost' | 'pool' | 'cron' | 'cgroup';

/** One managed file as the panel renders it and as read on the node. */
export interface FileCheck {
  kind: ManagedKind;
  path: string;
  expected: string;
  /** the file's text on disk, null: missing */
  actual: string | null;
  /** why it could not be read (EISDIR, EACCES, ...) */
  readError?: string;
}

export type Finding =
  | { problem: 'site_missing'; detail: string }
  | { problem: 'missing'; kind: ManagedKind; path: string }
  | { problem: 'docroot_missing'; path: string }
  | { problem: 'unreadable'; kind: ManagedKind; path: string; error: string }
  | { problem: 'drift'; kind: ManagedKind; path: string; expected_digest: string; node_digest: string; diff: string[] }
  | { problem: 'generation'; panel: number; node: number }
  | { problem: 'suspension'; panel: boolean; node: boolean };

/** What a pass finds of a customer database on the hosting node's MariaDB. */
export type DatabaseFinding = { problem: 'database_missing'; database: string } | { problem: 'database_user_missing'; user: string };

/**
 * Classifies a database record against what the node's MariaDB holds: a database or user that is
 * gone is `missing`; a remediate pass recreates it empty (data comes back only from a restore point).
 */
export function classifyDatabase(d: { name: string; db_user: string }, node: { databases: string[]; users: string[] }): { status: 'in_sync' | 'missing'; findings: DatabaseFinding[] } {
  const findings: DatabaseFinding[] = [];
  if (!node.databases.includes(d.name)) findings.push({ problem: 'database_missing', database: d.name });
  if (!node.users.includes(d.db_user)) findings.push({ problem: 'database_user_missing', user: d.db_user });
  return { status: findings.length ? 'missing' : 'in_sync', findings };
}

export interface SiteVerdict {
  status: ReconcileStatus;
  findings: Finding[];
  /** whether rewriting the managed files would bring the site in sync (the node knows the site, every file was read) */
  remediable: boolean;
}

const DIFF_LINES = 12;

/**
 * A short unified-style excerpt of what differs (`-` the panel's line, `+` the node's), after the
 * common head and tail: enough for an operator to see what a manual edit changed.
 */
export function diffExcerpt(expected: string, actual: string): string[] {
  const a = expected.split('\n');
  const b = actual.split('\n');
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  const removed = a.slice(head, a.length - tail).map((l) => `-${l}`);
  const added = b.slice(head, b.length - tail).map((l) => `+${l}`);
  const out = [`@@ line ${head + 1} @@`, ...removed, ...added];
  return out.length > DIFF_LINES + 1 ? [...out.slice(0, DIFF_LINES), `… ${out.length - DIFF_LINES} more lines`] : out;
}

/**
 * Classifies a site: `node` is what the node applied (null: it has no record of the site);
 * `docroot` its folder on disk (a deleted docroot is `missing`, recreated empty by a rewrite).
 * Unreadable wins over missing, missing over drift: the worst finding names the status.
 */
export function classifySite(
  panel: { generation: number; suspended: boolean },
  node: { generation: number; suspended: boolean } | null,
  files: FileCheck[],
  digest: (text: string) => string,
  docroot: { path: string; present: boolean },
): SiteVerdict {
  if (!node) return { status: 'missing', findings: [{ problem: 'site_missing', detail: 'the node has no record of this site' }], remediable: false };
  const findings: Finding[] = docroot.present ? [] : [{ problem: 'docroot_missing', path: docroot.path }];
  for (const f of files) {
    if (f.readError !== undefined) findings.push({ problem: 'unreadable', kind: f.kind, path: f.path, error: f.readError });
    else if (f.actual === null) findings.push({ problem: 'missing', kind: f.kind, path: f.path });
    else if (f.actual !== f.expected) {
      findings.push({ problem: 'drift', kind: f.kind, path: f.path, expected_digest: digest(f.expected), node_digest: digest(f.actual), diff: diffExcerpt(f.expected, f.actual) });
    }
  }
  if (node.generation !== panel.generation) findings.push({ problem: 'generation', panel: panel.generation, node: node.generation });
  if (node.suspended !== panel.suspended) findings.push({ problem: 'suspension', panel: panel.suspended, node: node.suspended });
  const has = (p: Finding['problem']) => findings.some((f) => f.problem === p);
  const status: ReconcileStatus = has('unreadable') ? 'unreadable' : has('missing') || has('docroot_missing') ? 'missing' : findings.length ? 'drift' : 'in_sync';
  return { status, findings, remediable: status === 'drift' || status === 'missing' };
}

/** One digest for a site's managed files: of each file's kind and digest, in a fixed order. */
export function combinedDigest(files: Array<{ kind: string; digest: string | null }>, digest: (text: string) => string): string {
  return digest(
    [...files]
      .sort((x, y) => x.kind.localeCompare(y.kind))
      .map((f) => `${f.kind}:${f.digest ?? 'missing'}`)
      .join('\n'),
  );
}

/** Which domain a managed file belongs to, from its path under the node's root; null: not a managed file. */
export function managedFileDomain(root: string, file: string): { kind: ManagedKind; domain: string } | null {
  const rel = file.startsWith(`${root}/`) ? file.slice(root.length + 1) : null;
  if (!rel) return null;
  let m = /^etc\/nginx\/sites\/([^/]+)\.conf$/.exec(rel);
  if (m) return { kind: 'vhost', domain: m[1] };
  m = /^etc\/php\/[^/]+\/pool\.d\/([^/]+)\.conf$/.exec(rel);
  if (m) return { kind: 'pool', domain: m[1] };
  m = /^etc\/cron\.d\/([^/]+)$/.exec(rel);
  if (m) return { kind: 'cron', domain: m[1] };
  return null;
}

/** Whether a pass in `mode` rewrites a site of `policy` with this verdict. */
export const shouldRemediate = (mode: ReconcileMode, policy: ReconcilePolicy, v: SiteVerdict): boolean => mode === 'on' && policy === 'remediate' && v.remediable;
