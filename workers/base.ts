import { NativeConnection, Worker, type WorkerOptions, type WorkflowBundleOption } from '@temporalio/worker';
import { workerTracingOptions } from './tracing';

/**
 * The one place a worker is built: each domain registers only its own workflow bundle
 * (`workflows/<domain>/index.ts`) and activities on its task queue.
 */
export type WorkflowDomain = 'credits' | 'media' | 'testruns' | 'panel';

export const workflowsPath = (domain: WorkflowDomain): string => require.resolve(`../workflows/${domain}`);

export interface DomainWorkerOptions {
  domain: WorkflowDomain;
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  activities: object;
  /** Pre-built bundle of the same domain (tests build each once); otherwise bundled from workflows/<domain>. */
  workflowBundle?: WorkflowBundleOption;
  /** anything else for Worker.create (limits; tests: stickyQueueScheduleToStartTimeout, identity) */
  options?: Partial<WorkerOptions>;
}

export function createDomainWorker(o: DomainWorkerOptions): Promise<Worker> {
  return Worker.create({
    connection: o.connection,
    namespace: o.namespace,
    taskQueue: o.taskQueue,
    ...(o.workflowBundle ? { workflowBundle: o.workflowBundle } : { workflowsPath: workflowsPath(o.domain) }),
    activities: o.activities,
    maxConcurrentActivityTaskExecutions: 200,
    maxConcurrentLocalActivityExecutions: 200,
    maxConcurrentWorkflowTaskExecutions: 200,
    ...workerTracingOptions(!o.workflowBundle), // OTEL_EXPORTER_OTLP_ENDPOINT set: workflow and activity spans
    ...o.options,
  });
}

/** Runs a worker until `stop()`, which shuts it down (if the SDK has not on a signal) and waits. */
export function runWorker(worker: Worker): { stop(): Promise<void> } {
  const running = worker.run();
  return {
    async stop() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running;
    },
  };
}
