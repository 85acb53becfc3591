import { NativeConnection, Worker, type WorkflowBundleOption } from '@temporalio/worker';
import { createLedgerActivities } from '../activities/ledger';
import type { Db } from '../platform/db';

export interface WorkerDeps {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  db: Db;
  /** Pre-built bundle (tests build it once); otherwise bundled from workflows/. */
  workflowBundle?: WorkflowBundleOption;
}

/** Registers the reservation workflow and the ledger activities on the billing task queue. */
export function createBillingWorker(deps: WorkerDeps): Promise<Worker> {
  return Worker.create({
    connection: deps.connection,
    namespace: deps.namespace,
    taskQueue: deps.taskQueue,
    ...(deps.workflowBundle ? { workflowBundle: deps.workflowBundle } : { workflowsPath: require.resolve('../workflows') }),
    activities: createLedgerActivities(deps.db),
    maxConcurrentActivityTaskExecutions: 200,
    maxConcurrentWorkflowTaskExecutions: 200,
  });
}
