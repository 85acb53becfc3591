import { ApplicationFailure, Context } from '@temporalio/activity';
import { ApplicationFailureCategory } from '@temporalio/common';
import { evaluateAssertions, parseHostRule, type CaseOutput } from '../../domain/testruns/assertions';
import {
  DIALECT_PATHS,
  isFinal,
  type CaseDefinition,
  type Configuration,
  type RunOutcome,
  type TestRunSummary,
} from '../../domain/testruns/runs';
import type { Db } from '../../platform/db';
import { open } from '../../platform/secret-box';
import { caseToExecute, countAttempt, deadlineReason, finalizeRun, markRunLive, recordResult, storedResult, type CaseResult } from '../../services/testruns/results';
import { callCase, CaseTimeout, NetworkGateRefusal } from './case-call';
import { settledChargeOf } from '../../services/credits/settlement';
import { CaseGate } from '../../services/testruns/case-gate';

// Activities of the test-run workflow. Every write is keyed by (run, case) and guarded, so a
// retried or re-delivered activity never reports a case twice: the first result stored wins.

export interface TestRunActivityDeps {
  db: Db;
  /** this deployment's gateway; cases without base_url go here, with the project's key */
  gatewayUrl: string;
  /** opens the projects' sealed gateway keys (platform/secret-box.ts) */
  sealingKey: Buffer;
  /** concurrency gate: case executions at once over every project, run and worker */
  globalConcurrency: number;
  /** a crashed worker's gate slot returns after this long; default 30 s */
  leaseTtlMs?: number;
  /** how long to wait for a streamed answer's charge to settle when max_cost needs it; default 5 s */
  costSettleMs?: number;
}

/** Thrown (non-retryable) when a case's assertions failed; its result is already stored. */
export const ASSERTION_FAILED = 'AssertionFailed';

const MAX_OUTPUT = 4000;

function outputText(o: CaseOutput): string {
  const s = o.text || o.toolCalls.map((c) => `${c.name}(${c.arguments})`).join('\n');
  return s.length > MAX_OUTPUT ? s.slice(0, MAX_OUTPUT) + '…' : s;
}

function applyModelOverrides(body: Record<string, unknown>, overrides: Record<string, string>): Record<string, unknown> {
  const model = String(body.model);
  const to = overrides[model] ?? overrides['*'];
  return to ? { ...body, model: to } : body;
}

