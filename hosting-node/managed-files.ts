import fs from 'node:fs';
import path from 'node:path';
import { nodePaths } from '../domain/panel/node-config';
import type { ManagedRead } from '../domain/panel/own-node';

// Reading a node's managed files as they are on disk, for reconciliation: every vhost, PHP pool and
// cron file under the root (to find those of no known site), and one file's text. A file that
// cannot be read is reported, never thrown: reconciliation records it as a finding.

export function readManagedFile(file: string): ManagedRead {
  try {
    return { text: fs.readFileSync(file, 'utf8') };
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    return e.code === 'ENOENT' ? { missing: true } : { error: `${e.code ?? 'error'}: ${e.message}` };
  }
}

const names = (dir: string): string[] => {
  try {
    return fs.readdirSync(dir);
  } catch {
    return [];
  }
};

/** Every managed file on disk: vhosts, pools of every PHP version, cron files (writeFileAtomic's temp files left out). */
export function listManagedFiles(root: string): string[] {
  const p = nodePaths(root);
  const out: string[] = [];
  for (const n of names(p.nginxSites)) if (n.endsWith('.conf')) out.push(path.join(p.nginxSites, n));
  for (const v of names(`${root}/etc/php`)) for (const n of names(`${root}/etc/php/${v}/pool.d`)) if (n.endsWith('.conf')) out.push(`${root}/etc/php/${v}/pool.d/${n}`);
  for (const n of names(p.cronDir)) if (!/\.\d+\.tmp$/.test(n)) out.push(path.join(p.cronDir, n));
  return out;
}
