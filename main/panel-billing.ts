import type { Client } from '@temporalio/client';
import { NativeConnection, type WorkflowBundleOption } from '@temporalio/worker';
import { BILLING_TASK_QUEUE, ensureMeterSchedule } from '../services/panel/billing/client';
import type { Clock } from '../services/panel/billing/plans';
import type { BillingSettings } from '../services/panel/billing/statements';
import type { Db } from '../platform/db';
import { temporalConnectOptions, type TemporalSecurity } from '../platform/temporal-connection';
import { runWorker } from '../workers/base';
import { createBillingWorker } from '../workers/panel-billing';

/** Billing of a panel process: the clock (tests inject a fake one), the task queue and schedule id. */
export interface PanelBillingOptions {
  clock?: Clock;
  /** the billing worker's task queue (default `panel-billing`; tests use their own) */
  taskQueue?: string;
  /** the metering schedule's id (default `panel-billing-meter`) */
  scheduleId?: string;
  /** pre-built panel workflow bundle (tests build it once) */
  workflowBundle?: WorkflowBundleOption;
}

export const billingSettings = (metering: boolean, o: PanelBillingOptions = {}): BillingSettings & { taskQueue: string } => ({
  metering,
  clock: o.clock ?? (() => new Date()),
  taskQueue: o.taskQueue ?? BILLING_TASK_QUEUE,
});

/**
 * -billing-meter: runs the billing worker (metering and month close) and makes sure the hourly
 * schedule exists and points at it; its first tick runs now and catches up missed hours in order.
 */
export async function startBilling(
  o: { db: Db; temporalAddress: string; temporalSecurity?: TemporalSecurity; namespace: string; billing?: PanelBillingOptions },
  temporal: Client,
  stops: Array<() => Promise<unknown>>,
): Promise<void> {
  const settings = billingSettings(true, o.billing);
  const connection = await NativeConnection.connect(temporalConnectOptions(o.temporalAddress, o.temporalSecurity));
  stops.push(() => connection.close());
  const worker = await createBillingWorker({ connection, namespace: o.namespace, taskQueue: settings.taskQueue, db: o.db, clock: settings.clock, workflowBundle: o.billing?.workflowBundle });
  stops.push(runWorker(worker).stop);
  await ensureMeterSchedule(temporal, settings.taskQueue, o.billing?.scheduleId);
}
