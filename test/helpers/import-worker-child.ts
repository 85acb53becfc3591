import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, type WorkflowBundleOption } from '@temporalio/worker';
import { DEFAULT_IMPORT_LIMITS } from '../../domain/panel/import-archive';
import { DEFAULT_NAMESERVERS } from '../../platform/config';
import { createDb, type Db } from '../../platform/db';
import { createLogger } from '../../platform/logger';
import { PANEL_TEST_KEY } from './panel';
import { runWorker } from '../../workers/base';
import { createPanelWorker } from '../../workers/panel';
import { nodeFiles } from '../../hosting-node/site-files';
import { env } from '../setup/env';

// A panel worker in a process of its own that runs only legacy import runs (their own task queue),
// against a hosting node another process drives (its root: files and the MariaDB socket), so a test
// can kill -9 it in the middle of a file copy or an SQL load. Run as a script it prints `ready`.

export interface ImportWorkerChild {
  pid: number;
  /** SIGKILL: the process dies mid-activity, nothing stopped */
  kill(): Promise<void>;
  close(): Promise<void>;
}

let bundleFile: string | null = null;

export async function startImportWorkerChild(o: { taskQueue: string; nodeOpsQueue: string; root: string }): Promise<ImportWorkerChild> {
  if (!bundleFile) {
    bundleFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'panel-bundle-')), 'panel.js');
    fs.writeFileSync(bundleFile, env.bundles.panel.code);
  }
  const child: ChildProcess = spawn(process.execPath, ['--require', 'tsx/cjs', __filename], {
    cwd: path.join(__dirname, '../..'),
    env: { ...process.env, DATABASE_URL: env.databaseUrl, TEMPORAL_ADDRESS: env.temporalAddress, IMPORT_QUEUE: o.taskQueue, NODE_OPS_QUEUE: o.nodeOpsQueue, HOSTING_ROOT: o.root, PANEL_BUNDLE: bundleFile },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += String(d)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (d) => String(d).includes('ready') && resolve());
    child.once('exit', (code) => reject(new Error(`import worker exited ${code}: ${stderr}`)));
  });
  return {
    pid: child.pid!,
    async kill() {
      child.kill('SIGKILL');
      await exited;
    },
    async close() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/**
 * The import worker itself, in this process: imports run here hold the new database passwords in
 * this process's memory, which is where a panel API in this process reads them.
 */
export async function runImportWorker(o: { db: Db; temporalAddress: string; taskQueue: string; nodeOpsQueue: string; root: string; workflowBundle: WorkflowBundleOption }): Promise<{ stop(): Promise<void> }> {
  const logger = createLogger('warn');
  const clientConnection = await Connection.connect({ address: o.temporalAddress });
  const temporal = new Client({ connection: clientConnection });
  const connection = await NativeConnection.connect({ address: o.temporalAddress });
  const nodeOps = { taskQueue: o.nodeOpsQueue, timeoutMs: 30_000, pollMs: 200 };
  // the node's files by its root alone: the node itself runs in another process
  const files = nodeFiles(o.root);
  const worker = await createPanelWorker({
    connection,
    namespace: 'default',
    taskQueue: o.taskQueue,
    db: o.db,
    hostingNode: null,
    workflowBundle: o.workflowBundle,
    imports: { db: o.db, temporal, logger, nodeOps, dns: { zonesDir: null, nameservers: DEFAULT_NAMESERVERS }, sites: { nodeOps }, limits: { ...DEFAULT_IMPORT_LIMITS, maxRatio: 100_000 }, hostingNode: () => files, sealingKey: PANEL_TEST_KEY },
  });
  const running = runWorker(worker);
  return {
    async stop() {
      await running.stop();
      await connection.close();
      await clientConnection.close();
    },
  };
}

async function main() {
  const e = process.env;
  const db = createDb(e.DATABASE_URL!, 4);
  const running = await runImportWorker({ db, temporalAddress: e.TEMPORAL_ADDRESS!, taskQueue: e.IMPORT_QUEUE!, nodeOpsQueue: e.NODE_OPS_QUEUE!, root: e.HOSTING_ROOT!, workflowBundle: { codePath: e.PANEL_BUNDLE! } });
  process.stdout.write('ready\n');
  process.once('SIGTERM', () => void running.stop().then(() => db.destroy()).then(() => process.exit(0)));
}

if (require.main === module) {
  main().catch((err) => {
    process.stderr.write(String(err?.stack ?? err));
    process.exit(1);
  });
}
