import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { pipeline, Transform } from 'node:stream';
import { nodePaths, renderWelcomePage, sitePaths } from '../domain/panel/node-config';
import { SiteFileError, type FileEntry, type NodeFiles } from '../domain/panel/own-node';
import { treeUsage } from './metrics';
import { siteOwner, type SiteUser } from './site-users';
import { siteWriter } from './site-writer';

// The panel's file manager on the hosting node: list, upload (streamed to disk) and delete inside
// one site's docroot. Every path is relative to the docroot and confined to it: no absolute paths,
// no `.` or `..` segments, and no symbolic link is ever followed (a link anywhere on the way is
// refused; deleting a link removes the link only). An upload goes to a temporary file next to its
// target and is renamed into place only when complete, after its folder is checked again to still
// lie inside the docroot, so a reader never sees half a file. Writes and deletes are done by a
// site writer (site-writer.ts) running as the site's own user where the node has site users.
// nodeFiles hands all of it to the panel's process keyed by site (domain/panel/own-node.ts).

const MAX_SEGMENT = 255;
const MAX_PATH = 4096;

/** The segments of a docroot-relative path ('' is the docroot); refuses anything that could leave it. */
export function pathSegments(rel: string): string[] {
  if (typeof rel !== 'string' || rel.length > MAX_PATH) throw new SiteFileError('bad_path', 'a path of at most 4096 characters');
  if (rel.includes('\0') || rel.includes('\\')) throw new SiteFileError('bad_path', 'NUL and backslashes are not allowed in paths');
  if (rel.startsWith('/')) throw new SiteFileError('bad_path', 'absolute paths are not allowed: give a path relative to the docroot ("" for the docroot itself)');
  if (rel === '') return [];
  const segments = rel.split('/');
  // a trailing slash names the same folder
  if (segments.length > 1 && segments[segments.length - 1] === '') segments.pop();
  for (const s of segments) {
    if (s === '' || s === '.' || s === '..') throw new SiteFileError('bad_path', `"${rel}" is not a plain path inside the docroot (no empty, "." or ".." segments)`);
    if (s.length > MAX_SEGMENT) throw new SiteFileError('bad_path', 'a name of at most 255 characters');
    if (/\p{Cc}/u.test(s)) throw new SiteFileError('bad_path', 'control characters are not allowed in names');
  }
  return segments;
}

