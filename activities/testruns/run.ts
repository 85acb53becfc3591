import { ApplicationFailure, Context } from '@temporalio/activity';
import { ApplicationFailureCategory } from '@temporalio/common';
import { evaluateAssertions, parseHostRule, type CaseOutput } from '../../domain/testruns/assertions';
import {
  DIALECT_PATHS,
  isFinal,
  runStatusFromCounts,
  type CaseCounts,
  type CaseDefinition,
  type CaseStatus,
  type Configuration,
  type RunOutcome,
  type TestRunSummary,
} from '../../domain/testruns/runs';
import type { Db } from '../../platform/db';
import { open } from '../../platform/secret-box';
import { callCase, CaseTimeout, NetworkGateRefusal } from './case-call';
import { CaseGate } from './case-gate';

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

export interface CaseResult {
  status: CaseStatus;
  reasons: string[];
}

interface ResultFields {
  status: CaseStatus;
  reasons: string[];
  http_status?: number | null;
  latency_ms?: number | null;
  cost?: string | null;
  gateway_request_id?: string | null;
  output?: string | null;
  started_at?: Date | null;
  finished_at?: Date | null;
}

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

/** Stores a case's result unless one is stored already; returns the stored one. */
export async function recordResult(db: Db, runId: string, caseId: string, r: ResultFields): Promise<CaseResult> {
  const res = await db.raw(
    `INSERT INTO test_case_results (run_id, case_id, status, reasons, http_status, latency_ms, cost, gateway_request_id, output, attempts, started_at, finished_at)
     SELECT c.run_id, c.case_id, :status, :reasons::jsonb, :http_status, :latency_ms, :cost, :gateway_request_id, :output, c.attempts, :started_at, :finished_at
     FROM test_run_cases c WHERE c.run_id = :run_id AND c.case_id = :case_id
     ON CONFLICT (run_id, case_id) DO NOTHING
     RETURNING status, reasons`,
    {
      run_id: runId,
      case_id: caseId,
      status: r.status,
      reasons: JSON.stringify(r.reasons),
      http_status: r.http_status ?? null,
      latency_ms: r.latency_ms ?? null,
      cost: r.cost ?? null,
      gateway_request_id: r.gateway_request_id ?? null,
      output: r.output ?? null,
      started_at: r.started_at ?? null,
      finished_at: r.finished_at ?? new Date(),
    },
  );
  if (res.rows[0]) return res.rows[0];
  const existing = await db('test_case_results').where({ run_id: runId, case_id: caseId }).first('status', 'reasons');
  if (!existing) throw new Error(`case ${caseId} is not part of run ${runId}`);
  return existing;
}

export async function caseCounts(db: Db, runId: string): Promise<CaseCounts> {
  const r = await db.raw(
    `SELECT count(*)::int AS total,
       count(*) FILTER (WHERE r.status = 'passed')::int AS passed,
       count(*) FILTER (WHERE r.status = 'failed')::int AS failed,
       count(*) FILTER (WHERE r.status = 'errored')::int AS errored,
       count(*) FILTER (WHERE r.status = 'not_run')::int AS not_run,
       count(*) FILTER (WHERE r.status IS NULL)::int AS pending
     FROM test_run_cases c LEFT JOIN test_case_results r ON r.run_id = c.run_id AND r.case_id = c.case_id
     WHERE c.run_id = ?`,
    [runId],
  );
  return r.rows[0];
}

/**
 * Ends a run once: every case without a result becomes not_run, and the status is the outcome
 * (timed_out, canceled, error) or, for a completed workflow, what the results say. A run that is
 * already final is left as it is. Also used by the API for runs whose workflow ended without it.
 */
export async function finalizeRun(
  db: Db,
  runId: string,
  outcome: RunOutcome,
  reason: string | null = null,
  opts: { onlyFrom?: string[] } = {},
): Promise<TestRunSummary> {
  return db.transaction(async (trx) => {
    const run = await trx('test_runs').where({ id: runId }).forUpdate().first('status', 'configuration');
    if (!run) throw new Error(`run ${runId} not found`);
    if (isFinal(run.status) || (opts.onlyFrom && !opts.onlyFrom.includes(run.status))) return { runId, status: run.status, counts: await caseCounts(trx, runId) };
    const cfg = run.configuration as Configuration;
    const notRun = {
      completed: 'no result was recorded for this case',
      timed_out: `the run deadline (${cfg.deadline_seconds} s) passed before this case finished`,
      canceled: 'the run was canceled before this case finished',
      error: `the run ended with an error before this case finished${reason ? `: ${reason}` : ''}`,
    }[outcome];
    await trx.raw(
      `INSERT INTO test_case_results (run_id, case_id, status, reasons, attempts, finished_at)
       SELECT c.run_id, c.case_id, 'not_run', ?::jsonb, c.attempts, now() FROM test_run_cases c WHERE c.run_id = ?
       ON CONFLICT (run_id, case_id) DO NOTHING`,
      [JSON.stringify([notRun]), runId],
    );
    const counts = await caseCounts(trx, runId);
    const status = outcome === 'completed' ? runStatusFromCounts(counts) : outcome;
    const why =
      reason ??
      (status === 'error' ? `${counts.errored + counts.not_run} of ${counts.total} cases have no result (infrastructure errors after every attempt)` : null) ??
      (status === 'timed_out' ? notRun : status === 'canceled' ? 'canceled on request' : null);
    await trx('test_runs').where({ id: runId }).update({ status, reason: why, finished_at: trx.fn.now() });
    // Normally the lanes released their slots already; a run ended from outside (terminated) frees them here.
    await trx('test_case_leases').where({ run_id: runId }).delete();
    return { runId, status, counts };
  });
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
    await db('test_runs')
      .where({ id: runId })
      .whereIn('status', ['queued', 'gated', 'running'])
      .update({ status, [`${status}_at`]: db.raw('COALESCE(??, now())', [`${status}_at`]) });
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
    const stored = await db('test_case_results').where({ run_id: runId, case_id: caseId }).first('status', 'reasons');
    if (stored) return outcomeOf(stored);
    const row = await db('test_run_cases as c')
      .join('test_runs as r', 'r.id', 'c.run_id')
      .join('test_projects as p', 'p.id', 'r.project_id')
      .where({ 'c.run_id': runId, 'c.case_id': caseId })
      .first('c.definition', 'r.status', 'r.configuration', 'p.gateway_key_sealed');
    if (!row) throw ApplicationFailure.nonRetryable(`case ${caseId} is not part of run ${runId}`, 'UnknownCase');
    if (isFinal(row.status)) return { status: 'not_run', reasons: ['the run ended before this case started'] };
    await db('test_run_cases').where({ run_id: runId, case_id: caseId }).increment('attempts', 1);
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
    try {
      let answer;
      try {
        answer = await callCase({
          dialect: def.request.dialect,
          url,
          headers,
          body: applyModelOverrides(def.request.body, cfg.model_overrides),
          timeoutMs,
          allowed: [gatewayRule, ...cfg.allowed_hosts.map(parseHostRule)],
          signal: ctx.cancellationSignal,
        });
      } catch (err) {
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
      const r = await db('reservations').where({ id: requestId }).first('status', 'charge');
      if (r && r.status !== 'held') return r.charge;
      if (Date.now() >= until) return null;
      Context.current().heartbeat();
      await Context.current().sleep(100);
    }
  }

  return { setRunStatus, claimCaseSlot, waitForCaseSlot, releaseCaseSlot, executeCase, recordCaseError, finalizeTestRun };
}

export type TestRunActivities = ReturnType<typeof createTestRunActivities>;
