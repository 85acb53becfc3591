import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Worker } from '@temporalio/worker';
import { createSettlementActivities } from '../../activities/credits/settlement';
import { Reservations } from '../../services/credits/holds';
import { reservationWorkflow } from '../../workflows/credits/reservation';
import { sweepHoldsWorkflow } from '../../workflows/credits/sweeper';
import { env } from '../setup/env';
import { call, checkInvariants, newAccount, settled, useStack } from '../helpers/stack';

const TARIFF = { input_multiplier: '0.000002', output_multiplier: '0.000008', cache_multiplier: '0.0000005', cache_creation_multiplier: '0.0000025' };

describe('reservation durability', function () {
  this.timeout(60_000);
  const stack = useStack({ holdTimeoutMs: 1500 });

  it('with the worker down between hold and settlement, the hold resolves exactly once when a worker returns', async () => {
    const acct = await newAccount();
    await stack.stopWorker();
    const r = await call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model: 'sim-gpt', messages: [{ role: 'user', content: 'x [sim tokens=4]' }] } });
    assert.equal(r.status, 200, 'the client is answered without waiting for settlement');
    const id = r.headers.get('x-gateway-request-id')!;
    await new Promise((res) => setTimeout(res, 500));
    assert.equal((await env.db('reservations').where({ id }).first()).status, 'held', 'with the worker down the reservation stays held');
    assert.equal((await checkInvariants(acct.accountId)).account.pending_requests, 1, 'the request counts as pending while its hold is open');

    await stack.startWorker();
    const row = await settled(id);
    assert.equal(row.status, 'settled', 'once a worker returns the reservation is settled');
    assert.equal(Number(row.charge), r.json.usage.cost, 'the settled charge equals the cost told to the client');
    const ledger = await env.db('ledger').where({ reservation_id: id }).orderBy('id');
    assert.deepEqual(ledger.map((l) => l.kind), ['hold', 'release', 'charge'], 'hold, release and charge: charged exactly once');
    const inv = await checkInvariants(acct.accountId);
    assert.equal(inv.account.pending_requests, 0, 'no request is left pending after settlement');
    assert.equal(inv.ledger.usage, inv.account.total_usage, "the ledger's usage matches the account's total usage");
  });

  it('settlement applied twice (an activity retry) changes the balance once', async () => {
    const acct = await newAccount();
    const id = randomUUID();
    const res = new Reservations(env.db, { logger: env.logger });
    await res.hold({ reservationId: id, accountId: acct.accountId, keyId: acct.keyId, model: 'sim-gpt', provider: 'simulator', endpoint: '/v1/chat/completions', tariff: TARIFF, held: '1', complimentary: false });
    const { settleReservation } = createSettlementActivities(env.db);
    const report = { outcome: 'completed' as const, billable: true, usage: { prompt_tokens: 10, completion_tokens: 5, cached_tokens: 0, cache_write_tokens: 0, reasoning_tokens: null }, providerCost: null, httpStatus: 200 };
    const [a, b] = await Promise.all([settleReservation(id, report), settleReservation(id, report)]);
    assert.equal([a.applied, b.applied].filter(Boolean).length, 1, 'only one of two concurrent settlements is applied');
    assert.equal(a.charge, b.charge, 'both settlements report the same charge');
    const inv = await checkInvariants(acct.accountId);
    assert.equal(inv.account.total_usage, '0.000060000000', 'the balance is charged once: 10 in x 0.000002 + 5 out x 0.000008');
    assert.equal(inv.ledger.usage, inv.account.total_usage, "the ledger's usage matches the account's total usage");
    assert.equal((await env.db('ledger').where({ reservation_id: id })).length, 3, 'one hold, one release and one charge in the ledger, not two');
  });

  it('replays the history of a finished settlement workflow without non-determinism', async () => {
    const acct = await newAccount();
    const r = await call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model: 'sim-gpt', stream: true, messages: [{ role: 'user', content: 'replay me' }] } });
    const id = r.headers.get('x-gateway-request-id')!;
    const row = await settled(id);
    const handle = stack.temporal.workflow.getHandle(row.settlement_workflow_id);
    await handle.result();
    const history = await handle.fetchHistory();
    await Worker.runReplayHistory({ workflowBundle: env.bundles.credits }, history, row.settlement_workflow_id);
  });

  it('the sweeper releases a hold whose API process died before reporting, and leaves holds with a running workflow alone', async () => {
    const acct = await newAccount();
    const res = new Reservations(env.db, { logger: env.logger });
    const hold = (id: string, held: string) =>
      res.hold({ reservationId: id, accountId: acct.accountId, keyId: acct.keyId, model: 'sim-gpt', provider: 'simulator', endpoint: '/v1/chat/completions', tariff: TARIFF, held, complimentary: false });
    // An API process that took a hold and died before reporting: no workflow exists.
    const orphanId = randomUUID();
    await hold(orphanId, '2');
    // A hold whose reservation workflow is running (waiting for its report).
    const liveId = randomUUID();
    await hold(liveId, '3');
    await stack.temporal.workflow.start(reservationWorkflow, {
      taskQueue: stack.taskQueue,
      workflowId: `reservation-${liveId}`,
      args: [{ reservationId: liveId, holdTimeoutMs: 60_000, uncertainGraceMs: 100 }],
    });
    assert.equal((await checkInvariants(acct.accountId)).account.reserved_credits, '5.000000000000', 'both holds are reserved before the sweep');

    const result = await stack.temporal.workflow.execute(sweepHoldsWorkflow, { taskQueue: stack.taskQueue, workflowId: `sweep-${randomUUID()}`, args: [0] });
    assert.ok(result.released.includes(orphanId), `the orphan hold ${orphanId} is released: ${JSON.stringify(result.released)}`);
    assert.ok(!result.released.includes(liveId), `the live hold ${liveId} is kept: ${JSON.stringify(result.released)}`);
    const orphan = await env.db('reservations').where({ id: orphanId }).first();
    assert.equal(orphan.status, 'released', 'the orphan reservation is released');
    assert.equal(orphan.outcome, 'abandoned', 'the orphan is recorded as abandoned');
    assert.equal((await env.db('reservations').where({ id: liveId }).first()).status, 'held', 'the hold with a running workflow stays held');
    const inv = await checkInvariants(acct.accountId);
    assert.equal(inv.account.reserved_credits, '3.000000000000', 'only the live hold stays reserved');
    assert.equal(inv.account.pending_requests, 1, 'only the live hold is still pending');
    assert.equal(inv.ledger.usage, inv.account.total_usage, "the ledger's usage matches the account's total usage");
    await stack.temporal.workflow.getHandle(`reservation-${liveId}`).terminate('test cleanup');
  });

  it('a reservation workflow that never hears from its API process releases the hold after the hold timeout', async () => {
    const acct = await newAccount();
    const id = randomUUID();
    const res = new Reservations(env.db, { logger: env.logger });
    await res.hold({ reservationId: id, accountId: acct.accountId, keyId: acct.keyId, model: 'sim-gpt', provider: 'simulator', endpoint: '/v1/chat/completions', tariff: TARIFF, held: '0.5', complimentary: false });
    await stack.temporal.workflow.start(reservationWorkflow, { taskQueue: stack.taskQueue, workflowId: `reservation-${id}`, args: [{ reservationId: id, holdTimeoutMs: 1500, uncertainGraceMs: 100 }] });
    const row = await settled(id, 15_000);
    assert.equal(row.status, 'released', 'an unreported hold is released after the hold timeout');
    assert.equal(row.outcome, 'abandoned', 'the timed-out reservation is recorded as abandoned');
    assert.equal(Number((await checkInvariants(acct.accountId)).account.total_usage), 0, 'nothing is charged for an abandoned hold');
  });
});
