import type { NodeOperation, OperationResult, SiteSpec } from './node-ops';

// What the panel's services and activities may ask of the hosting node that runs in the panel's own
// process (PANEL.md section 2): one interface, implemented by hosting-node/ and handed in by the
// composition root (main/), so nothing above reaches into the node's files or modules. Sites are
// named by id and domain; paths stay the node's, and every write runs as the site's own user.

/** A managed file of a site as a spec renders it on the node. */
export interface RenderedFile {
  /** `cgroup`: the site's control group, its settings read from the kernel (hosting-node/cgroups.ts) */
  kind: 'vhost' | 'pool' | 'cron' | 'cgroup';
  path: string;
  text: string;
}

/** One managed file as it is on disk: an unreadable file is reported, never thrown. */
export type ManagedRead = { text: string } | { missing: true } | { error: string };

/** The customer databases and users on a node's MariaDB (its own left out). */
export interface DatabaseInventory {
  databases: string[];
  users: string[];
}

/** An archive of a site (a restore point or the archive of a deleted site) with its SHA-256. */
export interface ArchiveInfo {
  id: string;
  siteId: string;
  domain: string;
  file: string;
  sha256: string;
  bytes: number;
  createdAt: string;
  /** entries of the site's folder left out: symbolic links, sockets, devices (never restored) */
  skipped?: string[];
}

/** A restore point extracted for inspection (a root-only folder). */
export interface InspectionInfo {
  id: string;
  path: string;
  bytes: number;
}

/** A refused archive: it does not match its SHA-256, or holds entries that are never extracted. */
export class UnsafeArchive extends Error {}

/** The node's backups (`-backup-dir`); the slow calls run in the node's operation queue. */
export interface NodeBackups {
  /** null: the node keeps no backups and refuses them */
  backupDir: string | null;
  /** archives of deleted sites, newest first */
  listSiteArchives(): ArchiveInfo[];
  /** restores a deleted site from its newest archive: it serves again under its old id and domain */
  restoreSiteArchive(siteId: string): Promise<{ archive: ArchiveInfo; result: OperationResult }>;
  /** extracts a restore point into a root-only folder, without TLS private keys */
  inspect(siteId: string, backupId: string, inspectionId: string, sha256: string): Promise<InspectionInfo>;
  /** removes an inspection folder; false: there was none */
  removeInspection(inspectionId: string): boolean;
  /** removes partial archives, orphaned temp files and inspection folders past their time */
  cleanup(inspectionExpired: (id: string) => boolean): Promise<{ removed: Array<{ path: string; kind: string; bytes: number }> }>;
}

export type SiteFileProblem = 'bad_path' | 'not_found' | 'not_a_directory' | 'is_a_directory' | 'too_large';

/** A file operation refused in a site's docroot (a path leaving it, a link on the way, too large). */
export class SiteFileError extends Error {
  constructor(
    readonly problem: SiteFileProblem,
    message: string,
  ) {
    super(message);
  }
}

export interface FileEntry {
  name: string;
  type: 'file' | 'directory' | 'symlink' | 'other';
  size: number;
  modified: string;
}

/** Writes into a docroot as the site's own user; paths are relative to the docroot. */
export interface SiteWriter {
  mkdir(rel: string): Promise<void>;
  /** writes `source` to the new file `tmp` (never through a link) and renames it to `rel` once complete; a failed source removes `tmp` */
  file(rel: string, tmp: string, mode: number, source: AsyncIterable<Buffer>): Promise<void>;
  symlink(rel: string, target: string): Promise<void>;
  copy(fromRel: string, rel: string): Promise<void>;
  rm(rel: string): Promise<void>;
  /** removes everything inside the folder `rel` (not the folder) */
  empty(rel: string): Promise<void>;
  /** removes every file under the docroot whose name matches `pattern` (temp files of a killed attempt) */
  sweep(pattern: RegExp): Promise<void>;
  /** ends the commands and waits for the writer: rejects with its error when one failed */
  done(): Promise<void>;
}

/** One site's docroot on the node: every path relative to it and confined to it (SiteFileError). */
export interface SiteDocroot {
  list(rel: string): Promise<{ path: string; entries: FileEntry[] }>;
  /** what an upload to `rel` would replace or create: the existing file's size, and the folders to create */
  uploadTarget(rel: string): Promise<{ exists: boolean; size: number; missingFolders: number }>;
  /** streams `body` to `rel`, at most `maxBytes` (too_large), reading and dropping the rest up to `drainBytes` */
  write(rel: string, body: AsyncIterable<Buffer>, maxBytes: number, drainBytes: number): Promise<{ path: string; bytes: number }>;
  /** deletes a file, a link (not what it points at) or a folder with everything in it; never the docroot */
  remove(rel: string): Promise<{ path: string; type: FileEntry['type'] }>;
  /** disk (MB allocated, 2 decimals) and inodes, as the node reports them */
  usage(): Promise<{ diskMb: number; inodes: number }>;
  /** a writer for a bulk copy (the importer), the docroot created if missing */
  writer(): SiteWriter;
  /** removes the node's placeholder pages of a new site while they are unchanged */
  removeWelcomePages(): void;
}

/** What needs only the node's root on this machine: a worker of another process may use it too. */
export interface NodeFiles {
  site(s: { id: string; domain: string }): SiteDocroot;
  /** MariaDB's socket (the importer loads dumps through it) */
  mariadbSocket: string;
  /** resident memory (MB) of each PHP-FPM pool's workers on this machine, by pool name (a site's domain) */
  poolMemoryMb(): Promise<Map<string, number>>;
}

export interface OwnNode extends NodeFiles {
  root: string;
  /** applies one operation (queued behind any other); a repeated id returns the first result */
  apply(op: NodeOperation): Promise<OperationResult>;
  backups: NodeBackups;
  // ---- reconciliation ----
  /** the managed files a spec renders on this node (what the panel expects on disk) */
  renderSite(s: SiteSpec): RenderedFile[];
  /** the spec the node last applied for a site, null: it has no record of it */
  appliedSite(siteId: string): SiteSpec | null;
  /** a site's docroot and whether it is on disk */
  docroot(domain: string): { path: string; present: boolean };
  readManaged(file: string): ManagedRead;
  /** every managed file on disk (vhosts, pools, cron files), known sites' or not */
  listManaged(): string[];
  /**
   * Rewrites the managed files of sites the node already serves to match their specs, in one
   * config test and one reload for the whole batch; idempotent by each rewrite's id (a repeated
   * id returns its first result). Each rewrite appends what it overwrote to <root>/state/reconcile.log.
   */
  rewriteSites(batch: Array<{ opId: string; site: SiteSpec }>): Promise<OperationResult[]>;
  /** what the node's MariaDB holds now; null: the node runs no MariaDB */
  databaseInventory(): Promise<DatabaseInventory | null>;
  /**
   * Recreates missing databases, empty, with their users (the password they had where the node
   * knows its hash) and grants; in the operation queue, idempotent by each recreation's id.
   */
  recreateDatabases(batch: Array<{ opId: string; database: string; user: string; locked: boolean }>): Promise<OperationResult[]>;
}
