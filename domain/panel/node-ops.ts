import { defineSignal } from '@temporalio/workflow';
import type { CronRun } from './cron';
import type { PhpValues } from './php-values';

// What the panel asks of a hosting node, and what a node tells the panel (PANEL.md sections 1-2, 4).
// The same operations are applied by the panel itself on its own hosting node and by a node's agent
// (`panel-host serve`) on every other node; both apply them idempotently, keyed by the operation id.

export const HOSTING_NODE = 'hosting';

/** A site as the node renders it: everything the vhost, the PHP pool, the cron file and the docroot need. */
export interface SiteSpec {
  id: string;
  domain: string;
  aliases: string[];
  /** null: a static site (no PHP pool) */
  phpVersion: string | null;
  /** cron lines in crontab syntax (5 time fields then the command), run as the site's user */
  cron: string[];
  suspended: boolean;
  /** PHP-FPM pool settings the panel owns: the site cannot override them */
  php: { workers: number | null; allowUrlFopen: boolean; disabledFunctions: string[]; /** the owner's values within the operator's bounds (absent before they existed) */ values?: PhpValues };
  /** the panel's generation of this site's configuration; the node reports the one it applied */
  generation: number;
  /** the attached TLS certificate; absent or null: HTTP only */
  tls?: SiteTls | null;
  /** the account's effective resource limits, bound on the node by the site's control group; absent: none (an older panel) */
  limits?: SiteLimits;
  /** the OpenSSH public keys (authorized_keys lines) that may log in over SFTP; absent: none */
  sftpKeys?: string[];
  /** the site's soft disk quota (MB): at or over it the node makes its SFTP read-only; absent: an older panel */
  quotaMb?: number;
}

/** A site's resource limits (spec 2.3) as the node enforces them; null: unlimited. */
export interface SiteLimits {
  /** % of one core (200: two cores) */
  cpuPercent: number | null;
  memoryMb: number | null;
  processes: number | null;
  /** disk I/O, bytes per second (reads and writes each) */
  diskIoBps: number | null;
  /** disk I/O operations per second (reads and writes each) */
  iops: number | null;
}

export const NO_SITE_LIMITS: SiteLimits = { cpuPercent: null, memoryMb: null, processes: null, diskIoBps: null, iops: null };

/** Which limits a node's kernel binds (a control group per site); the others are bookkeeping only there. */
export interface EnforcedLimits {
  cpu: boolean;
  memory: boolean;
  pids: boolean;
  io: boolean;
}

/**
 * A site's certificate as the node writes it under <root>/etc/ssl/<domain>/. The private key travels
 * only in the operation that attaches it (stripped from the operation's row once it is finished);
 * every later site.apply of the site carries the certificate alone and the node keeps its key file.
 */
export interface SiteTls {
  /** PEM chain, leaf first */
  certificate: string;
  /** PKCS#8 PEM, only in the attaching operation */
  key?: string;
}

export type NodeOperation =
  | { id: string; kind: 'site.apply'; site: SiteSpec }
  | { id: string; kind: 'site.delete'; siteId: string; domain: string }
  | { id: string; kind: 'database.create'; database: string; user: string; password: string }
  | { id: string; kind: 'database.delete'; database: string; user: string }
  /** a new password for the database's user (a reset): both of its accounts, nothing else changes */
  | { id: string; kind: 'database.password'; database: string; user: string; password: string }
  /** locks (an org above is suspended) or unlocks the database's user: both of its accounts */
  | { id: string; kind: 'database.lock'; database: string; user: string; locked: boolean }
  | BackupOperation;

/** The operations on a customer database, each run by a `database-op-<op_id>` workflow. */
export type DatabaseOpKind = Extract<NodeOperation['kind'], `database.${string}`>;

/**
 * Backups of a site on its node (`-backup-dir`, PANEL.md section 2): a restore point (files, a
 * consistent dump of each database, config), its removal, and a restore of one into a new site
 * (new databases, each with its own new user and password). Archive names are the ids below.
 */
export type BackupOperation =
  | { id: string; kind: 'backup.create'; backupId: string; siteId: string; databases: string[] }
  | { id: string; kind: 'backup.delete'; backupId: string; siteId: string }
  | {
      id: string;
      kind: 'backup.restore';
      backupId: string;
      /** the site the restore point was taken of */
      fromSiteId: string;
      /** the SHA-256 the panel recorded: the archive must match it before anything is extracted */
      sha256: string;
      /** the new site */
      site: SiteSpec;
      databases: Array<{ from: string; name: string; user: string; password: string }>;
    };

