import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { freePort } from '../platform/ports';

// Child processes of the benchmark: each runs in its own process group (detached), is asked to
// stop with SIGTERM and waited for; whatever is left of its group after a grace period is killed.
//
// The children are `tsx <script>` (what `npx tsx <script>` runs). SIGTERM goes to the node
// process tsx started, not to tsx itself: tsx relays a signal it receives and, when the child
// does not acknowledge within 30 ms (a busy event loop, e.g. the gateway right after a load
// phase), SIGKILLs it, which would skip the system's orderly shutdown and orphan its children.

export const TSX_BIN = path.resolve(__dirname, '../node_modules/.bin/tsx');

export interface Child {
  name: string;
  pid: number;
  /** the last few KB of stdout + stderr, for error messages */
  output(): string;
  /** pino lines at warn (40) and above seen on its output, and the last such message */
  logProblems(): { warn: number; error: number; last: string };
  exited(): boolean;
  /** Resolves with the exit code (or signal) when the child exits. */
  exit: Promise<string>;
  /** Stops the child; resolves with a one-line account of how it went. */
  stop(graceMs?: number): Promise<string>;
}

const running = new Set<Child>();

export function spawnChild(name: string, command: string, args: string[], env: NodeJS.ProcessEnv, cwd: string): Child {
  const proc: ChildProcess = spawn(command, args, { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  if (proc.pid === undefined) throw new Error(`${name}: spawn failed`);
  let out = '';
  const problems = { warn: 0, error: 0, last: '' };
  let partial = '';
  const keep = (d: Buffer) => {
    const text = d.toString();
    out = (out + text).slice(-8000);
    const lines = (partial + text).split('\n');
    partial = lines.pop()!.slice(-100_000);
    for (const line of lines) {
      const m = /"level":(\d+)/.exec(line);
      if (!m || Number(m[1]) < 40) continue;
      if (Number(m[1]) >= 50) problems.error++;
      else problems.warn++;
      const msg = /"msg":"((?:[^"\\]|\\.)*)"/.exec(line)?.[1] ?? line.slice(0, 200);
      const err = /"message":"((?:[^"\\]|\\.)*)"/.exec(line)?.[1];
      problems.last = err ? `${msg}: ${err.slice(0, 200)}` : msg;
    }
  };
  proc.stdout!.on('data', keep);
  proc.stderr!.on('data', keep);
  let done = false;
  const exit = new Promise<string>((resolve) => {
    proc.once('exit', (code, signal) => {
      done = true;
      resolve(signal ? `signal ${signal}` : `code ${code}`);
    });
    proc.once('error', (err) => {
      done = true;
      resolve(`spawn error ${err.message}`);
    });
  });
  const pid = proc.pid;
  const child: Child = {
    name,
    pid,
    output: () => out,
    logProblems: () => ({ ...problems }),
    exited: () => done,
    exit,
    async stop(graceMs = 30_000) {
      const started = Date.now();
      const notes: string[] = [];
      if (!done) {
        // a tsx wrapper passes nothing on: its script (its child) gets the signal; any other
        // process (node dist/…, whose children are nginx or PHP-FPM) gets it itself
        const scripts = isTsxWrapper(pid) ? childPids(pid) : [];
        if (scripts.length) for (const p of scripts) signal(p, 'SIGTERM');
        else signal(pid, 'SIGTERM');
        const timedOut = await Promise.race([exit.then(() => false), sleep(graceMs).then(() => true)]);
        if (timedOut) {
          notes.push(`no exit within ${graceMs} ms of SIGTERM: process group killed`);
          signal(-pid, 'SIGKILL');
          await Promise.race([exit, sleep(5000)]);
        }
      }
      // Anything left in the child's process group (its own children) goes too.
      if (groupAlive(pid)) {
        notes.push('processes left in its group after it exited were stopped');
        signal(-pid, 'SIGTERM');
        for (let i = 0; i < 50 && groupAlive(pid); i++) await sleep(100);
        if (groupAlive(pid)) signal(-pid, 'SIGKILL');
      }
      running.delete(child);
      const how = done ? await exit : 'still running?';
      return `${name}: ${how} after ${((Date.now() - started) / 1000).toFixed(1)} s${notes.length ? `; ${notes.join('; ')}` : ''}`;
    },
  };
  running.add(child);
  return child;
}

/** Stops every child still running, in reverse start order. */
export async function stopAll(): Promise<string[]> {
  const out: string[] = [];
  for (const c of [...running].reverse()) out.push(await c.stop().catch((err) => `${c.name}: ${String(err)}`));
  return out;
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

/** Whether `pid` runs tsx (Linux /proc; false when unknown). */
function isTsxWrapper(pid: number): boolean {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').some((arg) => /(^|\/)tsx(\.m?js)?$|\/tsx\/dist\/cli/.test(arg));
  } catch {
    return false;
  }
}

/** Direct children of a process (Linux /proc), empty when unknown. */
function childPids(pid: number): number[] {
  try {
    return fs
      .readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));


/** Distinct free ports (a port just released could otherwise be handed out twice). */
export async function freePorts(n: number): Promise<number[]> {
  const ports = new Set<number>();
  for (let i = 0; ports.size < n && i < n * 10; i++) ports.add(await freePort());
  if (ports.size < n) throw new Error('could not find free ports');
  return [...ports];
}

/**
 * The environment of `npm start` (main/start.ts) for a benchmark: embedded PostgreSQL and Temporal
 * under `dataDir`, every port free (the panel's too, so that a system running beside does not stop
 * it), the simulator on the first of the `extraPorts` free ports handed back, warnings only.
 * `extra` is added last.
 */
export async function systemEnv(dataDir: string, extraPorts: number, extra: NodeJS.ProcessEnv = {}): Promise<{ env: NodeJS.ProcessEnv; gatewayPort: number; pgPort: number; simPort: number; ports: number[] }> {
  const [gatewayPort, temporalPort, temporalUiPort, pgPort, p1, p2, p3, p4, p5, ...ports] = await freePorts(9 + Math.max(1, extraPorts));
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATA_DIR: dataDir,
    GATEWAY_PORT: String(gatewayPort),
    TEMPORAL_PORT: String(temporalPort),
    TEMPORAL_UI_PORT: String(temporalUiPort),
    PG_PORT: String(pgPort),
    SIMULATOR_URL: `http://127.0.0.1:${ports[0]}`,
    PANEL_PORT: String(p1),
    PANEL_HOSTING_WEB_PORT: String(p2),
    PANEL_HOSTING_TLS_PORT: String(p3),
    PANEL_NODE_API_PORT: String(p4),
    PANEL_HOSTING_DB_PORT: String(p5),
    LOG_LEVEL: 'warn',
    ...extra,
  };
  // embedded defaults, whatever the shell running the benchmark has set
  delete env.DATABASE_URL;
  delete env.TEMPORAL_ADDRESS;
  return { env, gatewayPort, pgPort, simPort: ports[0], ports };
}
