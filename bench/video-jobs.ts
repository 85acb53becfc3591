// Video jobs at scale: starts N jobs (default 1000, up to 10,000) through the gateway against the
// simulator, with the media worker in a process of its own, and reports the worker's CPU and
// memory, Temporal history events (and actions) per job, and the completion lag: how long after
// the provider finished a job the gateway shows its final state (and settles its charge).
//
//   npx tsx bench/video-jobs.ts [--n 1000] [--render-min-ms 20000] [--render-max-ms 60000]
//     [--concurrency 32] [--max-cached 2000] [--history-sample 100]
//
// Everything runs on embedded defaults in a temporary directory (PostgreSQL, Temporal dev
// server, simulator, gateway); the workflows use the production polling defaults.
import { recordRun } from './history';
import { execSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../platform/ports';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { createAccount } from '../services/accounts/accounts';
import { createKey } from '../services/keys/keys';
import { seedSimulatorCatalog } from '../simulator/seed';
import { startGatewayApi } from '../main/gateway';
import { MEDIA_TASK_QUEUE, videoWorkflowId } from '../domain/media/video';
import { createDb, migrate } from '../platform/db';
import { createLogger } from '../platform/logger';
import { startEmbeddedPostgres } from '../platform/postgres';
import { startTemporalDevServer } from '../platform/temporal-server';
import { startSimulator } from '../simulator/server';
import { spawnMediaWorker } from '../test/helpers/video-stack';
import { fixed, summarize } from './stats';

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? Number(process.argv[i + 1]) : dflt;
  if (!Number.isFinite(v) || v < 0) throw new Error(`--${name} must be a number`);
  return v;
}

const N = Math.min(arg('n', 1000), 10_000);
const RENDER_MIN = arg('render-min-ms', 20_000);
const RENDER_MAX = Math.max(RENDER_MIN, arg('render-max-ms', 60_000));
const CONCURRENCY = arg('concurrency', 32);
const MAX_CACHED = arg('max-cached', 2000);
const HISTORY_SAMPLE = arg('history-sample', 100);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));


// Event types that Temporal Cloud bills as actions (approximation: start, timers, activities,
// local activities (markers), signals, search-attribute upserts, continue-as-new).
const ACTION_EVENTS = new Set(['WORKFLOW_EXECUTION_STARTED', 'TIMER_STARTED', 'ACTIVITY_TASK_SCHEDULED', 'MARKER_RECORDED', 'WORKFLOW_EXECUTION_SIGNALED', 'UPSERT_WORKFLOW_SEARCH_ATTRIBUTES', 'WORKFLOW_EXECUTION_CONTINUED_AS_NEW']);