const lstatOrNull = async (p: string): Promise<fs.Stats | null> => {
  try {
    return await fs.promises.lstat(p);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
};

const typeOf = (st: fs.Stats): FileEntry['type'] => (st.isSymbolicLink() ? 'symlink' : st.isDirectory() ? 'directory' : st.isFile() ? 'file' : 'other');

/** The docroot itself, which must be a real directory (not a link). */
async function docrootDir(docroot: string): Promise<string> {
  const st = await lstatOrNull(docroot);
  if (!st) throw new SiteFileError('not_found', 'the site has no docroot on the node (yet)');
  if (!st.isDirectory()) throw new SiteFileError('bad_path', 'the docroot is not a directory');
  return docroot;
}

/**
 * Walks the folders of `segments` (all but the last) from the docroot, refusing links and non-folders.
 * `missing`: how many of those folders do not exist (the walk stops at the first missing one).
 */
async function walkFolders(docroot: string, segments: string[]): Promise<{ dir: string; missing: number }> {
  let dir = await docrootDir(docroot);
  for (let i = 0; i < segments.length - 1; i++) {
    const next = path.join(dir, segments[i]);
    const st = await lstatOrNull(next);
    if (!st) return { dir: next, missing: segments.length - 1 - i };
    if (st.isSymbolicLink()) throw new SiteFileError('bad_path', `${segments.slice(0, i + 1).join('/')} is a symbolic link: links are not followed`);
    if (!st.isDirectory()) throw new SiteFileError('not_a_directory', `${segments.slice(0, i + 1).join('/')} is not a directory`);
    dir = next;
  }
  return { dir, missing: 0 };
}

/** The entries of a folder of the docroot, by name; links are listed, never followed. */
export async function listFolder(docroot: string, rel: string): Promise<{ path: string; entries: FileEntry[] }> {
  const segments = pathSegments(rel);
  let dir: string;
  if (segments.length === 0) dir = await docrootDir(docroot);
  else {
    const w = await walkFolders(docroot, segments);
    if (w.missing) throw new SiteFileError('not_found', `no folder ${segments.join('/')}`);
    dir = path.join(w.dir, segments[segments.length - 1]);
    const st = await lstatOrNull(dir);
    if (!st) throw new SiteFileError('not_found', `no folder ${segments.join('/')}`);
    if (st.isSymbolicLink()) throw new SiteFileError('bad_path', `${segments.join('/')} is a symbolic link: links are not followed`);
    if (!st.isDirectory()) throw new SiteFileError('not_a_directory', `${segments.join('/')} is a file, not a folder`);
  }
  const names = (await fs.promises.readdir(dir)).sort();
  const entries: FileEntry[] = [];
  for (const name of names) {
    const st = await lstatOrNull(path.join(dir, name));
    if (st) entries.push({ name, type: typeOf(st), size: st.isFile() ? st.size : 0, modified: st.mtime.toISOString() });
  }
  return { path: `/${segments.join('/')}`, entries };
}

/** What an upload to `rel` would replace or create: the existing file's size, and the folders to create. */
export async function uploadTarget(docroot: string, rel: string): Promise<{ exists: boolean; size: number; missingFolders: number }> {
  const segments = pathSegments(rel);
  if (segments.length === 0) throw new SiteFileError('is_a_directory', 'the docroot is a folder: give a file path');
  const w = await walkFolders(docroot, segments);
  if (w.missing) return { exists: false, size: 0, missingFolders: w.missing };
  const st = await lstatOrNull(path.join(w.dir, segments[segments.length - 1]));
  if (!st) return { exists: false, size: 0, missingFolders: 0 };
  if (st.isSymbolicLink()) throw new SiteFileError('bad_path', `${segments.join('/')} is a symbolic link: links are not followed`);
  if (st.isDirectory()) throw new SiteFileError('is_a_directory', `${segments.join('/')} is a folder`);
  return { exists: true, size: st.size, missingFolders: 0 };
}

/**
 * Streams `body` to `rel` inside the docroot (missing folders are created), at most `maxBytes`:
 * more and nothing is written (too_large). Replaces an existing file in one rename. A body over the
 * limit is still read to its end (discarded) up to `drainBytes` in all, so an HTTP connection stays
 * usable for the answer; a longer one is cut (destroyed).
 */
export async function writeSiteFile(
  docroot: string,
  rel: string,
  body: AsyncIterable<Buffer>,
  maxBytes: number,
  drainBytes = maxBytes,
  owner: SiteUser | null = null,
): Promise<{ path: string; bytes: number }> {
  const segments = pathSegments(rel);
  if (segments.length === 0) throw new SiteFileError('is_a_directory', 'the docroot is a folder: give a file path');
  // links and files on the way are refused here; the writer creates what is missing
  const w = await walkFolders(docroot, segments);
  const existing = w.missing ? null : await lstatOrNull(path.join(w.dir, segments[segments.length - 1]));
  if (existing?.isSymbolicLink()) throw new SiteFileError('bad_path', `${segments.join('/')} is a symbolic link: links are not followed`);
  if (existing?.isDirectory()) throw new SiteFileError('is_a_directory', `${segments.join('/')} is a folder`);
  const folder = segments.slice(0, -1).join('/');
  const tmp = path.join(folder, `.upload-${randomUUID()}.part`);
  let bytes = 0;
  const tooLarge = () => new SiteFileError('too_large', `the upload is larger than ${maxBytes} bytes`);
  const cap = new Transform({
    transform(chunk: Buffer, _enc, done) {
      bytes += chunk.length;
      if (bytes > Math.max(maxBytes, drainBytes)) return done(tooLarge());
      // over the limit: nothing more is written; the rest is read and dropped
      done(null, bytes > maxBytes ? undefined : chunk);
    },
    flush(done) {
      done(bytes > maxBytes ? tooLarge() : null);
    },
  });
  // the writer runs as the site's user: a folder the site swaps for a link leads nowhere it could not go itself
  const writer = siteWriter(docroot, owner);
  try {
    if (folder) await writer.mkdir(folder);
    // pipeline: a body cut over the limit is destroyed
    await writer.file(segments.join('/'), tmp, 0o644, pipeline(body, cap, () => {}));
    await writer.done();
  } catch (err) {
    await writer.done().catch(() => {});
    throw err;
  }
  return { path: `/${segments.join('/')}`, bytes };
}

/** Deletes a file, a link (not what it points at) or a folder with everything in it; never the docroot. */
export async function deleteSitePath(docroot: string, rel: string, owner: SiteUser | null = null): Promise<{ path: string; type: FileEntry['type'] }> {
  const segments = pathSegments(rel);
  if (segments.length === 0) throw new SiteFileError('bad_path', 'the docroot itself cannot be deleted');
  const w = await walkFolders(docroot, segments);
  const target = path.join(w.dir, segments[segments.length - 1]);
  const st = w.missing ? null : await lstatOrNull(target);
  if (!st) throw new SiteFileError('not_found', `no file or folder ${segments.join('/')}`);
  // as the site's user (rm removes links themselves, never what they point at)
  const writer = siteWriter(docroot, owner);
  await writer.rm(segments.join('/'));
  await writer.done();
  return { path: `/${segments.join('/')}`, type: typeOf(st) };
}

/** Disk (MB allocated, 2 decimals) and inodes of a docroot, as the node reports them (HostingNode.usage). */
export async function docrootUsage(docroot: string): Promise<{ diskMb: number; inodes: number }> {
  const u = await treeUsage(docroot);
  return { diskMb: Math.round((u.bytes / 1048576) * 100) / 100, inodes: u.inodes };
}

/**
 * Memory (MB, resident) of each PHP-FPM pool's workers on this machine, by pool name (a site's pool
 * is named by its domain): read from /proc. Only the panel's own hosting node runs on this machine,
 * so memory is known for its sites only.
 */
export async function phpPoolMemoryMb(): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  let pids: string[];
  try {
    pids = (await fs.promises.readdir('/proc')).filter((d) => /^\d+$/.test(d));
  } catch {
    return out;
  }
  for (const pid of pids) {
    try {
      const cmd = (await fs.promises.readFile(`/proc/${pid}/cmdline`, 'utf8')).replace(/\0/g, ' ').trim();
      const m = /^php-fpm: pool (\S+)/.exec(cmd);
      if (!m) continue;
      const rss = /^VmRSS:\s+(\d+) kB/m.exec(await fs.promises.readFile(`/proc/${pid}/status`, 'utf8'));
      if (rss) out.set(m[1], (out.get(m[1]) ?? 0) + Number(rss[1]) / 1024);
    } catch {
      // the process ended meanwhile
    }
  }
  return out;
}

