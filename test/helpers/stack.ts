import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, type Worker, type WorkflowBundleOption } from '@temporalio/worker';
import { createAccount } from '../../services/accounts/accounts';
import { createKey } from '../../services/keys/keys';
import type { KeyedSettings } from '../../api/gateway/keyed/variant';
import type { CorsOrigins } from '../../api/gateway/shared/cors';
import { startGatewayApi, type GatewayRuntime } from '../../main/gateway';
import type { AbandonmentRule } from '../../services/credits/settlement';
import type { Db } from '../../platform/db';
import { startSettlementRelay, type Relay } from '../../services/credits/relay';
import { createCreditsWorker } from '../../workers/credits';
import { env } from '../setup/env';
import { observedClientOptions } from '../../platform/temporal-client';
import type { BreakerSettings } from '../../domain/catalog/routing';
import { startAccountEventRelay } from '../../services/accounts/event-relay';
import type { RoutingSettings } from '../../api/gateway/text/routing';
import type { WebhookDeliveryRetry } from '../../domain/shared/webhooks';
import type { CacheBounds } from '../../services/cache/responses';

export interface Stack {
  taskQueue: string;
  gateway: GatewayRuntime;
  worker: Worker | null;
  temporal: Client;
  startWorker(): Promise<void>;
  stopWorker(): Promise<void>;
  close(): Promise<void>;
}

/** A gateway API and a billing worker on a task queue of their own, over real Temporal and PostgreSQL. */
export interface StackOptions {
  holdTimeoutMs?: number;
  uncertainGraceMs?: number;
  upstreamTimeoutMs?: number;
  /** GATEWAY_VARIANT; default credits */
  variant?: 'credits' | 'keyed';
  /** ADMIN_TOKEN */
  adminToken?: string;
  /** the hold sweeper's rule; default: a process silent 30 s is dead, unrecorded holds at once */
  abandonment?: AbandonmentRule;
  /** the gateway's api_processes heartbeat; default 5 s */
  heartbeatMs?: number;
  /** keyed-variant settings (AUTH_FAILURE_*, TRUSTED_PROXIES, …) */
  keyed?: Partial<KeyedSettings>;
  /** CORS_ORIGINS */
  corsOrigins?: CorsOrigins;
  /** the credits worker's bundle; default env.bundles.credits (the traces test adds the tracing interceptors) */
  workflowBundle?: WorkflowBundleOption;
  /** ROUTE_BREAKER_* */
  routeBreaker?: Partial<BreakerSettings>;
  /** ROUTE_RETRY_BUDGET_MS, UPSTREAM_KEY_COOLDOWN_MS */
  routing?: Partial<RoutingSettings>;
  /** RESPONSE_CACHE_MAX_ROWS / _BYTES */
  responseCache?: Partial<CacheBounds>;
  /** account webhooks: GATEWAY_WEBHOOK_ALLOW_TARGETS and the delivery retries */
  accountWebhooks?: { allowTargets: string[]; retry?: WebhookDeliveryRetry };
}

export async function startStack(opts: StackOptions = {}): Promise<Stack> {
  const taskQueue = `test-${randomUUID()}`;
  const nativeConnection = await NativeConnection.connect({ address: env.temporalAddress });
  const clientConnection = await Connection.connect({ address: env.temporalAddress });
  const temporal = new Client({ connection: clientConnection, ...observedClientOptions() });
  let running: Promise<void> | null = null;
  let relay: Relay | null = null;
  let eventRelay: { stop(): Promise<void> } | null = null;
  const stack: Stack = {
    taskQueue,
    worker: null,
    temporal,
    gateway: await startGatewayApi({
      db: env.db,
      databaseUrl: env.databaseUrl,
      temporalAddress: env.temporalAddress,
      namespace: 'default',
      logger: env.logger,
      port: 0,
      upstreamTimeoutMs: opts.upstreamTimeoutMs ?? 10_000,
      keyCacheTtlMs: 60_000,
      variant: opts.variant,
      adminToken: opts.adminToken,
      keyed: opts.keyed,
      corsOrigins: opts.corsOrigins,
      heartbeatMs: opts.heartbeatMs,
      routeBreaker: opts.routeBreaker,
      routing: opts.routing,
      webhookAllowTargets: opts.accountWebhooks?.allowTargets,
      responseCache: opts.responseCache,
    }),
    async startWorker() {
      stack.worker = await createCreditsWorker({ connection: nativeConnection, temporal, namespace: 'default', taskQueue, db: env.db, workflowBundle: opts.workflowBundle ?? env.bundles.credits, abandonment: opts.abandonment ?? { deadAfterMs: 30_000, unrecordedOlderThanMs: 0 }, accountWebhooks: opts.accountWebhooks });
      running = stack.worker.run();
      relay = await startSettlementRelay({
        db: env.db,
        databaseUrl: env.databaseUrl,
        temporal,
        taskQueue,
        logger: env.logger,
        holdTimeoutMs: opts.holdTimeoutMs ?? 60_000,
        uncertainGraceMs: opts.uncertainGraceMs ?? 200,
        staleClaimMs: 2000,
      });
      // Only suites that test account webhooks hand deliveries to their worker (the database is shared).
      if (opts.accountWebhooks) eventRelay = await startAccountEventRelay({ db: env.db, databaseUrl: env.databaseUrl, temporal, taskQueue, logger: env.logger, retry: opts.accountWebhooks?.retry, pollMs: 1000 });
    },
    async stopWorker() {
      await relay?.stop();
      relay = null;
      await eventRelay?.stop();
      eventRelay = null;
      stack.worker?.shutdown();
      await running;
      stack.worker = null;
    },
    async close() {
      await stack.stopWorker();
      await stack.gateway.close();
      await nativeConnection.close();
      await clientConnection.close();
    },
  };
  await stack.startWorker();
  return stack;
}

