import { Client as PgClient } from 'pg';
import type { Client } from '@temporalio/client';
import { context, ROOT_CONTEXT, SpanStatusCode, trace } from '@opentelemetry/api';
import { add } from '../../domain/credits/pricing';
import { reservationWorkflowId, SETTLEMENT_BATCH_MAX } from '../../domain/credits/reservation';
import type { Db } from '../../platform/db';
import type { Logger } from '../../platform/logger';
import { linksTo, tracingEnabled } from '../../platform/tracing';
import { reportOutcome, startSettlement } from './client';
import { adoptLegacyOutcomes, claimOutcomes, OUTBOX_CHANNEL, staleClaims, touchClaims, type ClaimedOutcome } from './outbox';

// The settlement relay (runs in the credits worker): hands recorded outcomes to workflows in
// batches. Each outcome write's NOTIFY says how many outcomes it recorded; a batch is claimed as
// soon as a full one is waiting, else when the oldest waiting outcome is `flushMs` old, so at
// moderate rates the batches are full too (one workflow costs the same for 1 or 50 outcomes). A
// poll is the fallback for missed notifications. Crash-safe: a claim whose workflow did not start
// is started again under the same id, so Temporal being slow, down or restarting delays
// settlement and loses nothing.

export interface RelayOptions {
  db: Db;
  databaseUrl: string;
  temporal: Client;
  taskQueue: string;
  /** `temporal` is on the credits worker's NativeConnection: settlement workflows start eagerly on it */
  eagerStart?: boolean;
  logger: Logger;
  /** inputs of `reservation-<id>` workflows (uncertain and late-cost outcomes) */
  holdTimeoutMs: number;
  uncertainGraceMs: number;
  /** outcomes per settlement workflow at most (default SETTLEMENT_BATCH_MAX); the server's search attribute limit bounds it (settlementBatchUnder) */
  batchSize?: number;
  flushMs?: number;
  pollMs?: number;
  /** a claim older than this whose reservation is still held is started again */
  staleClaimMs?: number;
}

const START_DEADLINE_MS = 5000;

export interface Relay {
  stop(): Promise<void>;
}