/** The node's files as the panel's own process reaches them (OwnNode), from the node's root alone. */
export function nodeFiles(root: string): NodeFiles {
  return {
    site(s) {
      const docroot = sitePaths(root, s.domain).docroot;
      // the site's system user, who writes its files; null: the node has no site users
      const owner = siteOwner(root, s.id);
      return {
        list: (rel) => listFolder(docroot, rel),
        uploadTarget: (rel) => uploadTarget(docroot, rel),
        write: (rel, body, maxBytes, drainBytes) => writeSiteFile(docroot, rel, body, maxBytes, drainBytes, owner),
        remove: (rel) => deleteSitePath(docroot, rel, owner),
        usage: () => docrootUsage(docroot),
        writer() {
          fs.mkdirSync(docroot, { recursive: true });
          return siteWriter(docroot, owner);
        },
        removeWelcomePages() {
          for (const kind of ['html', 'php'] as const) {
            const file = path.join(docroot, `index.${kind}`);
            if (fs.existsSync(file) && fs.readFileSync(file, 'utf8') === renderWelcomePage(s.domain, kind)) fs.rmSync(file);
          }
        },
      };
    },
    mariadbSocket: nodePaths(root).mariadbSocket,
    poolMemoryMb: phpPoolMemoryMb,
  };
}
