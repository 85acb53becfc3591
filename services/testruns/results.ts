import { isFinal, runStatusFromCounts, type CaseCounts, type CaseStatus, type Configuration, type RunOutcome, type TestRunSummary } from '../../domain/testruns/runs';
import type { Db } from '../../platform/db';

// Case results and the end of a run: the only writers of test_case_results and of a run's final
// status. Every write is keyed by (run, case) and guarded, so the first result stored wins.

export interface CaseResult {
  status: CaseStatus;
  reasons: string[];
}

export interface ResultFields {
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

/** A case the run deadline cut off: the same words whoever records it (the case or the run's end). */
export const deadlineReason = (cfg: Pick<Configuration, 'deadline_seconds'>) => `the run deadline (${cfg.deadline_seconds} s) passed before this case finished`;

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
    const run = await trx('test_runs').where({ id: runId }).forUpdate().first('status', 'configuration', 'deadline_at');
    if (!run) throw new Error(`run ${runId} not found`);
    if (isFinal(run.status) || (opts.onlyFrom && !opts.onlyFrom.includes(run.status))) return { runId, status: run.status, counts: await caseCounts(trx, runId) };
    const cfg = run.configuration as Configuration;
    const notRun = {
      completed: 'no result was recorded for this case',
      timed_out: deadlineReason(cfg),
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
    // Cases the deadline cut record themselves not_run, so the workflow may complete before its
    // deadline timer fires: such a run timed out all the same.
    const cut = outcome === 'completed' && counts.not_run > 0 && run.deadline_at !== null && new Date(run.deadline_at).getTime() <= Date.now();
    const status = cut ? 'timed_out' : outcome === 'completed' ? runStatusFromCounts(counts) : outcome;
    const why =
      reason ??
      (status === 'error' ? `${counts.errored + counts.not_run} of ${counts.total} cases have no result (infrastructure errors after every attempt)` : null) ??
      (status === 'timed_out' ? `the run deadline (${cfg.deadline_seconds} s) passed: ${counts.total - counts.not_run} of ${counts.total} cases finished, ${counts.not_run} not run` : status === 'canceled' ? 'canceled on request' : null);
    await trx('test_runs').where({ id: runId }).update({ status, reason: why, finished_at: trx.fn.now() });
    // Normally the lanes released their slots already; a run ended from outside (terminated) frees them here.
    await trx('test_case_leases').where({ run_id: runId }).delete();
    return { runId, status, counts };
  });
}

/** The run's live status while it executes (the API sets queued, finalizeRun the terminal one). */
export async function markRunLive(db: Db, runId: string, status: 'gated' | 'running'): Promise<void> {
  await db('test_runs')
    .where({ id: runId })
    .whereIn('status', ['queued', 'gated', 'running'])
    .update({ status, [`${status}_at`]: db.raw('COALESCE(??, now())', [`${status}_at`]) });
}

export async function storedResult(db: Db, runId: string, caseId: string): Promise<CaseResult | undefined> {
  return db('test_case_results').where({ run_id: runId, case_id: caseId }).first('status', 'reasons');
}

/** What executing a case needs: its definition, the run's status and configuration, the project's sealed key. */
export async function caseToExecute(db: Db, runId: string, caseId: string) {
  return db('test_run_cases as c')
    .join('test_runs as r', 'r.id', 'c.run_id')
    .join('test_projects as p', 'p.id', 'r.project_id')
    .where({ 'c.run_id': runId, 'c.case_id': caseId })
    .first('c.definition', 'r.status', 'r.configuration', 'r.deadline_at', 'p.gateway_key_sealed');
}

export async function countAttempt(db: Db, runId: string, caseId: string): Promise<void> {
  await db('test_run_cases').where({ run_id: runId, case_id: caseId }).increment('attempts', 1);
}
