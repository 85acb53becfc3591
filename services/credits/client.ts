import { ScheduleAlreadyRunning, ScheduleOverlapPolicy, WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import { HOLD_SWEEPER_SCHEDULE_ID, reportSignal, reservationWorkflowId, type RequestReport, type ReservationInput, type SettlementInput } from '../../domain/credits/reservation';
import { SA } from '../../domain/shared/search-attributes';
import type { WorkflowOf } from '../../domain/shared/workflow-of';

// The one place that starts credits workflows: `settlement-<first request id>` for a batch of
// recorded outcomes, `reservation-<request_id>` (signal-with-start with its outcome) for an
// uncertain or late-cost one, and the hold sweeper's schedule.

export interface ReservationStart {
  taskQueue: string;
  input: ReservationInput;
  accountId: string;
  keyId: string;
  model: string;
  endpoint: string;
  held: string;
}

/**
 * Starts the reservation workflow with the outcome in one call (signal-with-start): one
 * Temporal round trip per request, off the client's path.
 */
export async function reportOutcome(temporal: Client, s: ReservationStart, report: RequestReport): Promise<void> {
  await temporal.workflow.signalWithStart<WorkflowOf<ReservationInput>, [RequestReport]>('reservationWorkflow', {
    taskQueue: s.taskQueue,
    workflowId: reservationWorkflowId(s.input.reservationId),
    args: [s.input],
    typedSearchAttributes: [
      { key: SA.AccountId, value: s.accountId },
      { key: SA.KeyId, value: s.keyId },
      { key: SA.Model, value: s.model },
      { key: SA.Kind, value: s.endpoint },
    ],
    memo: { endpoint: s.endpoint, model: s.model, held: s.held },
    signal: reportSignal,
    signalArgs: [report],
  });
}

export interface BatchStart {
  taskQueue: string;
  workflowId: string;
  reservationIds: string[];
  accountIds: string[];
  held: string;
  /**
   * Eager start: the server hands the first workflow task back with the start, to this process's
   * worker (the client must be on the worker's NativeConnection), sparing a task-queue round trip.
   */
  eager?: boolean;
}

/** Starts a batch's settlement workflow; one already running under that id is left to finish (idempotent). */
export async function startSettlement(temporal: Client, b: BatchStart): Promise<void> {
  try {
    await temporal.workflow.start<WorkflowOf<SettlementInput>>('settlementWorkflow', {
      taskQueue: b.taskQueue,
      workflowId: b.workflowId,
      args: [{ reservationIds: b.reservationIds } satisfies SettlementInput],
      typedSearchAttributes: [
        { key: SA.RequestIds, value: b.reservationIds },
        { key: SA.AccountIds, value: [...new Set(b.accountIds)] },
      ],
      memo: { requests: b.reservationIds.length, held: b.held },
      requestEagerStart: b.eager,
    });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
}

/**
 * The hold sweeper runs every minute and releases the holds of dead API processes (its rule is
 * the credits worker's configuration). Created once; later starts leave it as it is.
 */
export async function ensureHoldSweeperSchedule(temporal: Client, taskQueue: string): Promise<void> {
  try {
    await temporal.schedule.create({
      scheduleId: HOLD_SWEEPER_SCHEDULE_ID,
      spec: { intervals: [{ every: '1 minute' }] },
      policies: { overlap: ScheduleOverlapPolicy.SKIP },
      action: { type: 'startWorkflow', workflowType: 'sweepHoldsWorkflow', taskQueue, args: [], workflowId: 'hold-sweep' },
      memo: { purpose: 'releases the holds of API processes that died before reporting an outcome' },
    });
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
  }
}
