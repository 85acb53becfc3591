import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { createDb } from '../../platform/db';
import { createMediaWorker } from '../../workers/media';

// A media worker in a process of its own, so that a test can kill it (SIGKILL) mid-job and a
// benchmark can measure its CPU and memory. Settings from the environment; prints `ready` once
// it polls, then one JSON line of its resource use every STATS_MS (when set).

async function main() {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const e = process.env;
  const db = createDb(e.DATABASE_URL!, Number(e.DB_POOL_MAX ?? 10));
  const connection = await NativeConnection.connect({ address: e.TEMPORAL_ADDRESS! });
  const worker = await createMediaWorker({
    connection,
    namespace: 'default',
    taskQueue: e.TASK_QUEUE!,
    db,
    ...(e.BUNDLE_PATH ? { workflowBundle: { codePath: e.BUNDLE_PATH } } : {}),
    ...(e.MAX_CACHED_WORKFLOWS ? { maxCachedWorkflows: Number(e.MAX_CACHED_WORKFLOWS) } : {}),
    // Tests that kill it: the job moves to another worker 1 s after this one stops answering.
    workerOptions: { identity: `media-child-${process.pid}`, ...(e.STICKY_TIMEOUT ? { stickyQueueScheduleToStartTimeout: e.STICKY_TIMEOUT } : {}) },
  });
  const running = worker.run();
  process.stdout.write('ready\n');
  if (e.STATS_MS) {
    setInterval(() => {
      const cpu = process.cpuUsage();
      const mem = process.memoryUsage();
      process.stdout.write(`${JSON.stringify({ cpu_ms: (cpu.user + cpu.system) / 1000, rss_mb: mem.rss / 2 ** 20, heap_mb: mem.heapUsed / 2 ** 20 })}\n`);
    }, Number(e.STATS_MS)).unref();
  }
  process.once('SIGTERM', () => worker.shutdown());
  await running;
  await db.destroy();
  await connection.close();
}

main().catch((err) => {
  process.stderr.write(String(err instanceof Error ? err.stack : err) + '\n');
  process.exit(1);
});
