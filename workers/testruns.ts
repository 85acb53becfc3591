import type { NativeConnection, Worker, WorkerOptions, WorkflowBundleOption } from '@temporalio/worker';
import { createTestRunActivities } from '../activities/testruns/run';
import { TEST_RUN_TASK_QUEUE } from '../domain/testruns/runs';
import type { Db } from '../platform/db';
import { loadConfig } from '../platform/config';
import { loadSealingKey } from '../platform/secret-box';
import { createDomainWorker, runWorker } from './base';

export interface TestRunWorkerDeps {
  connection: NativeConnection;
  namespace: string;
  /** `testruns` (TEST_RUN_TASK_QUEUE), or a project's own queue (test_projects.task_queue) */
  taskQueue: string;
  db: Db;
  /** the gateway the cases call */
  gatewayUrl: string;
  sealingKey: Buffer;
  /** concurrency gate over every project and worker (TESTRUN_MAX_CONCURRENCY) */
  globalConcurrency: number;
  leaseTtlMs?: number;
  /** Pre-built test-run bundle (tests build it once); otherwise bundled from workflows/testruns. */
  workflowBundle?: WorkflowBundleOption;
  /** extra worker options (tests: a short sticky-queue timeout) */
  workerOptions?: Partial<Pick<WorkerOptions, 'stickyQueueScheduleToStartTimeout' | 'maxConcurrentActivityTaskExecutions' | 'identity'>>;
}

/** Registers the test-run workflow and its activities on a test-run task queue. */
export function createTestRunWorker(deps: TestRunWorkerDeps): Promise<Worker> {
  return createDomainWorker({
    domain: 'testruns',
    connection: deps.connection,
    namespace: deps.namespace,
    taskQueue: deps.taskQueue,
    workflowBundle: deps.workflowBundle,
    activities: createTestRunActivities({
      db: deps.db,
      gatewayUrl: deps.gatewayUrl,
      sealingKey: deps.sealingKey,
      globalConcurrency: deps.globalConcurrency,
      leaseTtlMs: deps.leaseTtlMs,
    }),
    // Cases waiting at the gate hold an activity slot each (waitForCaseSlot heartbeats in it): 200 by default.
    // A cancel (or the deadline timer) reaches a running case with its next heartbeat, which the SDK
    // throttles to 0.8 × the heartbeat timeout (8 s by default): at most a second instead.
    options: { maxHeartbeatThrottleInterval: '1 second', ...deps.workerOptions },
  });
}

/**
 * The worker's settings from the environment: TESTRUN_MAX_CONCURRENCY (case executions at once
 * over every project, default 16; set the same value on every worker), TESTRUN_LEASE_TTL_SECONDS
 * (default 30) and the sealing key (TESTRUN_SECRET, else DATA_DIR/testrun-secret).
 */
export function testRunSettingsFromEnv(env: NodeJS.ProcessEnv = process.env) {
  const s = loadConfig(env);
  return { globalConcurrency: s.TESTRUN_MAX_CONCURRENCY, leaseTtlMs: s.TESTRUN_LEASE_TTL_SECONDS * 1000, sealingKey: loadSealingKey(env) };
}

/** `npm start`: the test-run worker on the `testruns` queue, with its settings from the environment. */
export async function startTestRunWorker(
  deps: Omit<TestRunWorkerDeps, 'sealingKey' | 'globalConcurrency' | 'leaseTtlMs' | 'taskQueue'> & { taskQueue?: string },
): Promise<{ stop(): Promise<void> }> {
  return runWorker(await createTestRunWorker({ taskQueue: TEST_RUN_TASK_QUEUE, ...deps, ...testRunSettingsFromEnv() }));
}
