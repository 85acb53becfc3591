import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { createDb } from '../../platform/db';
import { createTestRunWorker } from '../../workers/testruns';

// A test-run worker in a process of its own, so that a test can kill it (SIGKILL) mid-run.
// Everything comes from the environment; prints `ready` once it polls.

async function main() {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const e = process.env;
  const db = createDb(e.DATABASE_URL!, 5);
  const connection = await NativeConnection.connect({ address: e.TEMPORAL_ADDRESS! });
  const worker = await createTestRunWorker({
    connection,
    namespace: 'default',
    taskQueue: e.TASK_QUEUE!,
    db,
    gatewayUrl: e.GATEWAY_URL!,
    sealingKey: Buffer.from(e.SEALING_KEY_HEX!, 'hex'),
    globalConcurrency: 50,
    workflowBundle: { codePath: e.BUNDLE_PATH! },
    // The workflow moves to another worker 1 s after this one stops answering, not 10 s.
    workerOptions: { stickyQueueScheduleToStartTimeout: '1s', identity: `child-${process.pid}` },
  });
  const running = worker.run();
  process.stdout.write('ready\n');
  await running;
}

main().catch((err) => {
  process.stderr.write(String(err instanceof Error ? err.stack : err) + '\n');
  process.exit(1);
});
