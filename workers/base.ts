import fs from 'node:fs';
import path from 'node:path';
import { NativeConnection, Worker, type WorkerOptions, type WorkflowBundleOption } from '@temporalio/worker';
import { tracingEnabled } from '../platform/tracing';
import { workerTracingOptions } from './tracing';

/**
 * The one place a worker is built: each domain registers only its own workflow bundle
 * (`workflows/<domain>/index.ts`) and activities on its task queue.
 */
export type WorkflowDomain = 'credits' | 'media' | 'testruns' | 'panel';

export const WORKFLOW_DOMAINS: WorkflowDomain[] = ['credits', 'media', 'testruns', 'panel'];

export const workflowsPath = (domain: WorkflowDomain): string => require.resolve(`../workflows/${domain}`);

/** A domain's bundle as `npm run build` writes it into dist/workflows/ (traced: with the tracing interceptors). */
export const bundleFile = (domain: WorkflowDomain, traced: boolean): string => `${domain}${traced ? '.traced' : ''}.bundle.js`;

/** Running from dist/: the bundle built beside the compiled workflows, so the worker does not bundle at start. */
function prebuiltBundle(domain: WorkflowDomain): WorkflowBundleOption | undefined {
  const codePath = path.join(__dirname, '..', 'workflows', bundleFile(domain, tracingEnabled()));
  return fs.existsSync(codePath) ? { codePath } : undefined;
}

export interface DomainWorkerOptions {
  domain: WorkflowDomain;
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  activities: object;
  /** Pre-built bundle of the same domain (tests build each once); otherwise dist's, else bundled from workflows/<domain>. */
  workflowBundle?: WorkflowBundleOption;
  /** anything else for Worker.create (limits; tests: stickyQueueScheduleToStartTimeout, identity) */
  options?: Partial<WorkerOptions>;
}

export function createDomainWorker(o: DomainWorkerOptions): Promise<Worker> {
  const bundle = o.workflowBundle ?? prebuiltBundle(o.domain);
  return Worker.create({
    connection: o.connection,
    namespace: o.namespace,
    taskQueue: o.taskQueue,
    ...(bundle ? { workflowBundle: bundle } : { workflowsPath: workflowsPath(o.domain) }),
    activities: o.activities,
    maxConcurrentActivityTaskExecutions: 200,
    maxConcurrentLocalActivityExecutions: 200,
    maxConcurrentWorkflowTaskExecutions: 200,
    ...workerTracingOptions(!bundle), // OTEL_EXPORTER_OTLP_ENDPOINT set: workflow and activity spans
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
