import fs from 'node:fs';
import { recordRun } from './history';
import { execSync } from 'node:child_process';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { SA } from '../domain/shared/search-attributes';
import { createLogger } from '../platform/logger';
import { freePort } from '../platform/ports';
import { startTemporalDevServer } from '../platform/temporal-server';
import { cpuBetween, cpuSnapshot } from './cpu';
import { fixed, percentile, table } from './stats';

// How many reservation-shaped workflows per second the embedded Temporal dev server completes
// on this machine, with a workflow that does nothing else (bench/ceiling/workflow.ts): the
// ceiling of "one workflow per billable request" (DESIGN.md section 2) whatever the gateway does.
// Usage: npx tsx bench/temporal-ceiling.ts [--n 2000] [--c 64]; appends to bench/history/.

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const N = arg('n', 2000);
const C = arg('c', 64);
const quiet = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} };

async function main() {
  const loadBefore = fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  Runtime.install({ logger: quiet });
  const logger = createLogger('warn');
  const server = await startTemporalDevServer({ port: await freePort(), namespace: 'default', logger });
  const connection = await NativeConnection.connect({ address: server.address });
  const client = new Client({ connection: await Connection.connect({ address: server.address }) });
  const sentAt = new Map<string, number>();
  const lags: number[] = [];
  const worker = await Worker.create({
    connection,
    taskQueue: 'ceiling',
    workflowBundle: await bundleWorkflowCode({ workflowsPath: require.resolve('./ceiling/workflow'), logger: quiet }),
    activities: {
      async settle(id: string) {
        lags.push(Date.now() - sentAt.get(id)!);
        return 'provider_cost';
      },
    },
    // The billing worker's settings (workers/billing.ts).
    maxConcurrentWorkflowTaskExecutions: 200,
    maxConcurrentActivityTaskExecutions: 200,
  });
  const running = worker.run();
  const pgrp = Number(fs.readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ')[2]);
  const cpuStart = cpuSnapshot({ systemPgid: pgrp, barePgid: null });
  const t0 = Date.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: C }, async () => {
      while (next < N) {
        const id = `ceiling-${next++}`;
        sentAt.set(id, Date.now());
        // The gateway's call: signal-with-start after the answer (api/reservations.ts).
        await client.workflow.signalWithStart('minimalReservation', {
          taskQueue: 'ceiling',
          workflowId: id,
          args: [id],
          signal: 'report',
          signalArgs: ['done'],
          typedSearchAttributes: [
            { key: SA.AccountId, value: 'bench' },
            { key: SA.Model, value: 'bench' },
          ],
        });
      }
    }),
  );
  const sentMs = Date.now() - t0;
  while (lags.length < N) await new Promise((r) => setTimeout(r, 20));
  const doneMs = Date.now() - t0;
  const cpu = cpuBetween(cpuStart, cpuSnapshot({ systemPgid: pgrp, barePgid: null }));
  worker.shutdown();
  await running;
  await server.stop();

  const commit = execSync('git rev-parse --short HEAD').toString().trim();
  const out = [
    `## Temporal dev server ceiling — ${new Date().toISOString()} — commit ${commit}`,
    '',
    `${N} minimal reservation workflows (signal-with-start, local-activity settle, search-attribute upsert), ${C} concurrent starters, in-memory dev server, load average before: ${loadBefore}`,
    '',
    table(
      ['started/s', 'completed/s', 'start→settle p50 ms', 'p99 ms'],
      [[fixed(N / (sentMs / 1000), 0), fixed(N / (doneMs / 1000), 0), fixed(percentile(lags, 0.5), 0), fixed(percentile(lags, 0.99), 0)]],
    ),
    '',
    'CPU (cores) during the run: ' + cpu.map(([k, v]) => `${k.replace('system node (gateway+worker+sim)', 'worker')} ${fixed(v, 2)}`).join(' · '),
    '',
  ].join('\n');
  console.log(out);
  recordRun('temporal-ceiling', out);
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
