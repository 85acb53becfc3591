import assert from 'node:assert/strict';
import { Client, Connection } from '@temporalio/client';
import { settlementBatchUnder } from '../../domain/credits/reservation';
import { DEV_SERVER_SEARCH_ATTRIBUTE_VALUE_LIMIT } from '../../platform/temporal-server';
import { randomUUID } from 'node:crypto';
import { Reservations } from '../../services/credits/holds';
import { startSettlementRelay } from '../../services/credits/relay';
import { call, checkInvariants, newAccount, settled, useStack, type Stack } from '../helpers/stack';
import { env } from '../setup/env';

// The outcome outbox (issue 14): outcomes are recorded in PostgreSQL first, then settled by
// workflows in batches; a claim whose workflow never started is started again, same id.

const chat = (stack: Stack, key: string) => call(stack.gateway.url, '/v1/chat/completions', { key, body: { model: 'sim-gpt', messages: [{ role: 'user', content: 'hi [sim tokens=3]' }] } });

describe('settlement outbox and relay', function () {
  const stack = useStack();
  /** Reservations with their outbox rows: the recorded outcome, and the claiming workflow (on the reservation once settled). */
  const withClaims = (ids: string[]) =>
    env.db('reservations as r').leftJoin('settlement_outbox as o', 'o.reservation_id', 'r.id').whereIn('r.id', ids)
      .select('r.id', 'r.status', 'o.report', 'o.recorded_at', env.db.raw('COALESCE(o.workflow_id, r.settlement_workflow_id) AS settlement_workflow_id'));

  it('answers do not wait for Temporal: outcomes wait in PostgreSQL while no relay runs, then settle exactly once', async function () {
    const acct = await newAccount({ credits: '5' });
    await stack.stopWorker();
    const ids: string[] = [];
    try {
      for (let i = 0; i < 3; i++) {
        const r = await chat(stack, acct.key);
        assert.equal(r.status, 200, r.text);
        ids.push(r.headers.get('x-gateway-request-id')!);
      }
      await new Promise((r) => setTimeout(r, 300));
      const rows = await withClaims(ids);
      assert.ok(rows.length === ids.length && rows.every((r) => r.status === 'held' && r.recorded_at !== null && r.report.outcome === 'completed'), `every hold is held with its completed outcome recorded: ${JSON.stringify(rows.map((r) => [r.status, r.recorded_at, r.report?.outcome]))}`);
    } finally {
      await stack.startWorker();
    }
    for (const id of ids) assert.equal((await settled(id)).status, 'settled', `request ${id} settled once the worker is back`);
    const inv = await checkInvariants(acct.accountId);
    assert.equal(Number(inv.account.reserved_credits), 0, 'no credits left reserved');
    assert.equal(inv.ledger.usage, inv.account.total_usage, 'usage derivable from the ledger');
    assert.equal((await env.db('ledger').whereIn('reservation_id', ids).where({ kind: 'charge' })).length, 3, 'each of the 3 requests charged once');
  });

  it('a batch claimed by a relay whose workflow start failed is started again under the same workflow id', async function () {
    const acct = await newAccount({ credits: '5' });
    await stack.stopWorker();
    const unreachable = new Client({ connection: Connection.lazy({ address: '127.0.0.1:1', connectTimeout: 200 }) });
    const broken = await startSettlementRelay({
      db: env.db,
      databaseUrl: env.databaseUrl,
      temporal: unreachable,
      taskQueue: stack.taskQueue,
      logger: env.logger,
      holdTimeoutMs: 60_000,
      uncertainGraceMs: 200,
    });
    let id: string;
    let claimedBy: string;
    try {
      const r = await chat(stack, acct.key);
      assert.equal(r.status, 200, r.text);
      id = r.headers.get('x-gateway-request-id')!;
      const deadline = Date.now() + 10_000;
      let row;
      do {
        [row] = await withClaims([id]);
        if (row.settlement_workflow_id) break;
        await new Promise((res) => setTimeout(res, 100));
      } while (Date.now() < deadline);
      claimedBy = row.settlement_workflow_id;
      assert.match(claimedBy, /^settlement-/, 'the relay claimed the batch under a settlement workflow id');
      assert.equal(row.status, 'held', 'the claimed hold is still held while its workflow cannot start');
    } finally {
      await broken.stop();
      await stack.startWorker();
    }
    const row = await settled(id, 20_000);
    assert.equal(row.status, 'settled', 'the reservation settles once the workflow is started again');
    assert.equal(row.settlement_workflow_id, claimedBy, 'started again under the same workflow id');
    assert.equal((await stack.temporal.workflow.getHandle(claimedBy).result()).settled, 1, 'that workflow settled the one outcome');
  });

  it('outcomes a process of the previous release recorded on the reservation row (claimed or not) are moved to the outbox and settled once', async function () {
    const acct = await newAccount({ credits: '5' });
    const res = new Reservations(env.db, { logger: env.logger });
    const TARIFF = { input_multiplier: '0.000002', output_multiplier: '0.000008', cache_multiplier: '0.0000005', cache_creation_multiplier: '0.0000025' };
    const hold = () => res.hold({ reservationId: randomUUID(), accountId: acct.accountId, keyId: acct.keyId, model: 'sim-gpt', provider: 'simulator', endpoint: '/v1/chat/completions', tariff: TARIFF, held: '0.1', complimentary: false });
    const [fresh, claimed] = [await hold(), await hold()];
    const report = JSON.stringify({ outcome: 'completed', billable: true, usage: { prompt_tokens: 10, completion_tokens: 5, cached_tokens: 0, cache_write_tokens: 0, reasoning_tokens: null }, providerCost: null, httpStatus: 200, bodyId: `chatcmpl-legacy-${fresh.reservationId}` });
    // As the previous release wrote them: one recorded, one claimed by a relay whose workflow never started.
    await env.db('reservations').where({ id: fresh.reservationId }).update({ report, reported_at: env.db.fn.now() });
    await env.db('reservations').where({ id: claimed.reservationId }).update({ report, reported_at: env.db.raw(`now() - interval '1 hour'`), settlement_workflow_id: `settlement-${claimed.reservationId}`, settlement_claimed_at: env.db.raw(`now() - interval '1 hour'`) });
    for (const h of [fresh, claimed]) {
      const row = await settled(h.reservationId, 30_000);
      assert.equal(row.status, 'settled', `${h.reservationId} settled from its legacy outcome`);
      assert.equal(row.prompt_tokens, 10, `${h.reservationId} settled from the recorded usage`);
    }
    assert.equal((await settled(claimed.reservationId)).settlement_workflow_id, `settlement-${claimed.reservationId}`, 'the legacy claim was started again under its own workflow id');
    assert.equal((await settled(fresh.reservationId)).body_id, `chatcmpl-legacy-${fresh.reservationId}`, 'the body id of the legacy outcome reaches the row');
    assert.equal((await env.db('settlement_outbox').whereIn('reservation_id', [fresh.reservationId, claimed.reservationId])).length, 0, 'nothing left in the outbox');
    assert.deepEqual((await env.db('ledger').whereIn('reservation_id', [fresh.reservationId, claimed.reservationId]).where({ kind: 'charge' })).length, 2, 'each charged once');
    const inv = await checkInvariants(acct.accountId);
    assert.equal(inv.account.pending_requests, 0, 'no request left pending');
    assert.equal(inv.ledger.usage, inv.account.total_usage, 'usage derivable from the ledger');
  });

  it('under concurrent load outcomes settle in batches: fewer workflows than requests, each charged once', async function () {
    const acct = await newAccount({ credits: '50' });
    const n = 80;
    const answers = await Promise.all(Array.from({ length: n }, () => chat(stack, acct.key)));
    assert.ok(answers.every((a) => a.status === 200), `every request answered 200: ${answers.map((a) => a.status).join(', ')}`);
    const ids = answers.map((a) => a.headers.get('x-gateway-request-id')!);
    for (const id of ids) await settled(id);
    const rows = await env.db('reservations').whereIn('id', ids).select('status', 'settlement_workflow_id');
    assert.ok(rows.every((r) => r.status === 'settled'), `every request settled: ${rows.map((r) => r.status).join(', ')}`);
    const workflows = new Set(rows.map((r) => r.settlement_workflow_id));
    assert.ok(workflows.size < n, `${workflows.size} workflows for ${n} requests`);
    assert.equal((await env.db('ledger').whereIn('reservation_id', ids).where({ kind: 'charge' })).length, n, 'each request charged once');
    const inv = await checkInvariants(acct.accountId);
    assert.equal(Number(inv.account.reserved_credits), 0, 'no credits left reserved');
    assert.equal(inv.account.pending_requests, 0, 'no request left pending');
    assert.equal(inv.ledger.usage, inv.account.total_usage, 'usage derivable from the ledger');
  });

  /** Waits until `n` of the rows are claimed (a workflow named on them); returns the claimed rows. */
  async function claimedRows(ids: string[], n: number, withinMs: number) {
    const deadline = Date.now() + withinMs;
    for (;;) {
      const rows = (await withClaims(ids)).filter((r) => r.settlement_workflow_id);
      if (rows.length >= n || Date.now() > deadline) return rows;
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  it('a full batch is claimed at once; a partial one waits for its window (flushMs) so that it can fill', async function () {
    const acct = await newAccount({ credits: '50' });
    await stack.stopWorker();
    const relay = await startSettlementRelay({ db: env.db, databaseUrl: env.databaseUrl, temporal: stack.temporal, taskQueue: stack.taskQueue, logger: env.logger, holdTimeoutMs: 60_000, uncertainGraceMs: 200, batchSize: 20, flushMs: 4000, pollMs: 60_000 });
    let ids: string[];
    try {
      // Its first pass (a sweep of whatever is recorded) is over before the requests; the poll, a
      // fallback that sweeps after a quiet interval, stays out of the way.
      await new Promise((r) => setTimeout(r, 300));
      const answers = await Promise.all(Array.from({ length: 25 }, () => chat(stack, acct.key)));
      assert.ok(answers.every((a) => a.status === 200), `every request answered 200: ${answers.map((a) => a.status).join(', ')}`);
      ids = answers.map((a) => a.headers.get('x-gateway-request-id')!);
      const first = await claimedRows(ids, 20, 3000);
      assert.equal(first.length, 20, 'the full batch of 20 is claimed without waiting for the window');
      assert.equal(new Set(first.map((r) => r.settlement_workflow_id)).size, 1, 'one workflow for the full batch');
      await new Promise((r) => setTimeout(r, 1000));
      assert.equal((await claimedRows(ids, 25, 0)).length, 20, 'the 5 left wait for their window');
      const all = await claimedRows(ids, 25, 8000);
      assert.equal(all.length, 25, 'the partial batch is claimed once its oldest outcome is flushMs old');
    } finally {
      await relay.stop();
      await stack.startWorker();
    }
    for (const id of ids) assert.equal((await settled(id, 20_000)).status, 'settled', `request ${id} settled`);
    assert.equal((await env.db('ledger').whereIn('reservation_id', ids).where({ kind: 'charge' })).length, 25, 'each request charged once');
  });

  it('a batch of more than 50 outcomes settles in one workflow where the server takes a longer RequestIds (the dev server: 8 KB)', async function () {
    const acct = await newAccount({ credits: '100' });
    const n = 120;
    await stack.stopWorker();
    // The outcomes are recorded first, so the relay's first pass finds them all (else a partial
    // batch goes when its window ends: on a busy box before the last request is answered).
    const answers = await Promise.all(Array.from({ length: n }, () => chat(stack, acct.key)));
    assert.ok(answers.every((a) => a.status === 200), `every request answered 200: ${answers.map((a) => a.status).join(', ')}`);
    const ids = answers.map((a) => a.headers.get('x-gateway-request-id')!);
    // An answer can end before its outcome's batch leaves (a batch in flight, or the 25 ms interval).
    for (let i = 0; ; i++) {
      const n = (await env.db('settlement_outbox').whereIn('reservation_id', ids).select('reservation_id')).length;
      if (n === ids.length) break;
      assert.ok(i < 100, `every outcome recorded within 5 s (${n} of ${ids.length})`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const relay = await startSettlementRelay({ db: env.db, databaseUrl: env.databaseUrl, temporal: stack.temporal, taskQueue: stack.taskQueue, logger: env.logger, holdTimeoutMs: 60_000, uncertainGraceMs: 200, batchSize: settlementBatchUnder(DEV_SERVER_SEARCH_ATTRIBUTE_VALUE_LIMIT) });
    let workflowId: string;
    try {
      const rows = await claimedRows(ids, n, 8000);
      assert.equal(rows.length, n, 'every outcome claimed');
      const workflows = new Set(rows.map((r) => r.settlement_workflow_id));
      assert.equal(workflows.size, 1, `one workflow for the ${n} outcomes: ${[...workflows].join(', ')}`);
      workflowId = rows[0].settlement_workflow_id;
    } finally {
      await relay.stop();
      await stack.startWorker();
    }
    const result = await stack.temporal.workflow.getHandle(workflowId).result();
    assert.equal(result.settled, n, 'the one workflow settled every outcome');
    const described = await stack.temporal.workflow.getHandle(workflowId).describe();
    assert.equal((described.searchAttributes.RequestIds as string[]).length, n, 'RequestIds lists every request of the batch');
    assert.equal((await env.db('ledger').whereIn('reservation_id', ids).where({ kind: 'charge' })).length, n, 'each request charged once');
    const inv = await checkInvariants(acct.accountId);
    assert.equal(Number(inv.account.reserved_credits), 0, 'no credits left reserved');
    assert.equal(inv.ledger.usage, inv.account.total_usage, 'usage derivable from the ledger');
  });
});
