import { randomBytes, randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { NativeConnection, type Worker } from '@temporalio/worker';
import { addCase, createCiToken, createProject, setConfiguration } from '../../services/testruns/projects';
import { SA } from '../../domain/shared/search-attributes';
import type { CaseInput, ConfigurationInput } from '../../domain/testruns/runs';
import { deriveKey } from '../../platform/secret-box';
import { createTestRunWorker } from '../../workers/testruns';
import { env } from '../setup/env';
import { call, newAccount } from './stack';

// Test runs over the real stack: a test-run worker on a task queue of its own, projects bound
// to that queue, and the API of a real gateway.

/** TESTRUN_SECRET of this test process, and the sealing key every test worker and project share. */
export const SEALING_SECRET = randomBytes(24).toString('base64url');
export const SEALING_KEY = deriveKey(SEALING_SECRET);
export const SEALING_KEY_HEX = SEALING_KEY.toString('hex');

export interface TestRunWorker {
  taskQueue: string;
  worker: Worker;
  stop(): Promise<void>;
}

export async function startTestRunWorker(o: { gatewayUrl: string; taskQueue?: string; globalConcurrency?: number; leaseTtlMs?: number }): Promise<TestRunWorker> {
  const taskQueue = o.taskQueue ?? `testruns-${randomUUID()}`;
  const connection = await NativeConnection.connect({ address: env.temporalAddress });
  const worker = await createTestRunWorker({
    connection,
    namespace: 'default',
    taskQueue,
    db: env.db,
    gatewayUrl: o.gatewayUrl,
    sealingKey: SEALING_KEY,
    globalConcurrency: o.globalConcurrency ?? 50,
    leaseTtlMs: o.leaseTtlMs,
    workflowBundle: env.bundles.testruns,
  });
  const running = worker.run();
  return {
    taskQueue,
    worker,
    async stop() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running;
      await connection.close();
    },
  };
}

export interface TestProject {
  id: string;
  name: string;
  token: string;
  accountId: string;
}

/** A project with a fresh account's gateway key, bound to a task queue, with a CI token. */
export async function newProject(o: { taskQueue: string; maxConcurrency?: number; cases?: CaseInput[]; configurations?: Array<{ name: string; settings: ConfigurationInput }> }): Promise<TestProject> {
  const account = await newAccount({ credits: '1000' });
  const p = await createProject(env.db, { name: `p-${randomUUID()}`, gatewayKey: account.key, maxConcurrency: o.maxConcurrency ?? 4, taskQueue: o.taskQueue }, SEALING_KEY);
  for (const c of o.cases ?? []) await addCase(env.db, p.id, c);
  for (const c of o.configurations ?? []) await setConfiguration(env.db, p.id, c, { replace: true });
  const { token } = await createCiToken(env.db, p.id, 'test');
  return { id: p.id, name: p.name, token, accountId: account.accountId };
}

/** A chat case whose prompt drives the simulator. */
export function chatCase(name: string, prompt: string, extra: Partial<CaseInput> = {}): CaseInput {
  return {
    name,
    request: { dialect: 'chat', body: { model: 'sim-gpt', messages: [{ role: 'user', content: prompt }], max_tokens: 50 } },
    assertions: {},
    tags: [],
    ...extra,
  };
}

/** Creates a run and executes it; returns the run id. */
export async function startRun(base: string, p: TestProject, body: Record<string, unknown>): Promise<string> {
  const created = await call(base, `/api/projects/${p.id}/runs`, { key: p.token, body });
  if (created.status !== 201) throw new Error(`create run: ${created.status} ${created.text}`);
  const executed = await call(base, `/api/runs/${created.json.id}/execute`, { key: p.token, method: 'POST' });
  if (executed.status !== 202) throw new Error(`execute run: ${executed.status} ${executed.text}`);
  return created.json.id;
}

/** The Status search attribute of a run's workflow once it equals `expected` (it follows the database by a moment). */
export async function searchStatus(temporal: Client, workflowId: string, expected: string, timeoutMs = 5000): Promise<string | undefined> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = (await temporal.workflow.getHandle(workflowId).describe()).typedSearchAttributes.get(SA.Status);
    if (s === expected || Date.now() > deadline) return s;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Polls GET /api/runs/:id until `final` (or until `until` says so). */
export async function waitRun(base: string, token: string, runId: string, o: { timeoutMs?: number; until?: (run: any) => boolean } = {}) { // eslint-disable-line @typescript-eslint/no-explicit-any
  const deadline = Date.now() + (o.timeoutMs ?? 30_000);
  const until = o.until ?? ((r) => r.final);
  for (;;) {
    const r = await call(base, `/api/runs/${runId}`, { key: token });
    if (r.status !== 200) throw new Error(`read run: ${r.status} ${r.text}`);
    if (until(r.json)) return r.json;
    if (Date.now() > deadline) throw new Error(`run ${runId} still ${r.json.status} after ${o.timeoutMs ?? 30_000} ms: ${r.text}`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

/** The largest number of intervals that overlap at one instant. */
export function maxOverlap(intervals: Array<{ start: number; end: number }>): number {
  const points = intervals.flatMap((i) => [
    { t: i.start, d: 1 },
    { t: i.end, d: -1 },
  ]);
  // At equal times an end comes before a start: touching intervals do not overlap.
  points.sort((a, b) => a.t - b.t || a.d - b.d);
  let now = 0;
  let max = 0;
  for (const p of points) {
    now += p.d;
    max = Math.max(max, now);
  }
  return max;
}
