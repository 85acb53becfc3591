import { NativeConnection, Worker, type WorkerOptions, type WorkflowBundleOption } from '@temporalio/worker';
import { createLedgerActivities } from '../activities/ledger';
import { createVideoActivities } from '../activities/video';
import type { Db } from '../platform/db';

export interface MediaWorkerDeps {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  db: Db;
  /** Pre-built bundle (tests build it once); otherwise bundled from workflows/. */
  workflowBundle?: WorkflowBundleOption;
  /**
   * Workflows kept in memory between tasks. A video job sleeps most of the time, so with
   * 10,000 in flight an evicted one is simply replayed (continue-as-new keeps histories short):
   * worker memory stays bounded by this number, not by the jobs in flight.
   */
  maxCachedWorkflows?: number;
  /** anything else for Worker.create (tests: stickyQueueScheduleToStartTimeout, identity) */
  workerOptions?: Partial<WorkerOptions>;
}

/** Registers the video job workflow, its activities and the ledger on the media task queue. */
export function createMediaWorker(deps: MediaWorkerDeps): Promise<Worker> {
  return Worker.create({
    connection: deps.connection,
    namespace: deps.namespace,
    taskQueue: deps.taskQueue,
    ...(deps.workflowBundle ? { workflowBundle: deps.workflowBundle } : { workflowsPath: require.resolve('../workflows') }),
    activities: { ...createVideoActivities({ db: deps.db }), ...createLedgerActivities(deps.db) },
    maxCachedWorkflows: deps.maxCachedWorkflows ?? 2000,
    maxConcurrentActivityTaskExecutions: 200,
    maxConcurrentLocalActivityExecutions: 200,
    maxConcurrentWorkflowTaskExecutions: 200,
    ...deps.workerOptions,
  });
}
