import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { sitePaths } from '../domain/panel/node-config';
import type { BackupOperation, OperationResult, SiteSpec } from '../domain/panel/node-ops';
import type { ArchiveInfo, InspectionInfo } from '../domain/panel/own-node';
import type { Logger } from '../platform/logger';
import { siteOwner } from './site-users';
import { clearSiteFolder } from './site-writer';
import { backupPaths, cleanupBackupDir, extractArchive, isTlsKey, listArchives, writeArchive, type DumpTarget } from './backups';

// The node's side of backups (`-backup-dir`): restore points of its sites (operations from the
// panel), archives of deleted sites, restores, inspection folders and cleanup. A node without a
// backup folder refuses all of it with a clear reason. Called inside the node's operation queue,
// so two of these never run at once and cleanup never sees a backup in progress.

export interface SiteBackupsOptions {
  root: string;
  backupDir: string | null;
  sites: Record<string, SiteSpec>;
  mariadb: () => (DumpTarget & { createDatabase(database: string, user: string, password: string): Promise<void> }) | null;
  /** applies a site's spec (vhost, pool, cron) once its files are back */
  applySite(spec: SiteSpec): Promise<OperationResult>;
  /** an error the node reports as refused */
  refuse(message: string): Error;
  logger: Logger;
}

const ID = /^[A-Za-z0-9_-]{1,64}$/;

export const NO_BACKUP_DIR = 'this node keeps no backups (it runs without -backup-dir): backups of its sites are refused';

/** Moves a folder into place: a rename, or a copy where the backup folder is on another filesystem. */
function moveDir(from: string, to: string): void {
  fs.mkdirSync(path.dirname(to), { recursive: true });
  try {
    fs.renameSync(from, to);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err;
    fs.cpSync(from, to, { recursive: true, preserveTimestamps: true });
    fs.rmSync(from, { recursive: true, force: true });
  }
}

