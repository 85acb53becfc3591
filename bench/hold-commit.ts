import { execFileSync } from 'node:child_process';
import { recordRun } from './history';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createAccount } from '../services/accounts/accounts';
import { createKey } from '../services/keys/keys';
import { HOLD_BATCH_SQL, holdElement, type HoldTerms } from '../services/credits/hold-statement';
import { createDb, migrate } from '../platform/db';
import { createLogger } from '../platform/logger';
import { freePort } from '../platform/ports';
import { startEmbeddedPostgres } from '../platform/postgres';
import { ms3, num, summarize, table } from './stats';

// What the hold's commit costs, three ways (issue 14 item 5), c=1, interleaved, on an embedded
// PostgreSQL of its own: the hold statement committed durably (as before), the same statement
// with synchronous_commit off set inside it (set_config(…, true): no extra round trip), and the
// textbook way, a transaction with SET LOCAL (BEGIN, SET, the statement, COMMIT: four round
// trips). `npx tsx bench/hold-commit.ts`; appends to bench/history/ (BENCH_RESULTS_FILE).

const ITERATIONS = num('BENCH_HOLD_ITERATIONS', 2000);
const TARIFF = { input_multiplier: '0.000002', output_multiplier: '0.000008', cache_multiplier: '0.0000005', cache_creation_multiplier: '0.0000025' };

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hold-commit-'));
  fs.chmodSync(dir, 0o755);
  const logger = createLogger('warn');
  const pg = await startEmbeddedPostgres({ dir: path.join(dir, 'pg'), port: await freePort(), database: 'bench', persistent: false, logger });
  const db = createDb(pg.url, 2);
  try {
    await migrate(db);
    const account = await createAccount(db, { name: 'bench', tier: 'pro', credits: '1000000' });
    const { id: keyId } = await createKey(db, { accountId: account.id, label: 'bench' });
    const terms = (): HoldTerms => ({
      reservationId: randomUUID(),
      accountId: account.id,
      keyId,
      model: 'sim-gpt',
      provider: 'simulator',
      endpoint: '/v1/chat/completions',
      tariff: TARIFF,
      held: '0.001',
      complimentary: false,
      modality: 'text',
      ownerWorkflowId: null,
      processId: null,
      trackKeySpend: false,
    });
    const take = (durable: boolean) => db.raw(HOLD_BATCH_SQL, [JSON.stringify([holdElement(terms(), 0)]), false, durable]);
    const ways: Array<[string, () => Promise<unknown>]> = [
      ['durable commit (before)', () => take(true)],
      ['synchronous_commit off inside the statement (after)', () => take(false)],
      [
        'transaction with SET LOCAL (4 round trips)',
        () =>
          db.transaction(async (trx) => {
            await trx.raw('SET LOCAL synchronous_commit = off');
            await trx.raw(HOLD_BATCH_SQL, [JSON.stringify([holdElement(terms(), 0)]), false, true]);
          }),
      ],
    ];
    const samples = ways.map(() => [] as number[]);
    for (let i = 0; i < 200; i++) for (const [, run] of ways) await run(); // warm-up
    for (let i = 0; i < ITERATIONS; i++) {
      for (let j = 0; j < ways.length; j++) {
        const k = (i + j) % ways.length; // rotate which goes first
        const t0 = process.hrtime.bigint();
        await ways[k][1]();
        samples[k].push(Number(process.hrtime.bigint() - t0) / 1e6);
      }
    }
    const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: path.resolve(__dirname, '..'), encoding: 'utf8' }).trim();
    const rows = ways.map(([name], k) => {
      const s = summarize(samples[k]);
      return [name, ms3(s.p50), ms3(s.p90), ms3(s.p99), s.n];
    });
    const text = [
      `## Hold commit: durable vs without fsync — ${new Date().toISOString()} · commit ${commit}`,
      '',
      `\`bench/hold-commit.ts\`: the hold statement alone, c=1, ${ITERATIONS} interleaved iterations of each way after 200 warm-up, over a pooled connection to an embedded PostgreSQL (fsync on, defaults) on this machine (nproc ${os.availableParallelism()}, load average ${os.loadavg().map((v) => v.toFixed(2)).join('/')}).`,
      '',
      table(['way', 'p50 ms', 'p90 ms', 'p99 ms', 'samples'], rows),
    ].join('\n');
    process.stdout.write(text + '\n');
    recordRun('hold-commit', text);
  } finally {
    await db.destroy();
    await pg.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`hold-commit benchmark failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
