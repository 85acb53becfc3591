import type { Client } from '@temporalio/client';
import { NativeConnection, Worker, type WorkflowBundleOption } from '@temporalio/worker';
import { createLedgerActivities } from '../activities/ledger';
import { createProviderCostActivities } from '../activities/provider-cost';
import { createSweeperActivities } from '../activities/sweeper';
import type { Db } from '../platform/db';

export interface WorkerDeps {
  connection: NativeConnection;
  /** for activities that look at workflows (the hold sweeper) */
  temporal: Client;
  namespace: string;
  taskQueue: string;
  db: Db;
  /** Pre-built bundle (tests build it once); otherwise bundled from workflows/. */
  workflowBundle?: WorkflowBundleOption;
}

/** Registers the reservation and sweeper workflows and their activities on the billing task queue. */
export function createBillingWorker(deps: WorkerDeps): Promise<Worker> {
  return Worker.create({
    connection: deps.connection,
    namespace: deps.namespace,
    taskQueue: deps.taskQueue,
    ...(deps.workflowBundle ? { workflowBundle: deps.workflowBundle } : { workflowsPath: require.resolve('../workflows') }),
    activities: { ...createLedgerActivities(deps.db), ...createSweeperActivities(deps.db, deps.temporal), ...createProviderCostActivities(deps.db) },
    maxConcurrentActivityTaskExecutions: 200,
    maxConcurrentWorkflowTaskExecutions: 200,
  });
}
