import { Client } from '@temporalio/client';
import type { NativeConnection } from '@temporalio/worker';
import { RESERVATION_TASK_QUEUE, SETTLEMENT_BATCH_MAX, settlementBatchUnder } from '../domain/credits/reservation';
import { MEDIA_TASK_QUEUE } from '../domain/media/video';
import type { Config } from '../platform/config';
import type { Db } from '../platform/db';
import type { Logger } from '../platform/logger';
import { observedClientOptions } from '../platform/temporal-client';
import type { TemporalSecurity } from '../platform/temporal-connection';
import { DEV_SERVER_SEARCH_ATTRIBUTE_VALUE_LIMIT } from '../platform/temporal-server';
import { startAccountEventRelay } from '../services/accounts/event-relay';
import { startSettlementRelay } from '../services/credits/relay';
import { runWorker } from '../workers/base';
import { createCreditsWorker } from '../workers/credits';
import { createMediaWorker } from '../workers/media';
import { creditsSchedules, keepSchedules } from '../workers/schedules';
import { startTestRunWorker } from '../workers/testruns';
import { startBilling } from './panel-billing';

// The workflow workers a process runs, by role queue name: shared by `npm start` (credits, media,
// testruns) and the `worker` role (`--queues`). Any number of processes may run any of them: the
// relays claim their rows, and each schedule group is kept by one of them (workers/schedules.ts).

export const WORKER_QUEUES = ['credits', 'media', 'testruns', 'panel-billing'] as const;
export type WorkerQueue = (typeof WORKER_QUEUES)[number];

/** `--queues a,b`: the role queue names, checked; `panel` is refused with where it runs instead. */
export function parseQueues(list: string): WorkerQueue[] {
  const names = [...new Set(list.split(',').map((q) => q.trim()).filter(Boolean))];
  if (!names.length) throw new Error(`--queues: name at least one of ${WORKER_QUEUES.join(', ')}`);
  for (const q of names) {
    if (q === 'panel') throw new Error('--queues: the panel queue runs in panel-api beside the panel\'s own hosting node, whose operations its activities apply (docs/deploy.md)');
    if (!(WORKER_QUEUES as readonly string[]).includes(q)) throw new Error(`--queues: unknown queue '${q}' (known: ${WORKER_QUEUES.join(', ')})`);
  }
  return names as WorkerQueue[];
}

export interface QueueDeps {
  config: Config;
  db: Db;
  databaseUrl: string;
  temporalAddress: string;
  /** TLS and API key of Temporal connections this module opens (the billing worker's) */
  temporalSecurity?: TemporalSecurity;
  connection: NativeConnection;
  temporal: Client;
  logger: Logger;
}

/** Starts the workers of `queues` (and the credits relays with `credits`); pushes their stops in start order. */
export async function startQueues(queues: WorkerQueue[], d: QueueDeps, stops: Array<() => Promise<unknown>>): Promise<void> {
  const { config, db, connection, temporal, logger } = d;
  const namespace = config.TEMPORAL_NAMESPACE;
  if (queues.includes('credits')) {
    const credits = await createCreditsWorker({
      connection,
      temporal,
      namespace,
      taskQueue: RESERVATION_TASK_QUEUE,
      db,
      // Holds of rows written before processes were recorded keep the old age rule.
      abandonment: { deadAfterMs: config.API_PROCESS_DEAD_AFTER_SECONDS * 1000, unrecordedOlderThanMs: config.HOLD_TIMEOUT_SECONDS * 1000 + config.UPSTREAM_TIMEOUT_MS + 60_000 },
      accountWebhooks: { allowTargets: config.GATEWAY_WEBHOOK_ALLOW_TARGETS },
    });
    const keeper = await keepSchedules({ ...creditsSchedules(temporal), databaseUrl: d.databaseUrl, logger });
    stops.push(() => keeper.stop());
    stops.push(runWorker(credits).stop);
    // Recorded outcomes to settlement workflows, in batches (services/credits/relay.ts), started
    // eagerly on the worker's own connection (no task-queue round trip, no gRPC in the caller's thread).
    const relay = await startSettlementRelay({
      db,
      databaseUrl: d.databaseUrl,
      temporal: new Client({ connection, namespace, ...observedClientOptions() }),
      eagerStart: true,
      // the embedded dev server takes longer search-attribute values (platform/temporal-server.ts)
      batchSize: config.SETTLEMENT_BATCH_SIZE ?? (config.TEMPORAL_ADDRESS ? SETTLEMENT_BATCH_MAX : settlementBatchUnder(DEV_SERVER_SEARCH_ATTRIBUTE_VALUE_LIMIT)),
      // A partial batch waits this long for more outcomes (full ones go at once): at 500 req/s a
      // batch of 210 fills in 420 ms, well inside the lag target (p99 ≤ 2 s, DESIGN.md §6).
      flushMs: 500,
      taskQueue: RESERVATION_TASK_QUEUE,
      logger,
      holdTimeoutMs: config.HOLD_TIMEOUT_SECONDS * 1000,
      uncertainGraceMs: config.UPSTREAM_TIMEOUT_MS,
    });
    stops.push(relay.stop);
    // Account events (balance.low, key.spend_limit_reached) to their delivery workflows.
    stops.push((await startAccountEventRelay({ db, databaseUrl: d.databaseUrl, temporal, taskQueue: RESERVATION_TASK_QUEUE, logger })).stop);
  }
  // Video jobs (spec 1 section 3.1): one workflow per job on the media task queue.
  if (queues.includes('media')) stops.push(runWorker(await createMediaWorker({ connection, namespace, taskQueue: MEDIA_TASK_QUEUE, db })).stop);
  // Test runs (spec 3 B): cases call the gateway at TESTRUN_GATEWAY_URL; settings TESTRUN_* (workers/testruns.ts).
  if (queues.includes('testruns')) stops.push((await startTestRunWorker({ connection, namespace, db, gatewayUrl: testRunGatewayUrl(config) })).stop);
  // Panel billing (metering, month close): the same worker panel-api -billing-meter runs.
  if (queues.includes('panel-billing')) await startBilling({ db, databaseUrl: d.databaseUrl, temporalAddress: d.temporalAddress, temporalSecurity: d.temporalSecurity, namespace, logger }, temporal, stops);
}

/** The gateway test-run cases call: TESTRUN_GATEWAY_URL, else this host's gateway port. */
export const testRunGatewayUrl = (config: Config): string => config.TESTRUN_GATEWAY_URL ?? `http://127.0.0.1:${config.GATEWAY_PORT}`;

/** The schedule groups the queues compete for, for the start-up log line. */
export const scheduleGroupsOf = (queues: WorkerQueue[]): string[] =>
  [queues.includes('credits') ? 'creditsSchedules' : null, queues.includes('panel-billing') ? 'billingSchedules' : null].filter((g): g is string => g !== null);
