import type { NativeConnection, Worker, WorkerOptions, WorkflowBundleOption } from '@temporalio/worker';
import { createAlertActivities } from '../activities/panel/alerts/alerts';
import { createBackupOpActivities } from '../activities/panel/backups/backup-ops';
import { createDatabaseOpActivities } from '../activities/panel/databases/database-ops';
import { createImportActivities } from '../activities/panel/imports/imports';
import type { ImportRunDeps } from '../services/panel/imports/run-items';
import { createNodeOpActivities } from '../activities/panel/sites/node-ops';
import { createReconcileActivities } from '../activities/panel/reconcile/reconcile';
import type { OwnNode } from '../domain/panel/own-node';
import type { Db } from '../platform/db';
import { PANEL_TASK_QUEUE } from '../domain/panel/workflows';
import { createDomainWorker } from './base';

export interface PanelWorkerDeps {
  connection: NativeConnection;
  namespace: string;
  /** `panel` (PANEL_TASK_QUEUE), or a test's own queue */
  taskQueue?: string;
  db: Db;
  /** the panel's own hosting node, applied to, read and rewritten directly; null: hosting operations and reconciliation passes fail on this worker */
  hostingNode: OwnNode | null;
  /** Pre-built panel bundle (tests build it once); otherwise bundled from workflows/panel. */
  workflowBundle?: WorkflowBundleOption;
  /** anything else for Worker.create (tests: stickyQueueScheduleToStartTimeout, identity) */
  workerOptions?: Partial<WorkerOptions>;
  /** webhook signing secrets are sealed with it (the panel's sealing key) */
  sealingKey?: Buffer;
  /** internal addresses the operator allows as webhook targets */
  webhookAllowTargets?: string[];
  /** legacy imports' item runner (its services' dependencies); absent: imports do not run on this worker */
  imports?: ImportRunDeps;
}

/** Registers the panel's workflows (node operations on sites and databases) and their activities on the panel task queue. */
export function createPanelWorker(deps: PanelWorkerDeps): Promise<Worker> {
  return createDomainWorker({
    domain: 'panel',
    connection: deps.connection,
    namespace: deps.namespace,
    taskQueue: deps.taskQueue ?? PANEL_TASK_QUEUE,
    workflowBundle: deps.workflowBundle,
    activities: {
      ...createNodeOpActivities({ db: deps.db, hostingNode: deps.hostingNode }),
      ...createDatabaseOpActivities({ db: deps.db, hostingNode: deps.hostingNode }),
      ...createReconcileActivities({ db: deps.db, hostingNode: deps.hostingNode }),
      ...createBackupOpActivities({ db: deps.db, hostingNode: deps.hostingNode }),
      ...(deps.sealingKey ? createAlertActivities({ db: deps.db, sealingKey: deps.sealingKey, webhookAllowTargets: deps.webhookAllowTargets ?? [] }) : {}),
      ...(deps.imports ? createImportActivities(deps.imports) : {}),
    },
    // A hosting apply holds a database connection (the site's row lock) while the node reloads:
    // a few at a time, so the applies cannot take the whole pool.
    options: { maxConcurrentActivityTaskExecutions: 8, maxConcurrentLocalActivityExecutions: 32, ...deps.workerOptions },
  });
}
