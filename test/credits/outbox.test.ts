import assert from 'node:assert/strict';
import { Client, Connection } from '@temporalio/client';
import { startSettlementRelay } from '../../services/credits/relay';
import { call, checkInvariants, newAccount, settled, useStack, type Stack } from '../helpers/stack';
import { env } from '../setup/env';

// The outcome outbox (issue 14): outcomes are recorded in PostgreSQL first, then settled by
// workflows in batches; a claim whose workflow never started is started again, same id.

const chat = (stack: Stack, key: string) => call(stack.gateway.url, '/v1/chat/completions', { key, body: { model: 'sim-gpt', messages: [{ role: 'user', content: 'hi [sim tokens=3]' }] } });

describe('settlement outbox and relay', function () {
  const stack = useStack();

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
      const rows = await env.db('reservations').whereIn('id', ids);
      assert.ok(rows.every((r) => r.status === 'held' && r.reported_at !== null && r.report.outcome === 'completed'), `every hold is held with its completed outcome recorded: ${JSON.stringify(rows.map((r) => [r.status, r.reported_at, r.report?.outcome]))}`);
    } finally {
      await stack.startWorker();
    }
    for (const id of ids) assert.equal((await settled(id)).status, 'settled');
    const inv = await checkInvariants(acct.accountId);
    assert.equal(Number(inv.account.reserved_credits), 0);
    assert.equal(inv.ledger.usage, inv.account.total_usage);
    assert.equal((await env.db('ledger').whereIn('reservation_id', ids).where({ kind: 'charge' })).length, 3);
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
        row = await env.db('reservations').where({ id }).first();
        if (row.settlement_workflow_id) break;
        await new Promise((res) => setTimeout(res, 100));
      } while (Date.now() < deadline);
      claimedBy = row.settlement_workflow_id;
      assert.match(claimedBy, /^settlement-/);
      assert.equal(row.status, 'held');
    } finally {
      await broken.stop();
      await stack.startWorker();
    }
    const row = await settled(id, 20_000);
    assert.equal(row.status, 'settled');
    assert.equal(row.settlement_workflow_id, claimedBy);
    assert.equal((await stack.temporal.workflow.getHandle(claimedBy).result()).settled, 1);
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
    assert.equal((await env.db('ledger').whereIn('reservation_id', ids).where({ kind: 'charge' })).length, n);
    const inv = await checkInvariants(acct.accountId);
    assert.equal(Number(inv.account.reserved_credits), 0);
    assert.equal(inv.account.pending_requests, 0);
    assert.equal(inv.ledger.usage, inv.account.total_usage);
  });
});
