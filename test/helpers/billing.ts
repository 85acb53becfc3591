import { randomUUID } from 'node:crypto';
import { Client, Connection, ScheduleOverlapPolicy } from '@temporalio/client';
import { env } from '../setup/env';
import { startPanel } from './panel';
import { until } from './until';

// A panel with -billing-meter whose clock the test moves (hours are driven, never waited for), on a
// billing task queue and metering schedule of its own; and the fixtures metering reads (nodes with
// labels, sites, databases) written straight into the panel's tables.

export interface BillingPanel {
  url: string;
  temporal: Client;
  scheduleId: string;
  taskQueue: string;
  /** moves the clock to `iso`, runs the metering schedule's tick and waits until every hour ended by then is recorded */
  meterUntil(iso: string): Promise<void>;
  setClock(iso: string): void;
  close(): Promise<void>;
}

const HOUR = 3_600_000;

export async function lastMeteredHour(): Promise<Date | null> {
  const row = await env.db('panel_meter_hours').max('hour as h').first();
  return row?.h ? new Date(row.h) : null;
}

/** Waits until the metering schedule has no tick running. */
async function idle(temporal: Client, scheduleId: string) {
  await until('the metering tick to finish', async () => (await temporal.schedule.getHandle(scheduleId).describe()).info.runningActions.length === 0, 90_000);
}

export async function startBillingPanel(startIso: string, opts: { flags?: string[] } = {}): Promise<BillingPanel> {
  let now = new Date(startIso);
  const scheduleId = `meter-test-${randomUUID()}`;
  const taskQueue = `billing-test-${randomUUID()}`;
  const runtime = await startPanel({ flags: ['-billing-meter', ...(opts.flags ?? [])], billing: { clock: () => now, scheduleId, taskQueue, workflowBundle: env.bundles.panel } });
  const connection = await Connection.connect({ address: env.temporalAddress });
  const temporal = new Client({ connection });
  await idle(temporal, scheduleId);
  return {
    url: runtime.url,
    temporal,
    scheduleId,
    taskQueue,
    setClock(iso) {
      now = new Date(iso);
    },
    async meterUntil(iso) {
      now = new Date(iso);
      const want = Math.floor(now.getTime() / HOUR) * HOUR - HOUR;
      await idle(temporal, scheduleId);
      await temporal.schedule.getHandle(scheduleId).trigger(ScheduleOverlapPolicy.SKIP);
      await until(`hours metered up to ${new Date(want).toISOString()}`, async () => ((await lastMeteredHour())?.getTime() ?? 0) >= want, 90_000);
      await idle(temporal, scheduleId);
    },
    async close() {
      await temporal.schedule.getHandle(scheduleId).delete();
      await runtime.close();
      await connection.close();
    },
  };
}

export async function addLabelledNode(name: string, labels: { logical_region?: string; physical_region?: string; zone?: string; cell?: string }) {
  await env.db('panel_nodes').insert({ name, kind: 'agent', state: 'alive', roles: ['web', 'db'], ...labels });
}

export async function addSite(orgId: string, node: string, quotaMb: number, status: 'active' | 'suspended' | 'pending' | 'failed' = 'active') {
  const id = randomUUID();
  await env.db('panel_sites').insert({ id, org_id: orgId, domain: `${id.slice(0, 8)}.billing.test`, node_name: node, status, suspended: status === 'suspended', quota_mb: quotaMb, placement: '{}' });
  return id;
}

export async function addDatabase(orgId: string, node: string) {
  const id = randomUUID();
  await env.db('panel_databases').insert({ id, org_id: orgId, node_name: node, name: `db_${id.slice(0, 8)}`, db_user: `u_${id.slice(0, 8)}`, status: 'active' });
  return id;
}
