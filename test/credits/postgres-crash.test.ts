import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Decimal from 'decimal.js';
import { createSettlementActivities } from '../../activities/credits/settlement';
import { createAccount } from '../../services/accounts/accounts';
import { createKey } from '../../services/keys/keys';
import { Reservations, type Hold } from '../../services/credits/holds';
import { holdsOfDeadProcesses } from '../../services/credits/settlement';
import { createDb, migrate, type Db } from '../../platform/db';
import { freePort } from '../../platform/ports';
import { startEmbeddedPostgres, type EmbeddedDatabase } from '../../platform/postgres';
import { killPostgres } from '../helpers/pg-crash';
import { checkInvariants } from '../helpers/stack';
import { env } from '../setup/env';

// The real crash (issue 14 item 5): a PostgreSQL of its own is killed with kill -9 (the server and
// every process of it) right after holds commit without waiting for the disk, and started again
// (crash recovery). Holds whose commit had not reached the WAL on disk are gone; the outcome
// write of each request writes it again, and every request is settled exactly once.
// The WAL writer is slowed (wal_writer_delay 10 s) so that the holds' commits are still in
// PostgreSQL's memory when it dies: without that they reach the disk within 200–600 ms.

const TARIFF = { input_multiplier: '0.000002', output_multiplier: '0.000008', cache_multiplier: '0.0000005', cache_creation_multiplier: '0.0000025' };
const COMPLETED = { outcome: 'completed' as const, billable: true, usage: { prompt_tokens: 1000, completion_tokens: 500, cached_tokens: 0, cache_write_tokens: 0, reasoning_tokens: null }, providerCost: null, httpStatus: 200 };
const N = 10;

