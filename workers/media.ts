import type { NativeConnection, Worker, WorkerOptions, WorkflowBundleOption } from '@temporalio/worker';
import { createSettlementActivities } from '../activities/credits/settlement';
import { createVideoActivities } from '../activities/media/video';
import type { Db } from '../platform/db';
import { createDomainWorker } from './base';

export interface MediaWorkerDeps {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  db: Db;
  /** Pre-built media bundle (tests build it once); otherwise bundled from workflows/media. */
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

/** Registers the video job workflow, its activities and the settlement activity on the media task queue. */
export function createMediaWorker(deps: MediaWorkerDeps): Promise<Worker> {
  return createDomainWorker({
    domain: 'media',
    connection: deps.connection,
    namespace: deps.namespace,
    taskQueue: deps.taskQueue,
    workflowBundle: deps.workflowBundle,
    activities: { ...createVideoActivities({ db: deps.db }), ...createSettlementActivities(deps.db) },
    options: { maxCachedWorkflows: deps.maxCachedWorkflows ?? 2000, ...deps.workerOptions },
  });
}