export async function startSettlementRelay(o: RelayOptions): Promise<Relay> {
  const batchSize = o.batchSize ?? SETTLEMENT_BATCH_MAX;
  const flushMs = o.flushMs ?? 200;
  const staleClaimMs = o.staleClaimMs ?? 10_000;
  let stopped = false;
  let timer: NodeJS.Timeout | null = null;
  let draining: Promise<void> | null = null;
  let lastStalePass = 0;
  // Outcomes notified and not yet claimed, oldest first (seq orders them against a claim's start).
  let waiting: Array<{ seq: number; at: number; n: number }> = [];
  let waitingCount = 0;
  let seq = 0;
  let lastNotified = 0;
  // Claim whatever is recorded, full batch or not: at start and on a poll that knows of nothing waiting.
  let sweep = true;

  const due = () => sweep || waitingCount >= batchSize || (waiting.length > 0 && Date.now() - waiting[0].at >= flushMs);

  /** Runs a pass now if one is due, else sets the timer for when the oldest waiting outcome is. */
  const schedule = () => {
    if (stopped || draining) return; // the pass in progress schedules the next when it ends
    if (timer) clearTimeout(timer);
    timer = null;
    if (due()) return run();
    if (waiting.length) timer = setTimeout(schedule, waiting[0].at + flushMs - Date.now());
  };

  const run = () => {
    draining = drain()
      .catch((err) => o.logger.error({ err }, 'settlement relay pass failed; the next pass retries'))
      .finally(() => {
        draining = null;
        schedule();
      });
  };

  /** Forgets `n` claimed outcomes, oldest first; a short claim took every outcome notified before it started. */
  const claimedSome = (n: number, before: number) => {
    if (n < batchSize) {
      waiting = waiting.filter((w) => w.seq > before);
      waitingCount = waiting.reduce((sum, w) => sum + w.n, 0);
      return;
    }
    waitingCount = Math.max(0, waitingCount - n);
    while (n > 0 && waiting.length) {
      const take = Math.min(n, waiting[0].n);
      waiting[0].n -= take;
      n -= take;
      if (waiting[0].n === 0) waiting.shift();
    }
  };

  async function drain(): Promise<void> {
    const sweeping = sweep;
    sweep = false;
    while (!stopped && (sweeping || due())) {
      const before = seq;
      const claimed = await claimOutcomes(o.db, batchSize);
      claimedSome(claimed.length, before);
      if (claimed.length) await startWorkflows(claimed);
      if (claimed.length < batchSize) break;
    }
    if (Date.now() - lastStalePass >= staleClaimMs / 2) {
      lastStalePass = Date.now();
      const adopted = await adoptLegacyOutcomes(o.db);
      if (adopted) {
        o.logger.info({ outcomes: adopted }, 'outcomes recorded by a process of the previous release moved to the outbox');
        sweep = true;
      }
      const stale = await staleClaims(o.db, staleClaimMs);
      if (stale.length) {
        await touchClaims(o.db, stale.map((c) => c.id));
        // A running workflow is settling them (a reservation one may keep a hold for its grace period).
        const ids = [...new Set(stale.map((c) => c.settlement_workflow_id))];
        const states = await Promise.all(ids.map(isRunning));
        const running = new Set(ids.filter((_, i) => states[i]));
        const lost = stale.filter((c) => !running.has(c.settlement_workflow_id));
        if (lost.length) {
          o.logger.warn({ reservations: lost.length }, 'starting the settlement of claimed outcomes again');
          await startWorkflows(lost);
        }
      }
    }
  }

  async function isRunning(workflowId: string): Promise<boolean> {
    try {
      const d = await o.temporal.withDeadline(Date.now() + START_DEADLINE_MS, () => o.temporal.workflow.getHandle(workflowId).describe());
      return d.status.name === 'RUNNING';
    } catch {
      return false; // not found, or Temporal unreachable: starting again is safe (idempotent)
    }
  }

  /** One start per workflow of the claimed outcomes; a failed start is retried by the stale pass. */
  async function startWorkflows(claimed: ClaimedOutcome[]): Promise<void> {
    const byWorkflow = new Map<string, ClaimedOutcome[]>();
    for (const c of claimed) {
      const rows = byWorkflow.get(c.settlement_workflow_id);
      if (rows) rows.push(c);
      else byWorkflow.set(c.settlement_workflow_id, [c]);
    }
    await Promise.all(
      [...byWorkflow].map(async ([workflowId, rows]) => {
        try {
          // Bounded, so a Temporal that is down or restarting never stalls the relay: the stale pass retries.
          await traced(workflowId, rows, () => o.temporal.withDeadline(Date.now() + START_DEADLINE_MS, () => start(workflowId, rows)));
        } catch (err) {
          o.logger.warn({ err, workflowId }, 'could not start a settlement workflow; it is started again later');
        }
      }),
    );
  }

  /**
   * Tracing on: the start runs in a span linked to each request's span (its traceparent recorded
   * with the outcome), so a request's trace leads to the workflow that settles it; the traced
   * client carries this span on to the workflow and its activities.
   */
  async function traced(workflowId: string, rows: ClaimedOutcome[], fn: () => Promise<void>): Promise<void> {
    if (!tracingEnabled()) return fn();
    const span = trace.getTracer('services/credits/relay').startSpan('settlement.relay', { links: linksTo(rows.map((r) => r.report.trace)), attributes: { 'settlement.workflow_id': workflowId, 'settlement.requests': rows.length } }, ROOT_CONTEXT);
    try {
      await context.with(trace.setSpan(ROOT_CONTEXT, span), fn);
    } catch (err) {
      span.recordException(err as Error);
      span.setStatus({ code: SpanStatusCode.ERROR });
      throw err;
    } finally {
      span.end();
    }
  }

  /** `reservation-<id>` (signal-with-start with its outcome) or the batch's settlement workflow. */
  async function start(workflowId: string, rows: ClaimedOutcome[]): Promise<void> {
    const c = rows[0];
    if (workflowId === reservationWorkflowId(c.id)) {
      const input = { reservationId: c.id, holdTimeoutMs: o.holdTimeoutMs, uncertainGraceMs: o.uncertainGraceMs };
      const meta = { accountId: c.account_id, keyId: c.key_id, model: c.model, endpoint: c.endpoint, held: c.held_credits };
      await reportOutcome(o.temporal, { taskQueue: o.taskQueue, input, ...meta }, c.report);
      return;
    }
    await startSettlement(o.temporal, {
      taskQueue: o.taskQueue,
      workflowId,
      reservationIds: rows.map((r) => r.id),
      accountIds: rows.map((r) => r.account_id),
      held: rows.reduce((sum, r) => add(sum, r.held_credits), '0'),
      eager: o.eagerStart,
    });
  }

  // LISTEN on a connection of its own; the poll covers any gap while it reconnects.
  let listener: PgClient | null = null;
  const listen = async (): Promise<void> => {
    const client = new PgClient({ connectionString: o.databaseUrl });
    client.on('notification', (msg) => {
      // The payload is the number of outcomes the write recorded (an empty one: one).
      lastNotified = Date.now();
      waiting.push({ seq: ++seq, at: lastNotified, n: Math.max(1, Number(msg.payload) || 1) });
      waitingCount += waiting[waiting.length - 1].n;
      schedule();
    });
    client.on('error', (err) => {
      o.logger.warn({ err }, 'settlement relay listener lost; reconnecting');
      listener = null;
      void client.end().catch(() => {});
      if (!stopped) setTimeout(() => void listen().catch(() => {}), 1000);
    });
    await client.connect();
    await client.query(`LISTEN ${OUTBOX_CHANNEL}`);
    listener = client;
  };
  await listen();
  // The poll: the stale pass, and a sweep when no notification waits nor came for a poll interval
  // (the listener may have missed some); while they flow, the counts decide.
  const pollMs = o.pollMs ?? 1000;
  const poll = setInterval(() => {
    if (waiting.length === 0 && Date.now() - lastNotified >= pollMs) sweep = true;
    if (draining) return;
    if (timer) clearTimeout(timer);
    timer = null;
    run();
  }, pollMs);
  schedule(); // outcomes recorded while no relay ran

  return {
    async stop() {
      stopped = true;
      clearInterval(poll);
      if (timer) clearTimeout(timer);
      await draining;
      await listener?.end().catch(() => {});
    },
  };
}