describe('PostgreSQL killed (kill -9) right after holds commit', function () {
  this.timeout(90_000);
  let tmp: string;
  let dir: string;
  let port: number;
  let pg: EmbeddedDatabase | null = null;
  let db: Db | null = null;

  const start = async () => {
    pg = await startEmbeddedPostgres({ dir, port, database: 'crash_test', persistent: true, logger: env.logger });
    return pg;
  };

  before(async function () {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-pg-crash-'));
    fs.chmodSync(tmp, 0o755); // as root, PostgreSQL runs as the `postgres` user
    dir = path.join(tmp, 'pg');
    port = await freePort();
    db = createDb((await start()).url, 5);
    await migrate(db);
    await db.raw(`ALTER SYSTEM SET wal_writer_delay = '10s'`);
    await db.raw('SELECT pg_reload_conf()');
  });

  after(async function () {
    await db?.destroy().catch(() => {});
    await pg?.stop().catch(() => {});
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('loses the unflushed holds; each outcome write writes its hold again; every request settles exactly once; the balances and the key limit hold', async function () {
    const d = db!;
    const account = await createAccount(d, { name: 'crash', tier: 'pro', credits: '100' });
    const { id: keyId } = await createKey(d, { accountId: account.id, label: 'crash' });
    await d('api_keys').where({ id: keyId }).update({ spend_limit: '50' });
    const processId = randomUUID();
    await d('api_processes').insert({ id: processId, host: 'test', pid: process.pid });
    await new Promise((r) => setTimeout(r, 500)); // the WAL writer takes its new delay at its next round
    const credits = new Reservations(d, { logger: env.logger, processId });
    // A hold resolved by a workflow of its own (a video job's) commits durably: the crash keeps it.
    const durable = await credits.hold({ reservationId: randomUUID(), accountId: account.id, keyId, model: 'sim-video', provider: 'simulator', endpoint: '/v1/videos', tariff: TARIFF, held: '2', complimentary: false, modality: 'video', ownerWorkflowId: 'video-crash-test' });
    const keyed = new Reservations(d, { logger: env.logger, processId, trackKeySpend: true });
    const holds: Hold[] = [];
    for (let i = 0; i < N; i++) {
      for (const r of [credits, keyed]) {
        holds.push(await r.hold({ reservationId: randomUUID(), accountId: account.id, keyId, model: 'sim-gpt', provider: 'simulator', endpoint: '/v1/chat/completions', tariff: TARIFF, held: '1.5', complimentary: false }));
      }
    }
    const ids = holds.map((h) => h.reservationId);

    await killPostgres(dir);
    await start();
    const survived = await d('reservations').whereIn('id', ids).count<{ n: number }[]>({ n: '*' }).first();
    const lost = ids.length - Number(survived!.n);
    this.test!.title += ` (${lost} of ${ids.length} holds lost)`;
    assert.ok(lost > 0, 'the crash lost no hold: their commits reached the disk before the kill');
    assert.ok(await d('reservations').where({ id: durable.reservationId }).first('id'), 'a durable hold survives the crash');
    // What recovery left is consistent: the surviving holds and nothing of the lost ones.
    const after = await checkInvariants(account.id, d);
    assert.ok(new Decimal(after.ledger.usage).eq(after.account.total_usage), `ledger usage ${after.ledger.usage} equals the account's ${after.account.total_usage}`);
    assert.equal(after.account.pending_requests, ids.length - lost + 1, 'the surviving holds and the durable video hold are pending, the lost ones not');

    // No heartbeat could be written while the server was down: its process is not taken for dead yet.
    await d('api_processes').where({ id: processId }).update({ heartbeat_at: d.raw(`now() - interval '1 hour'`) });
    assert.equal((await holdsOfDeadProcesses(d, { deadAfterMs: 60_000, unrecordedOlderThanMs: 3_600_000 }, null)).length, 0, 'the holding process is not taken for dead while its outcome writes are retried');

    // The API's outcome writes (each retried until the server answers again).
    await Promise.all(holds.map((h) => h.report(COMPLETED)));
    const rows = await d('reservations as r').leftJoin('settlement_outbox as o', 'o.reservation_id', 'r.id').whereIn('r.id', ids).select('r.*', 'o.report');
    assert.equal(rows.length, ids.length, 'every request has a reservation again after the outcome writes');
    assert.equal(rows.filter((r) => r.hold_recreated_at !== null).length, lost, 'exactly the lost holds were written again by their outcome writes');
    assert.ok(rows.every((r) => r.status === 'held' && r.report?.outcome === 'completed'), `every hold is held with its outcome reported: ${JSON.stringify(rows.map((r) => [r.status, r.report?.outcome]))}`);

    const { settleBatch } = createSettlementActivities(d);
    const first = await settleBatch(ids);
    assert.equal(first.settled, ids.length, 'every request settles in the first batch');
    assert.deepEqual(await settleBatch(ids), { settled: 0, charged: '0' }, 'a second settlement of the same batch settles and charges nothing');
    const settled = await d('reservations').whereIn('id', ids);
    assert.ok(settled.every((r) => r.status === 'settled' && r.charge === '0.006000000000'), 'each charged in full: 1000 × 0.000002 + 500 × 0.000008');
    const ledger = await d('ledger').whereIn('reservation_id', ids).select('reservation_id', 'kind');
    for (const id of ids) assert.deepEqual(ledger.filter((l) => l.reservation_id === id).map((l) => l.kind).sort(), ['charge', 'hold', 'release'], `reservation ${id} has exactly one hold, one release and one charge`);

    const inv = await checkInvariants(account.id, d);
    assert.ok(new Decimal(inv.ledger.usage).eq(inv.account.total_usage), `ledger usage ${inv.ledger.usage} equals the account's ${inv.account.total_usage}`);
    assert.ok(new Decimal(inv.ledger.grants).eq(inv.account.total_credits), `ledger grants ${inv.ledger.grants} equal the account's credits ${inv.account.total_credits}`);
    assert.ok(new Decimal(inv.account.total_usage).eq(new Decimal('0.006').mul(ids.length).plus(2)), 'the charges and the video hold');
    assert.equal(inv.account.pending_requests, 1, 'only the video hold is still pending');
    assert.ok(new Decimal(inv.account.reserved_credits).eq(2), `the video hold of 2 is still reserved: ${inv.account.reserved_credits}`);
    const key = await d('api_keys').where({ id: keyId }).first();
    assert.ok(new Decimal(key.spend).eq(new Decimal('0.006').mul(N)), `key spend ${key.spend}`);
  });
});
