import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/** Writes through a temp file and a rename, so nginx, php-fpm or a reader never sees half a file. */
export function writeFileAtomic(file: string, text: string, mode = 0o644): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, text, { mode });
  fs.renameSync(tmp, file);
}

export function readIfExists(file: string): string | null {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/** Puts a file back as it was: `text` null means it did not exist. */
export function restoreFile(file: string, text: string | null): void {
  if (text === null) fs.rmSync(file, { force: true });
  else writeFileAtomic(file, text);
}

export const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

export function readJson<T>(file: string, fallback: T): T {
  const text = readIfExists(file);
  return text === null ? fallback : (JSON.parse(text) as T);
}

export const writeJson = (file: string, value: unknown): void => writeFileAtomic(file, `${JSON.stringify(value, null, 1)}\n`, 0o600);
