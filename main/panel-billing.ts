import type { Client } from '@temporalio/client';
import { NativeConnection, type WorkflowBundleOption } from '@temporalio/worker';
import type { ClientConfig } from 'pg';
import { ensureMeterSchedule } from '../services/panel/billing/client';
import { BILLING_TASK_QUEUE, METER_SCHEDULE_ID } from '../domain/panel/workflows';
import type { Clock } from '../services/panel/billing/plans';
import type { BillingSettings } from '../services/panel/billing/statements';
import type { Db } from '../platform/db';
import type { Logger } from '../platform/logger';
import { temporalConnectOptions, type TemporalSecurity } from '../platform/temporal-connection';
import { runWorker } from '../workers/base';
import { createBillingWorker } from '../workers/panel-billing';
import { keepSchedules } from '../workers/schedules';

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
 * -billing-meter (or `worker --queues panel-billing`): runs the billing worker (metering and month
 * close); the one billing worker that keeps the hourly schedule makes sure it exists and points at
 * its queue, and triggers a tick that catches up missed hours in order.
 */
export async function startBilling(
  o: { db: Db; databaseUrl: string | ClientConfig; temporalAddress: string; temporalSecurity?: TemporalSecurity; namespace: string; logger: Logger; billing?: PanelBillingOptions },
  temporal: Client,
  stops: Array<() => Promise<unknown>>,
): Promise<void> {
  const settings = billingSettings(true, o.billing);
  const connection = await NativeConnection.connect(temporalConnectOptions(o.temporalAddress, o.temporalSecurity));
  stops.push(() => connection.close());
  const worker = await createBillingWorker({ connection, namespace: o.namespace, taskQueue: settings.taskQueue, db: o.db, clock: settings.clock, workflowBundle: o.billing?.workflowBundle });
  stops.push(runWorker(worker).stop);
  // One billing worker keeps the meter schedule (workers/schedules.ts).
  const scheduleId = o.billing?.scheduleId ?? METER_SCHEDULE_ID;
  const keeper = await keepSchedules({ singleton: 'billingSchedules', schedules: [scheduleId], databaseUrl: o.databaseUrl, logger: o.logger, ensure: () => ensureMeterSchedule(temporal, settings.taskQueue, scheduleId) });
  stops.push(() => keeper.stop());
}
