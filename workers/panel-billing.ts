import type { NativeConnection, Worker, WorkflowBundleOption } from '@temporalio/worker';
import { createBillingActivities } from '../activities/panel/billing/billing';
import type { Db } from '../platform/db';
import { BILLING_TASK_QUEUE } from '../domain/panel/workflows';
import type { Clock } from '../services/panel/billing/plans';
import { createDomainWorker } from './base';

export interface BillingWorkerDeps {
  connection: NativeConnection;
  namespace: string;
  /** `panel-billing` (BILLING_TASK_QUEUE), or a test's own queue */
  taskQueue?: string;
  db: Db;
  clock: Clock;
  workflowBundle?: WorkflowBundleOption;
}

/**
 * The billing worker of a panel running with -billing-meter: the panel bundle on its own task queue
 * with only the billing activities (metering, month close), so it never takes node operations.
 */
export function createBillingWorker(d: BillingWorkerDeps): Promise<Worker> {
  return createDomainWorker({
    domain: 'panel',
    connection: d.connection,
    namespace: d.namespace,
    taskQueue: d.taskQueue ?? BILLING_TASK_QUEUE,
    workflowBundle: d.workflowBundle,
    activities: createBillingActivities({ db: d.db, clock: d.clock }),
    // metered hours run one after the other (one tick at a time); closes are short transactions,
    // many at once when a whole tree closes its month, bounded below the database pool
    options: { maxConcurrentActivityTaskExecutions: 8 },
  });
}
