import { createHash } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { cancelTestRun, startTestRun, testRunWorkflowStatus } from './client';
import { finalizeRun } from './results';
import { findConfiguration, isUuid } from './projects';
import { NotFound } from '../shared/errors';
import { GatewayError } from '../../domain/shared/errors';
import {
  CONFIGURATION_DEFAULTS,
  isFinal,
  testRunWorkflowId,
  type CaseDefinition,
  type Configuration,
  type RunCreateInput,
  type RunOutcome,
  type TestRunInput,
} from '../../domain/testruns/runs';
import type { Db } from '../../platform/db';

// Runs of the test-run API: creation (with Idempotency-Key), execution as a workflow, cancel,
// and the view a CI job polls until `final`.

export interface Project {
  id: string;
  name: string;
  max_concurrency: number;
  task_queue: string;
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** JSON with sorted keys: equal bodies hash equally whatever their key order. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    return `{${Object.keys(v)
      .sort()
      .filter((k) => (v as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}

const isUniqueViolation = (err: unknown) => (err as { code?: string }).code === '23505';

/** The run for this Idempotency-Key, if the key was used: the same run for the same body, else 409. */
async function replay(db: Db, projectId: string, key: string, hash: string): Promise<string | null> {
  const prior = await db('test_runs').where({ project_id: projectId, idempotency_key: key }).first('id', 'request_hash');
  if (!prior) return null;
  if (prior.request_hash !== hash) throw new GatewayError('idempotency_key_reused', { key });
  return prior.id;
}

/** Creates a run in `created` from the selected cases; `replayed` when the Idempotency-Key named an earlier one. */
export async function createRun(db: Db, project: Project, body: RunCreateInput, rawBody: unknown, idempotencyKey: string | null): Promise<{ runId: string; replayed: boolean }> {
  const hash = createHash('sha256').update(canonical(rawBody)).digest('hex');
  if (idempotencyKey) {
    const prior = await replay(db, project.id, idempotencyKey, hash);
    if (prior) return { runId: prior, replayed: true };
  }

  let stored: Partial<Configuration> = {};
  let configurationId: string | null = null;
  if (body.configuration_id) {
    try {
      const c = await findConfiguration(db, project.id, body.configuration_id);
      stored = c.settings as Partial<Configuration>;
      configurationId = c.id;
    } catch (err) {
      if (err instanceof NotFound) throw new GatewayError('invalid_parameter', { param: 'configuration_id', detail: err.message });
      throw err;
    }
  }
  const configuration: Configuration = { ...CONFIGURATION_DEFAULTS, concurrency: project.max_concurrency, ...stored, ...body.configuration };

  const cases = await selectCases(db, project.id, body);
  try {
    const runId = await db.transaction(async (trx) => {
      const [run] = await trx('test_runs')
        .insert({ project_id: project.id, label: body.label ?? '', configuration_id: configurationId, configuration, idempotency_key: idempotencyKey, request_hash: hash })
        .returning('id');
      await trx('test_run_cases').insert(
        cases.map((c, i) => ({ run_id: run.id, case_id: c.id, position: i, name: c.name, definition: { request: c.request, assertions: c.assertions, tags: c.tags } satisfies CaseDefinition })),
      );
      return run.id as string;
    });
    return { runId, replayed: false };
  } catch (err) {
    // A concurrent request with the same Idempotency-Key won the insert.
    if (idempotencyKey && isUniqueViolation(err)) {
      const prior = await replay(db, project.id, idempotencyKey, hash);
      if (prior) return { runId: prior, replayed: true };
    }
    throw err;
  }
}

interface SelectedCase {
  id: string;
  name: string;
  request: CaseDefinition['request'];
  assertions: CaseDefinition['assertions'];
  tags: string[];
}

/** Cases named (by id or name, in that order), then those carrying any of the tags; active ones only. */
async function selectCases(db: Db, projectId: string, body: RunCreateInput): Promise<SelectedCase[]> {
  const active = () => db('test_cases').where({ project_id: projectId }).whereNull('archived_at');
  const out: SelectedCase[] = [];
  const seen = new Set<string>();
  const add = (c: SelectedCase) => {
    if (!seen.has(c.id)) {
      seen.add(c.id);
      out.push(c);
    }
  };
  if (body.cases) {
    const ids = body.cases.filter(isUuid);
    const rows: SelectedCase[] = await active().where((q) => {
      q.whereIn('name', body.cases!);
      if (ids.length > 0) q.orWhereIn('id', ids);
    });
    const missing = body.cases.filter((ref) => !rows.some((r) => r.id === ref || r.name === ref));
    if (missing.length > 0) throw new GatewayError('invalid_parameter', { param: 'cases', detail: `no active case ${missing.map((m) => JSON.stringify(m)).join(', ')} in this project` });
    for (const ref of body.cases) add(rows.find((r) => r.id === ref || r.name === ref)!);
  }
  if (body.tags) {
    const rows: SelectedCase[] = await active().whereRaw('tags && ?::text[]', [body.tags]).orderBy('name');
    if (rows.length === 0 && out.length === 0) throw new GatewayError('no_cases_selected', { detail: `the tags ${body.tags.join(', ')}` });
    rows.forEach(add);
  }
  if (out.length === 0) throw new GatewayError('no_cases_selected', { detail: 'the selection' });
  return out;
}

/** A run of this project, or 404 exactly like an unknown id. */
async function runRow(db: Db, projectId: string, runId: string) {
  const row = isUuid(runId) ? await db('test_runs').where({ id: runId, project_id: projectId }).first() : undefined;
  if (!row) throw new GatewayError('not_found', { detail: `No run '${runId}' in this project.`, param: 'id' });
  return row;
}

/** The run as the API shows it: status, per-state timestamps, configuration, counts, case results, final. */
export async function runView(db: Db, projectId: string, runId: string) {
  const run = await runRow(db, projectId, runId);
  const cases = await db('test_run_cases as c')
    .leftJoin('test_case_results as r', function () {
      this.on('r.run_id', 'c.run_id').andOn('r.case_id', 'c.case_id');
    })
    .where('c.run_id', run.id)
    .orderBy('c.position')
    .select(
      'c.case_id',
      'c.name',
      'c.attempts as tries',
      'r.status',
      'r.reasons',
      'r.http_status',
      'r.latency_ms',
      'r.cost',
      'r.gateway_request_id',
      'r.output',
      'r.attempts',
      'r.started_at',
      'r.finished_at',
    );
  const counts = { total: cases.length, passed: 0, failed: 0, errored: 0, not_run: 0, pending: 0 };
  for (const c of cases) counts[(c.status ?? 'pending') as keyof typeof counts]++;
  return {
    id: run.id,
    object: 'test_run',
    project_id: run.project_id,
    label: run.label,
    status: run.status,
    final: isFinal(run.status),
    reason: run.reason,
    workflow_id: testRunWorkflowId(run.id),
    configuration_id: run.configuration_id,
    configuration: run.configuration,
    timestamps: {
      created_at: iso(run.created_at),
      queued_at: iso(run.queued_at),
      gated_at: iso(run.gated_at),
      running_at: iso(run.running_at),
      finished_at: iso(run.finished_at),
      cancel_requested_at: iso(run.cancel_requested_at),
      deadline_at: iso(run.deadline_at),
    },
    counts,
    cases: cases.map((c) => ({
      case_id: c.case_id,
      name: c.name,
      status: c.status ?? 'pending',
      reasons: c.reasons ?? [],
      http_status: c.http_status,
      latency_ms: c.latency_ms,
      cost: c.cost,
      gateway_request_id: c.gateway_request_id,
      output: c.output,
      attempts: c.status ? c.attempts : c.tries,
      started_at: iso(c.started_at),
      finished_at: iso(c.finished_at),
    })),
  };
}

export type RunView = Awaited<ReturnType<typeof runView>>;

/**
 * Execution: the run goes to `queued` and `test-run-<id>` is started on the project's task
 * queue. Safe to repeat: a queued run whose start was lost is started again, a started one is
 * left as it is (the workflow id is the run id).
 */
export async function executeRun(db: Db, temporal: Client, project: Project, runId: string) {
  let run = await runRow(db, project.id, runId);
  if (isFinal(run.status)) throw new GatewayError('run_already_final', { run_id: run.id, status: run.status });
  if (run.status === 'created') {
    const [queued] = await db('test_runs')
      .where({ id: run.id, status: 'created' })
      .update({ status: 'queued', queued_at: db.fn.now(), deadline_at: db.raw("now() + (? * interval '1 second')", [run.configuration.deadline_seconds]) })
      .returning('*');
    run = queued ?? (await runRow(db, project.id, runId));
    if (isFinal(run.status)) throw new GatewayError('run_already_final', { run_id: run.id, status: run.status });
  }
  if (run.status === 'queued') {
    const cfg = run.configuration as Configuration;
    const caseIds = (await db('test_run_cases').where({ run_id: run.id }).orderBy('position').select('case_id')).map((r) => r.case_id as string);
    const input: TestRunInput = {
      runId: run.id,
      projectId: project.id,
      caseIds,
      concurrency: cfg.concurrency,
      caseTimeoutMs: Math.round(cfg.case_timeout_seconds * 1000),
      deadlineAt: (run.deadline_at as Date).getTime(),
      maxAttempts: cfg.max_attempts,
      heartbeatTimeoutMs: Math.round(cfg.heartbeat_timeout_seconds * 1000),
    };
    // The answer shows the run as execute left it (queued); the workflow moves it on from there.
    const view = await runView(db, project.id, run.id);
    await startTestRun(temporal, { input, taskQueue: project.task_queue, configuration: cfg, memo: { project: project.name, label: run.label, cases: caseIds.length, configuration: cfg } });
    return view;
  }
  return runView(db, project.id, run.id);
}

/**
 * Cancel: a run never executed ends `canceled` at once; an executing one has its workflow
 * cancelled (its cases stop, the rest are not_run) and ends `canceled` moments later.
 */
export async function cancelRun(db: Db, temporal: Client, project: Project, runId: string) {
  const run = await runRow(db, project.id, runId);
  if (isFinal(run.status)) {
    if (run.status === 'canceled') return runView(db, project.id, run.id);
    throw new GatewayError('run_already_final', { run_id: run.id, status: run.status });
  }
  await db('test_runs').where({ id: run.id }).update({ cancel_requested_at: db.raw('COALESCE(cancel_requested_at, now())') });
  const before = await finalizeRun(db, run.id, 'canceled', 'canceled before execution', { onlyFrom: ['created'] });
  if (before.status !== 'canceled') {
    if (!(await cancelTestRun(temporal, run.id))) await finalizeRun(db, run.id, 'canceled', 'canceled (its workflow was not running)');
  }
  return runView(db, project.id, run.id);
}

/**
 * A run still active in the database whose workflow has ended without finishing it (terminated,
 * timed out without a worker) is finished here, so that a poller never waits forever.
 */
export async function reconcileRun(db: Db, temporal: Client, view: RunView): Promise<boolean> {
  if (view.final || view.status === 'created') return false;
  const status = await testRunWorkflowStatus(temporal, view.workflow_id);
  if (status === null) return false; // execute starts it again when repeated
  const ended: Record<string, [RunOutcome, string]> = {
    TIMED_OUT: ['timed_out', 'the run workflow timed out (no worker took it in time?)'],
    TERMINATED: ['canceled', 'the run workflow was terminated'],
    FAILED: ['error', 'the run workflow failed'],
    CANCELED: ['canceled', 'the run workflow was canceled'],
  };
  const e = ended[status];
  if (!e) return false;
  await finalizeRun(db, view.id, e[0], e[1]);
  return true;
}

/** A project's runs, newest first, optionally of one status. */
export async function listRuns(db: Db, projectId: string, q: { limit: number; status?: string }) {
  const rows: Array<{ status: string }> = await db('test_runs')
    .where({ project_id: projectId })
    .modify((b) => (q.status ? b.where({ status: q.status }) : b))
    .orderBy('created_at', 'desc')
    .limit(q.limit)
    .select('id', 'label', 'status', 'created_at', 'finished_at');
  return rows.map((x) => ({ ...x, final: isFinal(x.status) }));
}
