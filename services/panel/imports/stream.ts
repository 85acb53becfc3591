import fs from 'node:fs';
import { Transform, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { Parser, type ReadEntry } from 'tar';
import type { ImportLimits } from '../../../domain/panel/import-archive';

// One streaming pass over a gzip'd tar within the import limits (entries, expanded bytes, ratio),
// handing each entry to a callback one after the other: the next entry's data waits (backpressure)
// until the callback of the previous one has finished, so nothing is buffered beyond a chunk.

/** A safety limit stopped the reading; `limit` names which one (the ImportLimits key). */
export class LimitHit extends Error {
  constructor(
    readonly limit: keyof ImportLimits,
    message: string,
  ) {
    super(message);
  }
}

/** Path of an entry relative to the archive's top folder (`cpmove-<user>/`), without a trailing slash. */
export function relativePath(top: string, p: string): string {
  const inTop = top && (p === top || p.startsWith(`${top}/`));
  return (inTop ? p.slice(top.length + 1) : p).replace(/\/$/, '');
}

export function topFolder(entry: ReadEntry): string {
  const first = entry.path.split('/')[0];
  return /^(cpmove|backup)-/.test(first) || (entry.type === 'Directory' && !entry.path.replace(/\/$/, '').includes('/')) ? first : '';
}

export interface StreamCounts {
  entries: number;
  compressed_bytes: number;
  expanded_bytes: number;
}

/**
 * Streams `file`; `onEntry(rel, entry, body)` may pipe the entry's data into a writable with
 * `body(w)`; entries it leaves unread are skipped. Throws LimitHit at a limit.
 */
export async function eachEntry(
  file: string,
  limits: ImportLimits,
  onEntry: (rel: string, entry: ReadEntry, body: (w: NodeJS.WritableStream) => Promise<void>) => Promise<unknown>,
  counts: StreamCounts = { entries: 0, compressed_bytes: 0, expanded_bytes: 0 },
): Promise<StreamCounts> {
  const source = fs.createReadStream(file);
  const parser = new Parser({ strict: true });
  let top: string | null = null;
  let chain: Promise<unknown> = Promise.resolve();
  let failed: unknown = null;
  parser.on('entry', (entry: ReadEntry) => {
    counts.entries++;
    if (failed || counts.entries > limits.maxEntries) {
      entry.resume();
      // the source may be read whole already: the limit is thrown after the pass, not only by destroy
      failed ??= new LimitHit('maxEntries', `more than ${limits.maxEntries} entries`);
      source.destroy(failed as Error);
      return;
    }
    if (top === null) top = topFolder(entry);
    const rel = relativePath(top, entry.path);
    entry.pause();
    chain = chain.then(async () => {
      let used = false;
      const body = (w: NodeJS.WritableStream) => {
        used = true;
        return pipeline(entry, w);
      };
      try {
        if (!failed) await onEntry(rel, entry, body);
      } catch (err) {
        failed = err;
        source.destroy(err as Error);
      }
      if (!used) entry.resume();
    });
  });
  const compressed = new Transform({
    transform(chunk: Buffer, _e, cb) {
      counts.compressed_bytes += chunk.length;
      cb(null, chunk);
    },
  });
  const expanded = new Transform({
    transform(chunk: Buffer, _e, cb) {
      counts.expanded_bytes += chunk.length;
      if (counts.expanded_bytes > limits.maxExpandedBytes) return cb(new LimitHit('maxExpandedBytes', `more than ${limits.maxExpandedBytes} bytes once decompressed`));
      if (counts.expanded_bytes > 1024 * 1024 && counts.expanded_bytes / Math.max(1, counts.compressed_bytes) > limits.maxRatio) return cb(new LimitHit('maxRatio', `compressed more than ${limits.maxRatio}:1 (a decompression bomb)`));
      cb(null, chunk);
    },
  });
  const sink = new Writable({
    write(chunk: Buffer, _e, cb) {
      if (parser.write(chunk)) cb();
      else parser.once('drain', () => cb());
    },
    final(cb) {
      parser.end();
      cb();
    },
  });
  const parsed = new Promise<void>((resolve, reject) => {
    parser.on('end', resolve);
    parser.on('error', reject);
  });
  try {
    await Promise.all([pipeline(source, compressed, createGunzip(), expanded, sink), parsed]);
    await chain;
  } catch (err) {
    if (failed) throw failed;
    throw err;
  }
  if (failed) throw failed;
  return counts;
}

/** The body of a small entry as text. */
export async function collect(body: (w: NodeJS.WritableStream) => Promise<void>): Promise<string> {
  const chunks: Buffer[] = [];
  await body(new Writable({ write: (c: Buffer, _e, cb) => (chunks.push(c), cb()) }));
  return Buffer.concat(chunks).toString('utf8');
}
