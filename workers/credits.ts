import type { Client } from '@temporalio/client';
import type { NativeConnection, Worker, WorkflowBundleOption } from '@temporalio/worker';
import { createProviderCostActivities } from '../activities/credits/provider-cost';
import { createSettlementActivities } from '../activities/credits/settlement';
import { createSweeperActivities } from '../activities/credits/sweeper';
import type { Db } from '../platform/db';
import type { AbandonmentRule } from '../services/credits/settlement';
import { createDomainWorker } from './base';
import { createAccountWebhookActivities } from '../activities/credits/account-webhooks';
import { loadSealingKey } from '../platform/secret-box';

export interface CreditsWorkerDeps {
  connection: NativeConnection;
  /** for activities that look at workflows (the hold sweeper) */
  temporal: Client;
  namespace: string;
  taskQueue: string;
  db: Db;
  /** when the hold sweeper takes a hold's API process for dead */
  abandonment: AbandonmentRule;
  /** Pre-built credits bundle (tests build it once); otherwise bundled from workflows/credits. */
  workflowBundle?: WorkflowBundleOption;
  /** account webhook delivery: the sealing key (default: loadSealingKey()) and GATEWAY_WEBHOOK_ALLOW_TARGETS */
  accountWebhooks?: { sealingKey?: Buffer; allowTargets: string[] };
}

/** Registers the reservation and sweeper workflows and their activities on the billing task queue. */
export function createCreditsWorker(deps: CreditsWorkerDeps): Promise<Worker> {
  return createDomainWorker({
    domain: 'credits',
    connection: deps.connection,
    namespace: deps.namespace,
    taskQueue: deps.taskQueue,
    workflowBundle: deps.workflowBundle,
    activities: { ...createSettlementActivities(deps.db), ...createSweeperActivities(deps.db, deps.temporal, deps.abandonment), ...createProviderCostActivities(deps.db),
      ...createAccountWebhookActivities({ db: deps.db, sealingKey: deps.accountWebhooks?.sealingKey ?? loadSealingKey(), allowTargets: deps.accountWebhooks?.allowTargets ?? [] }) },
  });
}
