import { createHash, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import * as tar from 'tar';
import type { SiteSpec } from '../domain/panel/node-ops';
import { UnsafeArchive, type ArchiveInfo } from '../domain/panel/own-node';
import { readIfExists, writeFileAtomic } from './files';

// Backups of a node's sites (PANEL.md section 2, `-backup-dir`): restore points and deleted-site
// archives are one gzip-compressed tar each, streamed from disk to disk (bounded memory, whatever
// the site's size), with a manifest inside and the archive's SHA-256 beside it. Every archive is
// written under a temp name and renamed when complete, so a kill mid-way leaves only a `.part`
// file that nothing lists and cleanup removes. File names come from ids the panel generates
// (UUIDs) and times, never from user input. Extraction verifies the SHA-256 first and refuses
// links, device files and paths outside the target.
//
// Layout of an archive: manifest.json, config/site.json (the site's spec), databases/<name>.sql
// (a consistent dump of each database), site/... (the site's folder: public_html and the rest,
// without PHP's tmp).

export const ARCHIVE_FORMAT = 1;

export interface ArchiveManifest {
  format: number;
  kind: 'restore-point' | 'site-archive';
  id: string;
  site: { id: string; domain: string };
  created_at: string;
  databases: Array<{ name: string; file: string; bytes: number; sha256: string }>;
}

/** What the backups need of the node's MariaDB. */
export interface DumpTarget {
  dump(database: string, file: string): Promise<void>;
  load(database: string, file: string): Promise<void>;
}

const ID = /^[A-Za-z0-9_-]{1,64}$/;

export function backupPaths(dir: string) {
  return {
    restorePoints: (siteId: string) => `${dir}/restore-points/${siteId}`,
    restorePoint: (siteId: string, id: string) => `${dir}/restore-points/${siteId}/${id}.tar.gz`,
    archives: `${dir}/archives`,
    archive: (siteId: string, id: string) => `${dir}/archives/${siteId}/${id}.tar.gz`,
    inspections: `${dir}/inspect`,
    inspection: (id: string) => `${dir}/inspect/${id}`,
    staging: `${dir}/.staging`,
  };
}

/** SHA-256 of a file, streamed. */
export async function fileSha256(file: string): Promise<string> {
  const h = createHash('sha256');
  await pipeline(fs.createReadStream(file), h);
  return h.digest('hex');
}

/** The SHA-256 written beside an archive when it was completed, or null. */
export const recordedSha256 = (file: string): string | null => readIfExists(`${file}.sha256`)?.split(/\s/)[0] ?? null;

/**
 * Writes the archive of a site: dumps its databases into a staging folder, then streams manifest,
 * config, dumps and the site's folder through gzip into `<file>.part`, hashing on the way, and
 * renames it to `file` (with `<file>.sha256`) once complete.
 */
export async function writeArchive(o: {
  file: string;
  stagingRoot: string;
  kind: ArchiveManifest['kind'];
  id: string;
  site: SiteSpec;
  siteDir: string;
  databases: string[];
  mariadb: DumpTarget | null;
}): Promise<ArchiveInfo> {
  if (!ID.test(o.id) || !ID.test(o.site.id)) throw new Error('bad archive or site id');
  if (o.databases.length && !o.mariadb) throw new Error('this node runs no MariaDB: the site has databases it cannot dump');
  const staging = path.join(o.stagingRoot, `${o.id}-${randomUUID().slice(0, 8)}`);
  fs.mkdirSync(`${staging}/databases`, { recursive: true, mode: 0o700 });
  fs.mkdirSync(`${staging}/config`, { recursive: true, mode: 0o700 });
  fs.mkdirSync(path.dirname(o.file), { recursive: true, mode: 0o700 });
  const part = `${o.file}.part`;
  try {
    const databases: ArchiveManifest['databases'] = [];
    for (const name of o.databases) {
      const file = `databases/${name}.sql`;
      await o.mariadb!.dump(name, `${staging}/${file}`);
      databases.push({ name, file, bytes: fs.statSync(`${staging}/${file}`).size, sha256: await fileSha256(`${staging}/${file}`) });
    }
    const skipped: string[] = [];
    const hasSite = fs.existsSync(o.siteDir);
    const manifest: ArchiveManifest = { format: ARCHIVE_FORMAT, kind: o.kind, id: o.id, site: { id: o.site.id, domain: o.site.domain }, created_at: new Date().toISOString(), databases };
    writeFileAtomic(`${staging}/config/site.json`, `${JSON.stringify(o.site, null, 1)}\n`, 0o600);
    writeFileAtomic(`${staging}/manifest.json`, `${JSON.stringify(manifest, null, 1)}\n`, 0o600);
    // Entries are named by where they sit in the archive, not on disk (the two folders differ).
    const rename = (abs: string): string => {
      if (abs === staging || abs.startsWith(`${staging}/`)) return abs.slice(staging.length + 1);
      return `site${abs.slice(o.siteDir.length)}`;
    };
    const pack = tar.create(
      {
        gzip: { level: 6 },
        cwd: '/',
        portable: true,
        filter: (p, stat) => {
          const abs = `/${p.replace(/^\/+/, '')}`;
          if (abs === `${o.siteDir}/tmp` || abs.startsWith(`${o.siteDir}/tmp/`)) return false; // PHP's sessions and uploads in flight
          const ok = 'isFile' in stat && (stat.isFile() || stat.isDirectory());
          if (!ok) skipped.push(rename(abs));
          return ok;
        },
        onWriteEntry: (e) => {
          e.path = rename(e.absolute);
        },
      },
      [`${staging}/manifest.json`, `${staging}/config`, `${staging}/databases`, ...(hasSite ? [o.siteDir] : [])],
    );
    const hash = createHash('sha256');
    let bytes = 0;
    const tap = new Transform({
      transform(chunk: Buffer, _enc, done) {
        hash.update(chunk);
        bytes += chunk.length;
        done(null, chunk);
      },
    });
    await pipeline(pack, tap, fs.createWriteStream(part, { mode: 0o600 }));
    const sha256 = hash.digest('hex');
    // the checksum first: an archive without its .sha256 is incomplete and never listed
    const info: ArchiveInfo = { id: o.id, siteId: o.site.id, domain: o.site.domain, file: o.file, sha256, bytes, createdAt: manifest.created_at };
    writeFileAtomic(`${o.file}.json`, `${JSON.stringify(info)}\n`, 0o600);
    writeFileAtomic(`${o.file}.sha256`, `${sha256}  ${path.basename(o.file)}\n`, 0o600);
    fs.renameSync(part, o.file);
    return { ...info, skipped };
  } catch (err) {
    fs.rmSync(part, { force: true });
    fs.rmSync(`${o.file}.sha256`, { force: true });
    fs.rmSync(`${o.file}.json`, { force: true });
    throw err;
  } finally {
    fs.rmSync(staging, { recursive: true, force: true });
  }
}

/** Why an archive entry may not be extracted, or null: only plain files and folders inside the target. */
function entryRefusal(entryPath: string, type: string): string | null {
  if (type !== 'File' && type !== 'Directory' && type !== 'OldFile' && type !== 'ContiguousFile') return `${entryPath}: ${type} entries are not extracted`;
  if (entryPath.startsWith('/') || entryPath.split('/').includes('..')) return `${entryPath}: the path leaves the target folder`;
  return null;
}

/** TLS private keys stay out of inspection folders. */
export const isTlsKey = (p: string): boolean => /(^|\/)tls\/|\.key$|privkey[^/]*$/i.test(p);

/**
 * Verifies an archive's SHA-256 (against `expected`, else the one recorded beside it) and extracts
 * it into `target` (created 0700), refusing (UnsafeArchive) any link, device or path outside the
 * target; nothing stays extracted when it refuses. `skip` leaves matching entries out.
 */
export async function extractArchive(file: string, target: string, o: { expected?: string | null; skip?: (entryPath: string) => boolean } = {}): Promise<ArchiveManifest> {
  if (!fs.existsSync(file)) throw new UnsafeArchive(`the archive ${path.basename(file)} is not on this node`);
  const expected = o.expected ?? recordedSha256(file);
  if (!expected) throw new UnsafeArchive(`the archive ${path.basename(file)} has no recorded SHA-256`);
  const actual = await fileSha256(file);
  if (actual !== expected) throw new UnsafeArchive(`the archive ${path.basename(file)} does not match its SHA-256 (expected ${expected}, found ${actual})`);
  fs.mkdirSync(target, { recursive: true, mode: 0o700 });
  fs.chmodSync(target, 0o700);
  const refusals: string[] = [];
  try {
    await tar.extract({
      file,
      cwd: target,
      strict: true,
      preserveOwner: false,
      filter: (p, entry) => {
        const type = 'type' in entry ? String(entry.type) : 'File';
        const why = entryRefusal(p, type);
        if (why) {
          refusals.push(why);
          return false;
        }
        return !o.skip?.(p);
      },
    });
    if (refusals.length) throw new UnsafeArchive(`the archive holds entries that are never extracted: ${refusals.slice(0, 5).join('; ')}`);
    const manifest = JSON.parse(fs.readFileSync(`${target}/manifest.json`, 'utf8')) as ArchiveManifest;
    if (manifest.format !== ARCHIVE_FORMAT) throw new UnsafeArchive(`archive format ${manifest.format} is not known here`);
    return manifest;
  } catch (err) {
    fs.rmSync(target, { recursive: true, force: true });
    throw err;
  }
}

/** The complete archives under a folder of per-site folders, newest first (`.part` files and ones without their .sha256 are not complete). */
export function listArchives(dir: string): ArchiveInfo[] {
  const out: ArchiveInfo[] = [];
  for (const siteId of fs.existsSync(dir) ? fs.readdirSync(dir) : []) {
    if (!ID.test(siteId)) continue;
    for (const name of fs.readdirSync(`${dir}/${siteId}`)) {
      const m = /^([A-Za-z0-9_-]{1,64})\.tar\.gz$/.exec(name);
      const file = `${dir}/${siteId}/${name}`;
      const sha256 = m ? recordedSha256(file) : null;
      if (!m || !sha256) continue;
      const meta = readIfExists(`${file}.json`);
      if (!meta) continue;
      out.push({ ...(JSON.parse(meta) as ArchiveInfo), file, sha256 });
    }
  }
  return out.sort((a, b) => b.createdAt.localeCompare(a.createdAt));
}

/** Leftovers under the backup folder: partial archives, staging folders, expired inspection folders. */
export function cleanupBackupDir(dir: string, o: { inspectionExpired: (id: string) => boolean }): { removed: Array<{ path: string; kind: string; bytes: number }> } {
  const p = backupPaths(dir);
  const removed: Array<{ path: string; kind: string; bytes: number }> = [];
  const rm = (file: string, kind: string) => {
    const bytes = fs.statSync(file).isFile() ? fs.statSync(file).size : 0;
    fs.rmSync(file, { recursive: true, force: true });
    removed.push({ path: file, kind, bytes });
  };
  for (const top of [`${dir}/restore-points`, p.archives]) {
    for (const siteId of fs.existsSync(top) ? fs.readdirSync(top) : []) {
      for (const name of fs.readdirSync(`${top}/${siteId}`)) {
        const file = `${top}/${siteId}/${name}`;
        if (name.endsWith('.part')) rm(file, 'partial archive');
        else if (name.endsWith('.tar.gz') && !recordedSha256(file)) rm(file, 'partial archive');
        else if (/\.tar\.gz\.(sha256|json)$/.test(name) && !fs.existsSync(file.replace(/\.(sha256|json)$/, ''))) rm(file, 'orphaned sidecar');
        else if (/\.tmp$/.test(name)) rm(file, 'orphaned temp file');
      }
    }
  }
  for (const name of fs.existsSync(p.staging) ? fs.readdirSync(p.staging) : []) rm(`${p.staging}/${name}`, 'orphaned temp folder');
  for (const id of fs.existsSync(p.inspections) ? fs.readdirSync(p.inspections) : []) if (o.inspectionExpired(id)) rm(p.inspection(id), 'expired inspection folder');
  return { removed };
}
