import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, type Worker } from '@temporalio/worker';
import { AuthStore } from '../../services/keys/auth-store';
import { CacheInvalidation } from '../../platform/cache-invalidation';
import { Catalog } from '../../services/catalog/catalog';
import { createGatewayApp, type GatewayDeps } from '../../api/gateway/app';
import type { VideoDeps } from '../../api/gateway/media/videos/deps';
import { Reservations } from '../../services/credits/holds';
import type { VideoPolling } from '../../domain/media/video';
import { createMediaWorker } from '../../workers/media';
import { env } from '../setup/env';

/** A gateway whose video jobs run on a media worker of their own task queue (one per test file). */
export interface VideoStack {
  url: string;
  taskQueue: string;
  temporal: Client;
  worker: Worker | null;
  startWorker(): Promise<void>;
  /** stops the worker as a crash would leave it: nothing more runs until startWorker */
  stopWorker(): Promise<void>;
  close(): Promise<void>;
}

export async function startVideoStack(opts: { polling?: Partial<VideoPolling>; pollIntervalMs?: number; upstreamTimeoutMs?: number } = {}): Promise<VideoStack> {
  const taskQueue = `media-test-${randomUUID()}`;
  const nativeConnection = await NativeConnection.connect({ address: env.temporalAddress });
  const connection = await Connection.connect({ address: env.temporalAddress });
  const temporal = new Client({ connection });
  const invalidation = new CacheInvalidation(env.databaseUrl, env.logger);
  await invalidation.start();
  const reservations = new Reservations(env.db, { logger: env.logger });
  const deps: GatewayDeps & VideoDeps = {
    db: env.db,
    temporal,
    logger: env.logger,
    authStore: new AuthStore(env.db, invalidation, 60_000),
    catalog: new Catalog(env.db, invalidation),
    reservations,
    upstreamTimeoutMs: opts.upstreamTimeoutMs ?? 10_000,
    mediaTaskQueue: taskQueue,
    videoPolling: opts.polling,
    videoPollIntervalMs: opts.pollIntervalMs,
  };
  const server = http.createServer(createGatewayApp(deps).callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  let running: Promise<void> | null = null;
  const stack: VideoStack = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    taskQueue,
    temporal,
    worker: null,
    async startWorker() {
      stack.worker = await createMediaWorker({ connection: nativeConnection, namespace: 'default', taskQueue, db: env.db, workflowBundle: env.bundles.media });
      running = stack.worker.run();
    },
    async stopWorker() {
      stack.worker?.shutdown();
      await running;
      stack.worker = null;
    },
    async close() {
      await stack.stopWorker();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await invalidation.stop();
      await connection.close();
      await nativeConnection.close();
    },
  };
  await stack.startWorker();
  return stack;
}

/** Waits until the job's row reaches one of `statuses` (read from the database, not by polling the API). */
export async function jobReaches(jobId: string, statuses: string[], timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const row = await env.db('video_jobs').where({ id: jobId }).first();
    if (row && statuses.includes(row.status)) return row;
    if (Date.now() > deadline) throw new Error(`video job ${jobId} still ${row?.status ?? 'missing'} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export interface ChildWorker {
  child: ChildProcess;
  /** the last resource line the child printed (with STATS_MS) */
  stats(): { cpu_ms: number; rss_mb: number; heap_mb: number } | null;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/** Starts test/helpers/media-worker-child.ts under node itself (a tsx wrapper would survive a kill). */
export async function spawnMediaWorker(o: { databaseUrl: string; temporalAddress: string; taskQueue: string; bundlePath?: string; statsMs?: number; maxCachedWorkflows?: number; stickyTimeout?: string }): Promise<ChildWorker> {
  const child = spawn(process.execPath, ['--require', 'tsx/cjs', path.join(__dirname, 'media-worker-child.ts')], {
    cwd: path.join(__dirname, '../..'),
    env: {
      ...process.env,
      DATABASE_URL: o.databaseUrl,
      TEMPORAL_ADDRESS: o.temporalAddress,
      TASK_QUEUE: o.taskQueue,
      ...(o.bundlePath ? { BUNDLE_PATH: o.bundlePath } : {}),
      ...(o.statsMs ? { STATS_MS: String(o.statsMs) } : {}),
      ...(o.stickyTimeout ? { STICKY_TIMEOUT: o.stickyTimeout } : {}),
      ...(o.maxCachedWorkflows ? { MAX_CACHED_WORKFLOWS: String(o.maxCachedWorkflows) } : {}),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let last: ReturnType<ChildWorker['stats']> = null;
  let buffered = '';
  await new Promise<void>((resolve, reject) => {
    let err = '';
    child.stderr!.on('data', (d) => (err += d));
    child.stdout!.on('data', (d) => {
      buffered += String(d);
      const lines = buffered.split('\n');
      buffered = lines.pop()!;
      for (const line of lines) {
        if (line === 'ready') resolve();
        else if (line.startsWith('{')) last = JSON.parse(line);
      }
    });
    child.once('exit', (code) => reject(new Error(`media worker child exited (${code}): ${err}`)));
  });
  return {
    child,
    stats: () => last,
    async kill(signal: NodeJS.Signals = 'SIGKILL') {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill(signal);
      await exited;
    },
  };
}