async function main() {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const logger = createLogger('error');
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-video-'));
  fs.chmodSync(tmp, 0o755);
  const stops: Array<() => Promise<unknown>> = [];
  try {
    const [pgPort, tPort] = await Promise.all([freePort(), freePort()]);
    const [pg, dev] = await Promise.all([
      startEmbeddedPostgres({ dir: path.join(tmp, 'pg'), port: pgPort, database: 'bench', persistent: false, logger }),
      startTemporalDevServer({ port: tPort, namespace: 'default', logger }),
    ]);
    stops.push(pg.stop, dev.stop);
    const db = createDb(pg.url, 20);
    stops.push(() => db.destroy());
    await migrate(db);
    const sim = await startSimulator({ port: 0 });
    stops.push(sim.close);
    await seedSimulatorCatalog(db, sim.url);
    const account = await createAccount(db, { name: 'bench-video', tier: 'pro', credits: String(N) });
    const key = (await createKey(db, { accountId: account.id, label: 'bench' })).key;
    const gateway = await startGatewayApi({
      db, databaseUrl: pg.url, temporalAddress: dev.address, namespace: 'default', logger, port: 0,
      upstreamTimeoutMs: 120_000, keyCacheTtlMs: 60_000,
    });
    stops.push(gateway.close);
    const worker = await spawnMediaWorker({ databaseUrl: pg.url, temporalAddress: dev.address, taskQueue: MEDIA_TASK_QUEUE, statsMs: 500, maxCachedWorkflows: MAX_CACHED });
    stops.push(() => worker.kill('SIGTERM'));
    await sleep(1000);
    const idle = worker.stats();
    console.log(`services up; worker idle: rss ${fixed(idle?.rss_mb ?? NaN)} MB, cpu ${fixed(idle?.cpu_ms ?? NaN, 0)} ms`);

    // Create N jobs with `concurrency` clients; render times spread over [min, max].
    const created: string[] = [];
    const t0 = Date.now();
    let next = 0;
    let failures = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        for (let i = next++; i < N; i = next++) {
          const render = Math.round(RENDER_MIN + ((RENDER_MAX - RENDER_MIN) * i) / Math.max(1, N - 1));
          const res = await fetch(`${gateway.url}/v1/videos`, {
            method: 'POST',
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
            body: JSON.stringify({ model: 'sim-video-1', prompt: `bench job ${i} [sim render_ms=${render}]` }),
          });
          const body = (await res.json()) as { id?: string };
          if (res.status === 202 && body.id) created.push(body.id);
          else failures++;
        }
      }),
    );
    const createdUntil = Date.now();
    const createSecs = (createdUntil - t0) / 1000;
    console.log(`${created.length} jobs created in ${fixed(createSecs)} s (${fixed(created.length / createSecs)} /s), ${failures} failed`);

    // Wait for every job to be final and settled, sampling the worker meanwhile.
    let peakRss = 0;
    let peakHeap = 0;
    const cpuStart = worker.stats()?.cpu_ms ?? 0;
    for (;;) {
      const s = worker.stats();
      if (s) {
        peakRss = Math.max(peakRss, s.rss_mb);
        peakHeap = Math.max(peakHeap, s.heap_mb);
      }
      const left = await db('video_jobs as j').join('reservations as r', 'r.id', 'j.reservation_id').where('r.status', 'held').count<{ n: string }[]>({ n: '*' });
      const n = Number(left[0].n);
      if (n === 0) break;
      if (Date.now() - t0 > RENDER_MAX + 15 * 60_000) throw new Error(`${n} jobs still unsettled`);
      await sleep(1000);
    }
    const allDone = Date.now();
    const cpuMs = (worker.stats()?.cpu_ms ?? 0) - cpuStart;

    // Completion lag: the provider's final moment vs. the gateway's final event and its settlement.
    const rows: Array<{ id: string; upstream_id: string; at: Date; settled_at: Date }> = await db('video_jobs as j')
      .join('video_job_events as e', 'e.job_id', 'j.id')
      .join('reservations as r', 'r.id', 'j.reservation_id')
      .whereIn('e.status', ['completed', 'failed', 'cancelled', 'expired'])
      .select('j.id', 'j.upstream_id', 'e.at', 'r.settled_at');
    const lag: number[] = [];
    const settleLag: number[] = [];
    for (const r of rows) {
      const s = (await (await fetch(`${sim.url}/_sim/videos/${r.upstream_id}`)).json()) as { finished_at_ms: number };
      lag.push(r.at.getTime() - s.finished_at_ms);
      settleLag.push(r.settled_at.getTime() - s.finished_at_ms);
    }

    // History events and actions per job, over all runs (continue-as-new included), for a sample.
    const connection = await Connection.connect({ address: dev.address });
    const client = new Client({ connection });
    const events: number[] = [];
    const actions: number[] = [];
    const timerLate: number[] = []; // timer fired − (started + duration): the server's share of the lag
    const wftWait: number[] = []; // workflow task scheduled → started: the worker's share
    const wftWaitAfterCreates: number[] = []; // the same, once every job was created
    let runs = 0;
    const ms = (t: { seconds?: unknown; nanos?: number | null } | null | undefined) => Number(t?.seconds ?? 0) * 1000 + (t?.nanos ?? 0) / 1e6;
    const step = Math.max(1, Math.floor(created.length / Math.max(1, HISTORY_SAMPLE)));
    for (const id of created.filter((_, i) => i % step === 0).slice(0, HISTORY_SAMPLE)) {
      let e = 0;
      let a = 0;
      for await (const w of client.workflow.list({ query: `WorkflowId = '${videoWorkflowId(id)}'` })) {
        const h = await client.workflow.getHandle(w.workflowId, w.runId).fetchHistory();
        runs++;
        const timers = new Map<string, number>();
        let scheduledAt = 0;
        for (const ev of h.events ?? []) {
          e++;
          const type = typeof ev.eventType === 'number' ? ev.eventType : 0;
          if (ACTION_EVENTS.has(EVENT_NAMES[type] ?? '')) a++;
          const at = ms(ev.eventTime);
          const started = ev.timerStartedEventAttributes;
          if (started) timers.set(started.timerId!, at + ms(started.startToFireTimeout));
          const fired = ev.timerFiredEventAttributes;
          if (fired && timers.has(fired.timerId!)) timerLate.push(at - timers.get(fired.timerId!)!);
          if (ev.workflowTaskScheduledEventAttributes) scheduledAt = at;
          if (ev.workflowTaskStartedEventAttributes && scheduledAt) {
            wftWait.push(at - scheduledAt);
            if (scheduledAt > createdUntil) wftWaitAfterCreates.push(at - scheduledAt);
          }
        }
      }
      events.push(e);
      actions.push(a);
    }
    await connection.close();

    const l = summarize(lag);
    const sl = summarize(settleLag);
    const ev = summarize(events);
    const ac = summarize(actions);
    const wallSecs = (allDone - t0) / 1000;
    const tl = summarize(timerLate);
    const ww = summarize(wftWait);
    const wa = summarize(wftWaitAfterCreates);
    const report = `
## Video jobs benchmark (${new Date().toISOString()}) · commit ${execSync('git rev-parse --short HEAD').toString().trim()}

N = ${created.length} jobs, render ${RENDER_MIN}–${RENDER_MAX} ms, created at ${fixed(created.length / createSecs)} /s by ${CONCURRENCY} clients;
polling defaults (first poll 2 s, ×1.5, at most 15 s); worker maxCachedWorkflows ${MAX_CACHED}; ${os.cpus().length} CPUs.

| measure | value |
| --- | --- |
| all final and settled after | ${fixed(wallSecs)} s |
| worker CPU, from the first create to the last settlement | ${fixed(cpuMs / 1000, 2)} s (${fixed(cpuMs / created.length, 2)} ms per job; ${fixed(cpuMs / 1000 / wallSecs, 2)} cores on average) |
| worker memory, peak | RSS ${fixed(peakRss)} MB, JS heap ${fixed(peakHeap)} MB (idle before: RSS ${fixed(idle?.rss_mb ?? NaN)} MB) |
| history events per job (sample of ${events.length}, ${runs} runs) | p50 ${ev.p50}, p90 ${ev.p90}, p99 ${ev.p99} |
| actions per job (start, timers, activities, markers, signals, upserts, continue-as-new) | p50 ${ac.p50}, p90 ${ac.p90}, p99 ${ac.p99} |
| completion lag: provider final → job shows it | p50 ${l.p50} ms, p90 ${l.p90} ms, p99 ${l.p99} ms |
| provider final → final charge settled | p50 ${sl.p50} ms, p90 ${sl.p90} ms, p99 ${sl.p99} ms |
| of which: timers firing late (server) | p50 ${fixed(tl.p50, 0)} ms, p90 ${fixed(tl.p90, 0)} ms, p99 ${fixed(tl.p99, 0)} ms |
| of which: workflow task scheduled → started (worker) | p50 ${fixed(ww.p50, 0)} ms, p90 ${fixed(ww.p90, 0)} ms, p99 ${fixed(ww.p99, 0)} ms |
| the same, for tasks after the last create | p50 ${fixed(wa.p50, 0)} ms, p90 ${fixed(wa.p90, 0)} ms, p99 ${fixed(wa.p99, 0)} ms |

Load average at the end: ${os.loadavg().map((v) => v.toFixed(1)).join(' ')} (the figures include whatever else ran on the machine).
`;
    console.log(report);
    recordRun('video-jobs', report);
  } finally {
    for (const stop of stops.reverse()) await stop().catch((err) => console.error('stop failed', err));
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

// temporal.api.enums.v1.EventType names by number (only those counted as actions are needed).
const EVENT_NAMES: Record<number, string> = {
  1: 'WORKFLOW_EXECUTION_STARTED',
  10: 'ACTIVITY_TASK_SCHEDULED',
  17: 'TIMER_STARTED',
  25: 'MARKER_RECORDED',
  26: 'WORKFLOW_EXECUTION_SIGNALED',
  40: 'UPSERT_WORKFLOW_SEARCH_ATTRIBUTES',
  28: 'WORKFLOW_EXECUTION_CONTINUED_AS_NEW',
};

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
