import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createSettlementActivities } from '../../activities/credits/settlement';
import { createSweeperActivities } from '../../activities/credits/sweeper';
import { Reservations, type HoldRequest } from '../../services/credits/holds';
import { recordOutcome } from '../../services/credits/outbox';
import { checkInvariants, newAccount, useStack, type TestAccount } from '../helpers/stack';
import { env } from '../setup/env';

// The branching of the credits activities, run in a mock activity context against the real
// database: which holds the sweeper releases, and what a batch settlement skips.

const TARIFF = { input_multiplier: '0.000002', output_multiplier: '0.000008', cache_multiplier: '0.0000005', cache_creation_multiplier: '0.0000025' };
const COMPLETED = { outcome: 'completed' as const, billable: true, usage: { prompt_tokens: 10, completion_tokens: 5, cached_tokens: 0, cache_write_tokens: 0, reasoning_tokens: null }, providerCost: null, httpStatus: 200 };

async function processRow(heartbeatSecondsAgo: number): Promise<string> {
  const id = randomUUID();
  await env.db('api_processes').insert({ id, host: 'test', pid: 1, heartbeat_at: env.db.raw(`now() - interval '${heartbeatSecondsAgo} seconds'`) });
  return id;
}

describe('credits activities (MockActivityEnvironment)', function () {
  const stack = useStack();
  let acct: TestAccount;
  const hold = (reservations: Reservations, held = '0.5') => {
    const h: HoldRequest = { reservationId: randomUUID(), accountId: acct.accountId, keyId: acct.keyId, model: 'sim-gpt', provider: 'simulator', endpoint: '/v1/chat/completions', tariff: TARIFF, held, complimentary: false };
    return reservations.hold(h);
  };

  beforeEach(async function () {
    acct = await newAccount({ credits: '10' });
  });

  it('releaseOrphanHolds: releases the holds of a dead process only; live processes and recorded outcomes are left alone', async function () {
    // No process is taken for dead before PostgreSQL itself has been up that long (it may have been down).
    const deadAfterMs = 5_000;
    const upMs = Number((await env.db.raw('SELECT extract(epoch from now() - pg_postmaster_start_time()) * 1000 AS ms')).rows[0].ms);
    if (upMs < deadAfterMs) await new Promise((r) => setTimeout(r, deadAfterMs - upMs + 100));
    const [dead, live] = await Promise.all([processRow(3600), processRow(0)]);
    const deadHold = await hold(new Reservations(env.db, { logger: env.logger, processId: dead }));
    const liveHold = await hold(new Reservations(env.db, { logger: env.logger, processId: live }));
    const reported = await hold(new Reservations(env.db, { logger: env.logger, processId: dead }));
    assert.ok(await recordOutcome(env.db, reported.reservationId, COMPLETED), 'the outcome of the third hold is recorded');

    const { releaseOrphanHolds } = createSweeperActivities(env.db, stack.temporal, { deadAfterMs, unrecordedOlderThanMs: 3_600_000 });
    type Swept = Awaited<ReturnType<typeof releaseOrphanHolds>>;
    const result = (await new MockActivityEnvironment().run(releaseOrphanHolds)) as Swept;
    assert.ok(result.released.includes(deadHold.reservationId), `the dead process's unreported hold is released: ${JSON.stringify(result.released)}`);
    assert.ok(!result.released.includes(liveHold.reservationId), 'a live process keeps its hold');
    assert.ok(!result.released.includes(reported.reservationId), 'a recorded outcome is the relay’s to settle');
    const again = (await new MockActivityEnvironment().run(releaseOrphanHolds)) as Swept;
    assert.ok(!again.released.includes(deadHold.reservationId), 'released once');
    const rows = await env.db('reservations').whereIn('id', [deadHold.reservationId, liveHold.reservationId, reported.reservationId]).select('id', 'status');
    const status = Object.fromEntries(rows.map((r) => [r.id, r.status]));
    assert.equal(status[deadHold.reservationId], 'released', "the dead process's hold is released");
    assert.equal(status[liveHold.reservationId], 'held', 'the live process keeps its hold');
    assert.equal(status[reported.reservationId], 'held', 'the recorded hold stays held for the relay');
  });

  it('settleBatch: settles each held reservation from its recorded outcome once, skips the resolved and the unreported', async function () {
    const reservations = new Reservations(env.db, { logger: env.logger });
    const [a, b, unreported] = await Promise.all([hold(reservations), hold(reservations), hold(reservations)]);
    await recordOutcome(env.db, a.reservationId, COMPLETED);
    await recordOutcome(env.db, b.reservationId, { ...COMPLETED, outcome: 'failed', billable: false, usage: null, httpStatus: 502 });
    const { settleBatch } = createSettlementActivities(env.db);
    const ids = [a.reservationId, b.reservationId, unreported.reservationId];
    type Batch = Awaited<ReturnType<typeof settleBatch>>;
    const first = (await new MockActivityEnvironment().run(settleBatch, ids)) as Batch;
    assert.equal(first.settled, 2, 'the two reported holds are settled');
    assert.equal(first.charged, '0.00006', 'only the completed outcome is charged'); // 10 × 0.000002 + 5 × 0.000008
    const retried = (await new MockActivityEnvironment().run(settleBatch, ids)) as Batch;
    assert.deepEqual(retried, { settled: 0, charged: '0' }, 'a retry settles nothing and charges nothing');
    const rows = await env.db('reservations').whereIn('id', ids).select('id', 'status');
    const status = Object.fromEntries(rows.map((r) => [r.id, r.status]));
    assert.deepEqual([status[a.reservationId], status[b.reservationId], status[unreported.reservationId]], ['settled', 'released', 'held'], 'completed settled, failed released, unreported still held');
    const inv = await checkInvariants(acct.accountId);
    assert.equal(inv.ledger.usage, inv.account.total_usage, 'usage derivable from the ledger');
    assert.equal(inv.account.pending_requests, 1, 'only the unreported hold is pending');
  });
});