export function createTestRunActivities(deps: TestRunActivityDeps) {
  const { db } = deps;
  const leaseTtlMs = deps.leaseTtlMs ?? 30_000;
  const gate = new CaseGate(db, { globalLimit: deps.globalConcurrency, leaseTtlMs });
  const gateway = new URL(deps.gatewayUrl);
  // The gateway of this deployment is always reachable: every case without base_url needs it.
  const gatewayRule = parseHostRule(`${gateway.hostname}:${gateway.port || (gateway.protocol === 'https:' ? '443' : '80')}`);

  /** The run's live status while it executes (the API sets queued, finalizeRun the terminal one). */
  async function setRunStatus(runId: string, status: 'gated' | 'running'): Promise<void> {
    await markRunLive(db, runId, status);
  }

  /** One try at the concurrency gate; true when the case may go on (a slot, or a run already ended: executeCase then does nothing). */
  async function claimCaseSlot(runId: string, caseId: string): Promise<boolean> {
    return (await gate.claim(runId, caseId)) !== 'busy';
  }

  /** Waits at the gate until the slot is taken (or the run has ended); heartbeats, so cancellation reaches it. */
  async function waitForCaseSlot(runId: string, caseId: string): Promise<void> {
    const ctx = Context.current();
    let delay = 100;
    while ((await gate.claim(runId, caseId)) === 'busy') {
      ctx.heartbeat();
      await ctx.sleep(delay);
      delay = Math.min(Math.round(delay * 1.5), 500);
    }
  }

  async function releaseCaseSlot(runId: string, caseId: string): Promise<void> {
    await gate.release(runId, caseId);
  }

  /** A case the workflow could not get a result for (infrastructure errors after every attempt). */
  async function recordCaseError(runId: string, caseId: string, reason: string): Promise<CaseResult> {
    return recordResult(db, runId, caseId, { status: 'errored', reasons: [reason] });
  }

  async function finalizeTestRun(runId: string, outcome: RunOutcome, reason: string | null): Promise<TestRunSummary> {
    return finalizeRun(db, runId, outcome, reason);
  }

  const failed = (reasons: string[]) =>
    // BENIGN: an expected outcome of a test, not a worker problem (logged at debug, no failure metrics).
    ApplicationFailure.create({ message: `assertions failed: ${reasons.join('; ')}`, type: ASSERTION_FAILED, nonRetryable: true, details: [reasons], category: ApplicationFailureCategory.BENIGN });

  /** A stored result as this activity's outcome: a failed case throws, whichever attempt stored it. */
  function outcomeOf(r: CaseResult): CaseResult {
    if (r.status === 'failed') throw failed(r.reasons);
    return r;
  }

  /**
   * Executes one case against the gateway (or its base_url) and stores its result. Retried by
   * Temporal for infrastructure errors only; a failed assertion, a refused host or the case
   * timeout is a stored `failed` result and a non-retryable AssertionFailed.
   */
  async function executeCase(runId: string, caseId: string, timeoutMs: number): Promise<CaseResult> {
    const ctx = Context.current();
    const stored = await storedResult(db, runId, caseId);
    if (stored) return outcomeOf(stored);
    const row = await caseToExecute(db, runId, caseId);
    if (!row) throw ApplicationFailure.nonRetryable(`case ${caseId} is not part of run ${runId}`, 'UnknownCase');
    if (isFinal(row.status)) return { status: 'not_run', reasons: ['the run ended before this case started'] };
    await countAttempt(db, runId, caseId);
    if (!(await gate.renew(runId, caseId))) {
      throw ApplicationFailure.retryable('the gate slot of this case expired and was taken by another case', 'GateSlotLost');
    }

    const def = row.definition as CaseDefinition;
    const cfg = row.configuration as Configuration;
    const base = (def.request.base_url ?? deps.gatewayUrl).replace(/\/+$/, '');
    const url = new URL(base + DIALECT_PATHS[def.request.dialect]);
    const toGateway = url.origin === gateway.origin;
    const headers: Record<string, string> = { ...def.request.headers };
    // The project's key goes to this gateway only, never to another host.
    if (toGateway) {
      let key: string;
      try {
        key = open(deps.sealingKey, row.gateway_key_sealed);
      } catch (err) {
        // A configuration error: retrying cannot help (the case errors at once).
        throw ApplicationFailure.nonRetryable(`the project's gateway key cannot be used: ${(err as Error).message}`, 'ProjectKeyUnavailable');
      }
      headers.authorization = `Bearer ${key}`;
    }
    if (def.request.dialect === 'messages' && !Object.keys(headers).some((h) => h.toLowerCase() === 'anthropic-version')) headers['anthropic-version'] = '2023-06-01';

    // Heartbeats (throttled by the SDK) carry cancellation in; the gate lease is renewed at a third of its lifetime.
    let renewedAt = Date.now();
    const beat = setInterval(() => {
      ctx.heartbeat();
      if (Date.now() - renewedAt < leaseTtlMs / 3) return;
      renewedAt = Date.now();
      gate.renew(runId, caseId).catch((err) => ctx.log.warn('gate lease renewal failed', { err: String(err) }));
    }, 500);
    const startedAt = new Date();
    // The run deadline is kept here too, at the millisecond: the workflow's deadline timer cancels
    // cases, but a cancellation reaches an activity only with its next heartbeat. A case the
    // deadline cuts is not_run, in the words finalizeRun uses, never a late pass or a failure.
    const untilDeadline = row.deadline_at ? new Date(row.deadline_at).getTime() - Date.now() : Infinity;
    const cutByDeadline = untilDeadline < timeoutMs;
    const notRun = () => recordResult(db, runId, caseId, { status: 'not_run', reasons: [deadlineReason(cfg)], started_at: startedAt });
    try {
      if (untilDeadline <= 0) return outcomeOf(await notRun());
      let answer;
      try {
        answer = await callCase({
          dialect: def.request.dialect,
          url,
          headers,
          body: applyModelOverrides(def.request.body, cfg.model_overrides),
          timeoutMs: cutByDeadline ? untilDeadline : timeoutMs,
          allowed: [gatewayRule, ...cfg.allowed_hosts.map(parseHostRule)],
          signal: ctx.cancellationSignal,
        });
      } catch (err) {
        if (err instanceof CaseTimeout && cutByDeadline) return outcomeOf(await notRun());
        if (err instanceof NetworkGateRefusal || err instanceof CaseTimeout) {
          return outcomeOf(await recordResult(db, runId, caseId, { status: 'failed', reasons: [err.message], started_at: startedAt }));
        }
        throw err; // infrastructure (retried) or cancellation
      }
      const ok = answer.status >= 200 && answer.status < 300;
      let cost = answer.headerCost;
      if (cost === null && ok && toGateway && answer.requestId) cost = await settledCharge(answer.requestId, def.assertions.max_cost !== undefined);
      const reasons = evaluateAssertions(def.assertions, { ...answer.output, status: answer.status, latencyMs: answer.latencyMs, cost, errorMessage: answer.errorMessage });
      const result = await recordResult(db, runId, caseId, {
        status: reasons.length === 0 ? 'passed' : 'failed',
        reasons,
        http_status: answer.status,
        latency_ms: answer.latencyMs,
        cost,
        gateway_request_id: answer.requestId,
        output: ok ? outputText(answer.output) : (answer.errorMessage ?? ''),
        started_at: startedAt,
      });
      return outcomeOf(result);
    } finally {
      clearInterval(beat);
    }
  }

  /** The settled charge of a gateway request; waits for settlement only when an assertion needs it. */
  async function settledCharge(requestId: string, wait: boolean): Promise<string | null> {
    const until = Date.now() + (wait ? (deps.costSettleMs ?? 5000) : 0);
    for (;;) {
      const charge = await settledChargeOf(db, requestId);
      if (charge !== null) return charge;
      if (Date.now() >= until) return null;
      Context.current().heartbeat();
      await Context.current().sleep(100);
    }
  }

  return { setRunStatus, claimCaseSlot, waitForCaseSlot, releaseCaseSlot, executeCase, recordCaseError, finalizeTestRun };
}

export type TestRunActivities = ReturnType<typeof createTestRunActivities>;
