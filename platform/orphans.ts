import fs from 'node:fs';
import type { Logger } from './logger';

// A start that was killed (kill -9) leaves its servers running: PostgreSQL with its
// postmaster.pid, the Temporal dev server with the pid file we write. The next start finds them
// by those files and stops them, instead of failing on a port that is taken.

function commandLine(pid: number): string | null {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return null; // not running (or no /proc: nothing to find)
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/**
 * Stops the process named by the first line of `pidFile` when it is still running and its
 * command line matches `looksLike` (a recycled pid of something else is left alone). Returns
 * whether one was stopped.
 */
export async function stopOrphan(pidFile: string, looksLike: RegExp, what: string, log: Logger, signal: NodeJS.Signals = 'SIGTERM'): Promise<boolean> {
  let pid: number;
  try {
    pid = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0].trim());
  } catch {
    return false;
  }
  if (!Number.isInteger(pid) || pid <= 1 || pid === process.pid) return false;
  const cmd = commandLine(pid);
  if (cmd === null || !looksLike.test(cmd)) return false;
  log.warn({ orphan_pid: pid, pidFile }, `found ${what} left running by an earlier start that was killed; stopping it`);
  process.kill(pid, signal);
  const deadline = Date.now() + 15_000;
  while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  if (alive(pid)) {
    process.kill(pid, 'SIGKILL');
    while (alive(pid)) await new Promise((r) => setTimeout(r, 50));
  }
  return true;
}
