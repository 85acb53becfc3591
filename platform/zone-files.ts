import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

// BIND zone files of the panel's hosting node: each is checked with named-checkzone (Debian
// bind9-utils) before it replaces the previous one, so a file BIND would refuse is never written.

const run = promisify(execFile);

export class ZoneRefused extends Error {}

/** Whether named-checkzone is installed (without it zones are kept in the panel only). */
export async function zoneCheckerAvailable(): Promise<boolean> {
  return run('named-checkzone', ['-v']).then(
    () => true,
    () => false,
  );
}

/** Checks `text` as the zone `zone` and moves it into `<dir>/<zone>.db` atomically. */
export async function writeZoneFile(dir: string, zone: string, text: string): Promise<void> {
  await fs.mkdir(dir, { recursive: true });
  const target = path.join(dir, `${zone}.db`);
  const tmp = `${target}.${process.pid}.tmp`;
  await fs.writeFile(tmp, text, { mode: 0o644 });
  try {
    await run('named-checkzone', ['-q', zone, tmp]).catch(async () => {
      const { stdout } = await run('named-checkzone', [zone, tmp]).catch((e: { stdout?: string }) => ({ stdout: e.stdout ?? '' }));
      throw new ZoneRefused(stdout.trim().split('\n').slice(0, 3).join('; ') || 'named-checkzone refused the zone');
    });
    await fs.rename(tmp, target);
  } finally {
    await fs.rm(tmp, { force: true });
  }
}

export async function removeZoneFile(dir: string, zone: string): Promise<void> {
  await fs.rm(path.join(dir, `${zone}.db`), { force: true });
}
