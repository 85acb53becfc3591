import { spawn, type ChildProcess } from 'node:child_process';
import { readyUrl } from './child-ready';
import path from 'node:path';
import { startPanelApi, type PanelRuntimeOptions } from '../../main/panel-api';
import type { ControllerBounds } from '../../services/panel/nodes/controller';
import { createDb } from '../../platform/db';
import { createLogger } from '../../platform/logger';
import { parsePanelFlags } from '../../platform/panel-flags';
import { env } from '../setup/env';
import { PANEL_TEST_KEY } from './panel';

// A panel API in a process of its own (a second `panel-api serve` against the same PostgreSQL and
// Temporal), so that a test can show what one API process does is seen by another on the very
// next request. Run as a script it starts the panel from the environment and prints `ready <url>`;
// imported, startPanelChild() spawns it and waits for that line.

export interface PanelChild {
  url: string;
  pid: number;
  close(): Promise<void>;
  /** sends `signal` (SIGKILL: the process dies without stopping anything) and waits until it has exited */
  kill(signal: NodeJS.Signals): Promise<void>;
}

/** With -billing-meter: the child's clock, fixed at an instant, and its billing task queue and metering schedule. */
export interface PanelChildBilling {
  clock: string;
  taskQueue: string;
  scheduleId: string;
}

/** Spawns a panel API process over the suite's database and Temporal; `flags` as on the command line. */
export async function startPanelChild(
  opts: { flags?: string[]; sessionIdleMs?: number; controller?: Partial<ControllerBounds>; child?: ChildHosting; billing?: PanelChildBilling } = {},
): Promise<PanelChild> {
  const child: ChildProcess = spawn(process.execPath, ['--require', 'tsx/cjs', __filename], {
    cwd: path.join(__dirname, '../..'),
    env: {
      ...process.env,
      DATABASE_URL: env.databaseUrl,
      TEMPORAL_ADDRESS: env.temporalAddress,
      PANEL_CHILD_FLAGS: JSON.stringify(opts.flags ?? []),
      PANEL_CHILD_SESSION_IDLE_MS: String(opts.sessionIdleMs ?? 3_600_000),
      PANEL_CHILD_CONTROLLER: JSON.stringify(opts.controller ?? {}),
      PANEL_CHILD_HOSTING: JSON.stringify(opts.child ?? null),
      PANEL_CHILD_BILLING: JSON.stringify(opts.billing ?? null),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += String(d)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = await readyUrl(child, 'panel child', () => stderr);
  return {
    url,
    pid: child.pid!,
    async close() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
    async kill(signal) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill(signal);
      await exited;
    },
  };
}

/** A child that runs the hosting node under `root` and the panel worker on `taskQueue` (as startHostingPanel does in-process). */
export interface ChildHosting {
  root: string;
  webPort: number;
  taskQueue: string;
  reconcile?: PanelRuntimeOptions['reconcile'];
}

const billingOf = (b: PanelChildBilling | null) => (b ? { clock: () => new Date(b.clock), taskQueue: b.taskQueue, scheduleId: b.scheduleId } : undefined);

async function main() {
  const e = process.env;
  const child: ChildHosting | null = JSON.parse(e.PANEL_CHILD_HOSTING ?? 'null');
  const db = createDb(e.DATABASE_URL!, 5);
  const panel = await startPanelApi({
    db,
    temporalAddress: e.TEMPORAL_ADDRESS!,
    namespace: 'default',
    logger: createLogger('error'),
    port: 0,
    flags: parsePanelFlags(JSON.parse(e.PANEL_CHILD_FLAGS ?? '[]')),
    sealingKey: PANEL_TEST_KEY,
    sessionIdleMs: Number(e.PANEL_CHILD_SESSION_IDLE_MS ?? 3_600_000),
    sessionMaxMs: 7 * 86_400_000,
    // as startPanel() in ./panel: generous, so suites signing in often are not throttled
    throttle: { loginFailures: 1000, ipFailures: 100_000 },
    controller: JSON.parse(e.PANEL_CHILD_CONTROLLER ?? '{}'),
    ...(child ? { nodeOps: { taskQueue: child.taskQueue, pollMs: 200 }, hosting: { root: child.root, webPort: child.webPort, webHost: '127.0.0.1' }, reconcile: child.reconcile } : {}),
    billing: billingOf(JSON.parse(e.PANEL_CHILD_BILLING ?? 'null')),
  });
  const stop = async () => {
    await panel.close();
    await db.destroy();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop());
  process.stdout.write(`ready ${panel.url}\n`);
}

if (require.main === module) {
  main().catch((err) => {
    process.stderr.write(String(err instanceof Error ? err.stack : err) + '\n');
    process.exit(1);
  });
}
