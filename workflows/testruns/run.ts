import {
  ActivityCancellationType,
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  condition,
  isCancellation,
  proxyActivities,
  sleep,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type { TestRunActivities } from '../../activities/testruns/run';
import { SA } from '../../domain/shared/search-attributes';
import type { RunOutcome, RunStatus, TestRunInput, TestRunSummary } from '../../domain/testruns/runs';

// Same value as activities/test-run.ts ASSERTION_FAILED (activities are imported as types only).
const ASSERTION_FAILED = 'AssertionFailed';

/**
 * One per run (`test-run-<run_id>`): executes the selected cases, each as its own activity, in
 * `concurrency` lanes, each case first passing the concurrency gate. The run deadline or a
 * cancellation stops the lanes; in every case the run ends with finalizeTestRun, which gives
 * every case without a result `not_run` and stores the terminal status.
 */
export async function testRunWorkflow(input: TestRunInput): Promise<TestRunSummary> {
  const { runId } = input;
  const book = proxyActivities<TestRunActivities>({
    startToCloseTimeout: '30 seconds',
    retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '10 seconds' },
  });
  const gate = proxyActivities<TestRunActivities>({
    startToCloseTimeout: Math.max(input.deadlineAt - Date.now(), 1000) + 60_000,
    heartbeatTimeout: input.heartbeatTimeoutMs,
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    retry: { initialInterval: '500 milliseconds', backoffCoefficient: 2, maximumInterval: '10 seconds' },
  });
  const exec = proxyActivities<TestRunActivities>({
    startToCloseTimeout: input.caseTimeoutMs + 30_000,
    heartbeatTimeout: input.heartbeatTimeoutMs,
    // The gate slot is released only once the case has really stopped.
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    retry: {
      maximumAttempts: input.maxAttempts,
      initialInterval: '500 milliseconds',
      backoffCoefficient: 2,
      maximumInterval: '10 seconds',
      nonRetryableErrorTypes: [ASSERTION_FAILED, 'UnknownCase'],
    },
  });

  // Live status: running while a case executes, gated while cases only wait at the gate.
  let executing = 0;
  let waiting = 0;
  let desired: RunStatus = 'queued';
  let written: RunStatus = 'queued';
  let lanesDone = false;
  const refresh = () => {
    if (executing > 0) desired = 'running';
    else if (waiting > 0) desired = 'gated';
  };
  async function statusWriter(): Promise<void> {
    for (;;) {
      await condition(() => desired !== written || lanesDone);
      if (desired === written) return;
      const s = desired as 'gated' | 'running';
      await book.setRunStatus(runId, s);
      upsertSearchAttributes([{ key: SA.Status, value: s }]);
      written = s;
    }
  }

  async function runCase(caseId: string): Promise<void> {
    try {
      if (!(await book.claimCaseSlot(runId, caseId))) {
        waiting++;
        refresh();
        try {
          await gate.waitForCaseSlot(runId, caseId);
        } finally {
          waiting--;
        }
      }
      executing++;
      refresh();
      try {
        await exec.executeCase(runId, caseId, input.caseTimeoutMs);
      } catch (err) {
        if (isCancellation(err)) throw err;
        const cause = err instanceof ActivityFailure ? err.cause : err;
        if (!(cause instanceof ApplicationFailure && cause.type === ASSERTION_FAILED)) {
          await book.recordCaseError(runId, caseId, `infrastructure error after every attempt: ${cause instanceof Error ? cause.message : String(cause)}`);
        }
      } finally {
        executing--;
        refresh();
      }
    } finally {
      await CancellationScope.nonCancellable(() => book.releaseCaseSlot(runId, caseId));
    }
  }

  const queue = [...input.caseIds];
  async function lane(): Promise<void> {
    for (let id = queue.shift(); id !== undefined; id = queue.shift()) await runCase(id);
  }

  const cases = new CancellationScope();
  // Settles only once every lane has really stopped (its slot released), even when one fails.
  const settleAll = async (ps: Array<Promise<unknown>>) => {
    const failed = (await Promise.allSettled(ps)).find((r) => r.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
  };
  const lanes = Math.min(input.concurrency, input.caseIds.length);
  const work = cases.run(() =>
    settleAll([
      statusWriter(),
      settleAll(Array.from({ length: lanes }, lane)).finally(() => {
        lanesDone = true;
      }),
    ]),
  );
  const timer = new CancellationScope();
  const deadline = timer.run(() => sleep(Math.max(input.deadlineAt - Date.now(), 1)));

  let outcome: RunOutcome = 'completed';
  let reason: string | null = null;
  try {
    const first = await Promise.race([work.then(() => 'done' as const), deadline.then(() => 'deadline' as const)]);
    if (first === 'deadline') outcome = 'timed_out';
  } catch (err) {
    if (isCancellation(err)) outcome = 'canceled';
    else {
      outcome = 'error';
      reason = err instanceof Error ? err.message : String(err);
    }
  }
  timer.cancel();
  if (outcome !== 'completed') {
    cases.cancel();
    await work.catch(() => undefined);
  }
  const summary = await CancellationScope.nonCancellable(() => book.finalizeTestRun(runId, outcome, reason));
  upsertSearchAttributes([{ key: SA.Status, value: summary.status }]);
  return summary;
}