export type OperationResult =
  | { ok: true; detail?: Record<string, unknown> }
  | { ok: false; error: string; /** the node refused (bad request, not capable) rather than failed */ refused: boolean };

/** What a node can serve, reported at enrolment and with every heartbeat. */
export interface NodeFacts {
  webServer: 'nginx' | 'builtin';
  phpVersions: string[];
  mariadb: boolean;
  /** the roles the node can serve given the above: `web` always, `db` with MariaDB */
  roles: Array<'web' | 'db'>;
  /** the address the node serves sites on (its web listener) */
  webAddress: string;
  /** whether the node keeps backups of its sites (`panel-host serve -backup-dir`); absent: unknown */
  backups?: boolean;
  /** whether attached certificates are served (nginx with a TLS port); absent: unknown */
  tls?: boolean;
  /** whether each site runs as its own system user (a root agent with useradd); absent: unknown (an older agent) */
  siteUsers?: boolean;
  /** which limits the node binds per site (control groups); absent: none (an older agent) */
  limits?: EnforcedLimits;
  /** the node's SFTP server (its own sshd): where it listens and each site's login; absent or null: no SFTP on this node */
  sftp?: { host: string; port: number; users: Record<string, string>; /** sites whose SFTP is read-only: measured at or over their quota (absent: an older node) */ readOnly?: string[] } | null;
}

/** Metrics from the node's /proc (spec 2.6). */
export interface NodeMetrics {
  bootId: string;
  uptimeSeconds: number;
  /** busy share of all CPUs since the previous sample, 0..100 */
  cpuPercent: number;
  load: [number, number, number];
  memory: { totalMb: number; availableMb: number };
  rootFs: { totalMb: number; freeMb: number };
  network: { rxBytes: number; txBytes: number };
  sampledAt: string;
}

/** Disk and inode use of each site's docroot on a node (soft quotas, spec 2.3 rule 3). */
export interface SiteUsage {
  siteId: string;
  diskMb: number;
  inodes: number;
  /** from the site's control group where the node has one (counters since the group was made); absent: none */
  group?: GroupUsage;
}

/** What a site's control group counted: for metering and the usage page. */
export interface GroupUsage {
  cpuSeconds: number;
  memoryMb: number;
  /** highest memory use since the group was made; null where the kernel keeps no peak */
  memoryPeakMb: number | null;
  processes: number;
  /** bytes read and written on the node root's disk; null: no block device to count on */
  ioBytes: number | null;
}

const DOMAIN = /^(?=.{1,253}$)(?!-)[a-z0-9-]{1,63}(?<!-)(\.(?!-)[a-z0-9-]{1,63}(?<!-))+$/;

/** A fully qualified, lower-case DNS name with at least two labels (no wildcards, no trailing dot). */
export const isDomain = (s: string): boolean => DOMAIN.test(s);

/** PHP function names in disable_functions: identifiers only, so nothing can be injected into the pool file. */
export const isPhpIdentifier = (s: string): boolean => /^[A-Za-z_][A-Za-z0-9_]{0,63}$/.test(s);


// The node API (`panel-api serve -node-api-listen ADDR`), which agents call with
// `Authorization: Bearer <node token>` (shown once when the node is added, kept in -token-file):
//   POST /node/v1/enrol                 {node, facts, agentStartedAt}         → {node, heartbeatSeconds}
//   GET  /node/v1/operations?wait=S     long poll, at most S (≤ 30) seconds   → {operations: NodeOperation[]}
//   POST /node/v1/operations/{id}/result OperationResult                      → 204 (a repeated result is a no-op)
//   POST /node/v1/heartbeat             {facts, metrics, usage, agentStartedAt, reconnects} → 204
export const NODE_API_PREFIX = '/node/v1';

export interface EnrolRequest {
  node: string;
  facts: NodeFacts;
  /** when this agent process started: a new value means the agent restarted */
  agentStartedAt: string;
}

export interface Heartbeat {
  facts: NodeFacts;
  metrics: NodeMetrics;
  usage: SiteUsage[];
  agentStartedAt: string;
  /** times this agent process lost the panel and got it back */
  reconnects: number;
  /** site cron runs started or finished since the last accepted heartbeat (absent: an older agent) */
  cronRuns?: CronRun[];
}

/** Node names: a DNS label. */
export const isNodeName = (s: string): boolean => /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/.test(s);

/** Sent to an operation's workflow when its node's result is recorded, so it need not wait for its next poll. */
export const nodeOpReportedSignal = defineSignal('nodeOpReported');
