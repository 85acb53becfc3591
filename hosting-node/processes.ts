import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import type { Logger } from '../platform/logger';

// The services a node runs (nginx, php-fpm, mariadbd) are children of the node process: started,
// signalled and stopped by it, never the system's own instances.

/** Like `which`, over PATH plus the sbin folders (a non-login root shell may lack them). */
export function findBinary(name: string): string | null {
  const dirs = [...(process.env.PATH ?? '').split(':'), '/usr/local/sbin', '/usr/sbin', '/sbin'].filter(Boolean);
  for (const d of dirs) {
    const f = path.join(d, name);
    try {
      fs.accessSync(f, fs.constants.X_OK);
      if (fs.statSync(f).isFile()) return f;
    } catch {
      // not here
    }
  }
  return null;
}

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a command to completion (no shell); `input` goes to its stdin, so secrets never show in `ps`. */
export function run(cmd: string, args: string[], opts: { input?: string; timeoutMs?: number } = {}): Promise<RunResult> {
  return new Promise((resolve) => {
    const child = execFile(cmd, args, { timeout: opts.timeoutMs ?? 30_000, maxBuffer: 4 << 20 }, (err, stdout, stderr) => {
      // a spawn failure or a timeout has no numeric exit code: report it as 1 with its message
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      resolve({ code, stdout: String(stdout), stderr: String(stderr) || (err ? err.message : '') });
    });
    // A command that exits without reading its stdin (nginx -t) closes the pipe: EPIPE on the write
    // is expected then, and the exit status is what counts.
    child.stdin?.on('error', () => {});
    child.stdin?.end(opts.input ?? '');
  });
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits until `ready()` is true; fails early when `failed()` says why (the process died). */
export async function waitFor(what: string, ready: () => Promise<boolean> | boolean, timeoutMs: number, failed: () => string | null = () => null): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const why = failed();
    if (why) throw new Error(`${what}: ${why}`);
    if (await ready()) return;
    if (Date.now() > deadline) throw new Error(`${what}: not ready after ${Math.round(timeoutMs / 1000)} s`);
    await sleep(50);
  }
}

/** Whether something accepts connections on a TCP port or a unix socket path. */
export function canConnect(target: { port: number; host: string } | { path: string }): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(target as net.NetConnectOpts);
    s.setTimeout(1000);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
    s.once('timeout', () => {
      s.destroy();
      resolve(false);
    });
  });
}

export const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** Processes whose parent is `pid` (from /proc), with their command lines. */
export function childrenOf(pid: number): Array<{ pid: number; cmdline: string }> {
  const out: Array<{ pid: number; cmdline: string }> = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
      // the command name may hold spaces and parentheses: fields start after the last ')'
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push({ pid: Number(name), cmdline: fs.readFileSync(`/proc/${name}/cmdline`, 'utf8').replace(/\0/g, ' ').trim() });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

// Children still running when the node process exits (a test that crashed, an uncaught error)
// are killed, so that no nginx keeps a port and no mariadbd a data directory.
const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of running) {
    try {
      for (const k of childrenOf(c.pid!)) process.kill(k.pid, 'SIGKILL');
      c.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
});

export interface Service {
  name: string;
  pid: number;
  /** null while running; else why it ended */
  exited(): string | null;
  /** the last lines it wrote to stderr (startup errors) */
  lastOutput(): string;
  /** `signal`, then SIGKILL (of it and its children) after `graceMs` */
  stop(signal: NodeJS.Signals, graceMs?: number): Promise<void>;
}

/**
 * Starts a long-running service as a child, in a process group of its own (a Ctrl-C to the
 * terminal reaches the node, which stops its services in order); its output goes to the logger at debug level
 * and to `onOutput` (a service whose log the node reads).
 */
export function startService(name: string, cmd: string, args: string[], logger: Logger, onOutput?: (text: string) => void): Service {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  running.add(child);
  let tail = '';
  let ended: string | null = null;
  const onData = (d: Buffer) => {
    const text = String(d);
    tail = (tail + text).slice(-2000);
    logger.debug({ service: name, out: text.trimEnd() }, 'service output');
    onOutput?.(text);
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const done = new Promise<void>((resolve) => {
    child.once('exit', (code, signal) => {
      ended = `exited with ${signal ?? `code ${code}`}${tail.trim() ? `: ${tail.trim().split('\n').slice(-3).join(' | ')}` : ''}`;
      running.delete(child);
      resolve();
    });
    child.once('error', (err) => {
      ended = `could not start: ${err.message}`;
      running.delete(child);
      resolve();
    });
  });
  return {
    name,
    pid: child.pid ?? -1,
    exited: () => ended,
    lastOutput: () => tail.trim(),
    async stop(signal, graceMs = 10_000) {
      if (ended) return;
      const pid = child.pid!;
      child.kill(signal);
      const timer = setTimeout(() => {
        logger.warn({ service: name, pid }, `${name} did not stop within ${graceMs} ms; killing it`);
        for (const k of childrenOf(pid)) process.kill(k.pid, 'SIGKILL');
        child.kill('SIGKILL');
      }, graceMs);
      await done;
      clearTimeout(timer);
    },
  };
}
