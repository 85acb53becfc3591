import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { startPanelApi } from '../../main/panel-api';
import { createDb } from '../../platform/db';
import { createLogger } from '../../platform/logger';
import { parsePanelFlags } from '../../platform/panel-flags';
import { env } from '../setup/env';
import type { PanelChild } from './panel-child';
import { PANEL_TEST_KEY } from './panel';

// A panel with -billing-meter in a process of its own, its clock fixed at a given instant, so a
// test can kill -9 it in the middle of metering or closing and start another on the same task
// queue and schedule. Run as a script it prints `ready <url>`; imported, startBillingChild()
// spawns it and waits for that line.

export async function startBillingChild(o: { clock: string; taskQueue: string; scheduleId: string }): Promise<PanelChild> {
  const child: ChildProcess = spawn(process.execPath, ['--require', 'tsx/cjs', __filename], {
    cwd: path.join(__dirname, '../..'),
    env: { ...process.env, DATABASE_URL: env.databaseUrl, TEMPORAL_ADDRESS: env.temporalAddress, BILLING_CHILD: JSON.stringify(o) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += String(d)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d) => {
      out += String(d);
      const m = /ready (\S+)/.exec(out);
      if (m) resolve(m[1]);
    });
    child.once('exit', (code) => reject(new Error(`billing child exited ${code}: ${stderr}`)));
  });
  const gone = () => child.exitCode !== null || child.signalCode !== null;
  return {
    url,
    pid: child.pid!,
    async close() {
      if (gone()) return;
      child.kill('SIGTERM');
      await exited;
    },
    async kill(signal) {
      if (gone()) return;
      child.kill(signal);
      await exited;
    },
  };
}

async function main() {
  const o = JSON.parse(process.env.BILLING_CHILD!) as { clock: string; taskQueue: string; scheduleId: string };
  const db = createDb(process.env.DATABASE_URL!, 5);
  const clock = new Date(o.clock);
  const panel = await startPanelApi({
    db,
    temporalAddress: process.env.TEMPORAL_ADDRESS!,
    namespace: 'default',
    logger: createLogger('error'),
    port: 0,
    flags: parsePanelFlags(['-billing-meter']),
    sealingKey: PANEL_TEST_KEY,
    sessionIdleMs: 3_600_000,
    sessionMaxMs: 86_400_000,
    billing: { clock: () => clock, taskQueue: o.taskQueue, scheduleId: o.scheduleId },
  });
  process.on('SIGTERM', () => void panel.close().then(() => db.destroy()).then(() => process.exit(0)));
  process.stdout.write(`ready ${panel.url}\n`);
}

if (require.main === module) {
  main().catch((err) => {
    process.stderr.write(String(err instanceof Error ? err.stack : err) + '\n');
    process.exit(1);
  });
}