export function createSiteBackups(o: SiteBackupsOptions) {
  const dir = (): string => {
    if (!o.backupDir) throw o.refuse(NO_BACKUP_DIR);
    return o.backupDir;
  };
  const paths = () => backupPaths(dir());

  /** Extracts an archive into a fresh staging folder (SHA-256 checked, unsafe entries refused) and runs `use` on it; the folder goes afterwards. */
  const withExtracted = async <T>(file: string, expected: string | null, use: (staged: string) => Promise<T>): Promise<T> => {
    const staged = `${paths().staging}/x-${randomUUID()}`;
    try {
      await extractArchive(file, staged, { expected });
      return await use(staged);
    } finally {
      fs.rmSync(staged, { recursive: true, force: true });
    }
  };

  /** Puts the site folder of an extracted archive in place of `spec`'s, then applies the spec; refused while another site serves its domain. */
  const bringBack = async (staged: string, spec: SiteSpec): Promise<OperationResult> => {
    const clash = Object.values(o.sites).find((s) => s.id !== spec.id && [s.domain, ...s.aliases].some((n) => n === spec.domain || spec.aliases.includes(n)));
    if (clash) throw o.refuse(`${spec.domain} is served on this node by site ${clash.id}`);
    const siteDir = sitePaths(o.root, spec.domain).siteDir;
    const owner = siteOwner(o.root, spec.id);
    if (owner && fs.existsSync(siteDir)) await clearSiteFolder(siteDir, owner);
    fs.rmSync(siteDir, { recursive: true, force: true });
    if (fs.existsSync(`${staged}/site`)) moveDir(`${staged}/site`, siteDir);
    // a change made while the restore waited (a newer generation applied already) stays applied
    const current = o.sites[spec.id];
    return o.applySite(current && current.generation > spec.generation ? current : spec);
  };

  async function apply(op: BackupOperation): Promise<OperationResult> {
    const p = paths();
    switch (op.kind) {
      case 'backup.create': {
        const site = o.sites[op.siteId];
        if (!site) throw o.refuse(`site ${op.siteId} is not on this node`);
        const db = o.mariadb();
        if (op.databases.length && !db) throw o.refuse('this node runs no MariaDB, so the databases of the site cannot be dumped');
        const info = await writeArchive({
          file: p.restorePoint(op.siteId, op.backupId),
          stagingRoot: p.staging,
          kind: 'restore-point',
          id: op.backupId,
          site,
          siteDir: sitePaths(o.root, site.domain).siteDir,
          databases: op.databases,
          mariadb: db,
        });
        return { ok: true, detail: { file: path.relative(dir(), info.file), sha256: info.sha256, bytes: info.bytes, created_at: info.createdAt, databases: op.databases, skipped: info.skipped } };
      }
      case 'backup.delete': {
        const file = p.restorePoint(op.siteId, op.backupId);
        const existed = fs.existsSync(file);
        for (const f of [file, `${file}.sha256`, `${file}.json`, `${file}.part`]) fs.rmSync(f, { force: true });
        return { ok: true, detail: { existed } };
      }
      case 'backup.restore': {
        const db = o.mariadb();
        if (op.databases.length && !db) throw o.refuse('this node runs no MariaDB, so the databases cannot be restored');
        return withExtracted(p.restorePoint(op.fromSiteId, op.backupId), op.sha256, async (staged) => {
          const manifest = JSON.parse(fs.readFileSync(`${staged}/manifest.json`, 'utf8')) as { databases: Array<{ name: string; file: string }> };
          for (const d of op.databases) {
            const dump = manifest.databases.find((m) => m.name === d.from);
            if (!dump) throw o.refuse(`the restore point holds no database ${d.from}`);
            await db!.createDatabase(d.name, d.user, d.password);
            await db!.load(d.name, `${staged}/databases/${d.from}.sql`);
          }
          const applied = await bringBack(staged, op.site);
          return applied.ok ? { ok: true, detail: { ...applied.detail, databases: op.databases.map((d) => d.name) } } : applied;
        });
      }
    }
  }

  return {
    apply,
    /** Archives a site about to be deleted (files and config); nothing when the node keeps no backups. */
    async archiveBeforeDelete(siteId: string): Promise<ArchiveInfo | null> {
      const site = o.sites[siteId];
      if (!o.backupDir || !site) return null;
      const p = paths();
      const id = `${new Date().toISOString().replace(/[-:.]/g, '')}-${randomUUID().slice(0, 8)}`;
      const info = await writeArchive({ file: p.archive(siteId, id), stagingRoot: p.staging, kind: 'site-archive', id, site, siteDir: sitePaths(o.root, site.domain).siteDir, databases: [], mariadb: null });
      o.logger.info({ site: siteId, archive: info.file, sha256: info.sha256 }, 'site archived before its deletion');
      return info;
    },
    listSiteArchives: (): ArchiveInfo[] => listArchives(paths().archives),
    /** Restores a deleted site from its newest archive: serves again under its old id and domain. */
    async restoreSiteArchive(siteId: string): Promise<{ archive: ArchiveInfo; result: OperationResult }> {
      const archive = listArchives(paths().archives).find((a) => a.siteId === siteId);
      if (!archive) throw o.refuse(`no archive of site ${siteId} on this node`);
      if (o.sites[siteId]) throw o.refuse(`site ${siteId} exists on this node`);
      const result = await withExtracted(archive.file, archive.sha256, async (staged) => {
        const spec = JSON.parse(fs.readFileSync(`${staged}/config/site.json`, 'utf8')) as SiteSpec;
        if (spec.id !== siteId) throw o.refuse(`the archive holds site ${spec.id}, not ${siteId}`);
        // archives never hold private keys: the restored site serves HTTP until its certificate is attached again
        return bringBack(staged, { ...spec, tls: null });
      });
      return { archive, result };
    },
    /** Extracts a restore point into a root-only folder (0700) for inspection, without TLS private keys. */
    async inspect(siteId: string, backupId: string, inspectionId: string, sha256: string): Promise<InspectionInfo> {
      if (!ID.test(inspectionId)) throw o.refuse('bad inspection id');
      const p = paths();
      const target = p.inspection(inspectionId);
      fs.mkdirSync(p.inspections, { recursive: true, mode: 0o700 });
      await extractArchive(p.restorePoint(siteId, backupId), target, { expected: sha256, skip: isTlsKey });
      let bytes = 0;
      for (const e of fs.readdirSync(target, { recursive: true, withFileTypes: true })) if (e.isFile()) bytes += fs.statSync(path.join(e.parentPath, e.name)).size;
      return { id: inspectionId, path: target, bytes };
    },
    removeInspection(inspectionId: string): boolean {
      if (!ID.test(inspectionId)) throw o.refuse('bad inspection id');
      const target = paths().inspection(inspectionId);
      const existed = fs.existsSync(target);
      fs.rmSync(target, { recursive: true, force: true });
      return existed;
    },
    cleanup: (inspectionExpired: (id: string) => boolean) => cleanupBackupDir(dir(), { inspectionExpired }),
  };
}