/**
 * Registers a suite's before/after hooks that start a stack and close it (also when tests fail),
 * and returns the suite's stack: a stand-in that forwards to the running one.
 */
export function useStack(opts: StackOptions = {}): Stack {
  let current: Stack | null = null;
  before(async function () {
    this.timeout(60_000);
    current = await startStack(opts);
  });
  after(async function () {
    await current?.close();
    current = null;
  });
  return new Proxy({} as Stack, {
    get(_, prop) {
      if (!current) throw new Error('the stack is used outside its suite (before its before hook ran)');
      return current[prop as keyof Stack];
    },
  });
}

export interface TestAccount {
  accountId: string;
  keyId: string;
  key: string;
}

export async function newAccount(opts: { credits?: string; tier?: 'free_trial' | 'starter' | 'pro' | 'business' | 'user'; planExpiresAt?: string | null } = {}): Promise<TestAccount> {
  const a = await createAccount(env.db, { name: `test-${randomUUID()}`, tier: opts.tier ?? 'pro', credits: opts.credits ?? '100', planExpiresAt: opts.planExpiresAt ?? null });
  const k = await createKey(env.db, { accountId: a.id, label: 'test' });
  return { accountId: a.id, keyId: k.id, key: k.key };
}

/** JSON over real HTTP. */
export async function call(base: string, path: string, opts: { key?: string; body?: unknown; method?: string; headers?: Record<string, string> } = {}) {
  const res = await fetch(base + path, {
    method: opts.method ?? (opts.body === undefined ? 'GET' : 'POST'),
    headers: {
      ...(opts.key ? { authorization: `Bearer ${opts.key}` } : {}),
      ...(opts.body === undefined ? {} : { 'content-type': 'application/json' }),
      ...opts.headers,
    },
    body: opts.body === undefined ? undefined : typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body),
  });
  const text = await res.text();
  let json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, json, text };
}

/** Waits until the reservation leaves `held` and returns its row. */
export async function settled(reservationId: string, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const row = await env.db('reservations').where({ id: reservationId }).first();
    if (row && row.status !== 'held') return row;
    if (Date.now() > deadline) throw new Error(`reservation ${reservationId} still ${row?.status ?? 'missing'} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The money invariants of DESIGN.md section 3 for one account, from the ledger and the row (in `db`, the suite's database by default). */
export async function checkInvariants(accountId: string, db: Db = env.db) {
  const a = await db('accounts').where({ id: accountId }).first();
  const l = await db.raw(
    `SELECT COALESCE(sum(amount) FILTER (WHERE kind='grant'),0) AS grants,
            COALESCE(sum(amount) FILTER (WHERE kind='hold'),0) - COALESCE(sum(amount) FILTER (WHERE kind='release'),0)
              + COALESCE(sum(amount) FILTER (WHERE kind='charge'),0) AS usage
     FROM ledger WHERE account_id = ?`,
    [accountId],
  );
  const r = await db.raw(
    `SELECT COALESCE(sum(held_credits) FILTER (WHERE status='held'),0) AS reserved, count(*) FILTER (WHERE status='held')::int AS pending,
            COALESCE(sum(charge) FILTER (WHERE status<>'held'),0) AS charged
     FROM reservations WHERE account_id = ?`,
    [accountId],
  );
  return { account: a, ledger: l.rows[0], reservations: r.rows[0] };
}
