import assert from 'node:assert/strict';
import { readyUrl } from '../helpers/child-ready';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import Decimal from 'decimal.js';
import path from 'node:path';
import { sweepHoldsWorkflow } from '../../workflows/credits/sweeper';
import { call, checkInvariants, newAccount, settled, useStack, type Stack } from '../helpers/stack';
import { env } from '../setup/env';

// Liveness, not age, decides abandonment (issue 14 item 4): the sweeper leaves a long stream of a
// live API process alone, and releases the hold of an API process killed mid-request.

const sweep = (stack: Stack) => stack.temporal.workflow.execute(sweepHoldsWorkflow, { taskQueue: stack.taskQueue, workflowId: `sweep-${randomUUID()}`, args: [] });

/** Starts a streaming chat and resolves once its first bytes arrived; the rest streams on. */
async function openStream(base: string, key: string, content: string): Promise<{ requestId: string; done: Promise<string> }> {
  const res = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'sim-gpt', stream: true, messages: [{ role: 'user', content }] }),
  });
  assert.equal(res.status, 200, 'the streaming chat is answered with 200');
  const reader = res.body!.getReader();
  await reader.read();
  const done = (async () => {
    let text = '';
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += Buffer.from(r.value).toString();
    return text;
  })();
  return { requestId: res.headers.get('x-gateway-request-id')!, done };
}

/** A gateway API in a process of its own (test/helpers/gateway-child.ts), and its URL once it listens. */
async function gatewayChild(stack: Stack): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, ['--require', 'tsx/cjs', path.join(__dirname, '../helpers/gateway-child.ts')], {
    cwd: path.join(__dirname, '../..'),
    env: { ...process.env, DATABASE_URL: env.databaseUrl, TEMPORAL_ADDRESS: env.temporalAddress, TASK_QUEUE: stack.taskQueue, HEARTBEAT_MS: '300' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const url = await readyUrl(child, 'gateway child');
  return { child, url };
}

describe('hold sweeper: liveness of the API process decides', function () {
  const stack = useStack({ heartbeatMs: 300, abandonment: { deadAfterMs: 1500, unrecordedOlderThanMs: 0 } });

  it('a stream of a live API process is never released, however old; it settles with its charge', async function () {
    const acct = await newAccount({ credits: '5' });
    const s = await openStream(stack.gateway.url, acct.key, 'long one [sim tokens=20 chunk_delay=150]');
    await new Promise((r) => setTimeout(r, 1800)); // older than the dead-process bound, still streaming
    const result = await sweep(stack);
    assert.ok(!result.released.includes(s.requestId), 'the sweeper released a live stream');
    assert.equal((await env.db('reservations').where({ id: s.requestId }).first()).status, 'held', "the live stream's hold is still held after the sweep");
    await s.done;
    const row = await settled(s.requestId);
    assert.equal(row.status, 'settled', 'the live stream settles once it ends');
    assert.ok(Number(row.charge) > 0, `the request was charged: ${row.charge}`);
  });

  it('the hold of an API process killed mid-stream is released once its heartbeat stops, exactly once', async function () {
    const acct = await newAccount({ credits: '5' });
    const { child, url } = await gatewayChild(stack);
    try {
      const s = await openStream(url, acct.key, 'cut short [sim tokens=50 chunk_delay=200]');
      s.done.catch(() => {}); // the connection dies with the process
      child.kill('SIGKILL');
      // Not yet: the process may only be slow until its heartbeat is older than the bound.
      assert.ok(!(await sweep(stack)).released.includes(s.requestId), `the hold ${s.requestId} of a just-killed process is not released before its heartbeat is stale`);
      await new Promise((r) => setTimeout(r, 2000));
      const result = await sweep(stack);
      assert.ok(result.released.includes(s.requestId), `the hold ${s.requestId} of the dead process is released: ${JSON.stringify(result.released)}`);
      const row = await env.db('reservations').where({ id: s.requestId }).first();
      assert.equal(row.status, 'released', "the dead process's hold is released");
      assert.equal(row.outcome, 'abandoned', 'the released hold is marked abandoned');
      assert.ok(!(await sweep(stack)).released.includes(s.requestId), 'released once');
      const inv = await checkInvariants(acct.accountId);
      assert.equal(Number(inv.account.reserved_credits), 0, 'nothing stays reserved after the release');
      assert.equal(inv.account.pending_requests, 0, 'no request is left pending after the release');
      assert.equal(inv.ledger.usage, inv.account.total_usage, 'ledger and usage agree after the release');
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('an API process killed with a batch of holds in flight and more queued: the batch commits whole or not at all, the queue is gone, the sweeper releases what was held', async function () {
    this.timeout(90_000);
    const [a, b] = await Promise.all([newAccount({ credits: '0.005' }), newAccount({ credits: '5' })]);
    const { child, url } = await gatewayChild(stack);
    const body = (content: string) => ({ model: 'sim-gpt', max_tokens: 100, messages: [{ role: 'user', content: `${content} [sim tokens=4]` }] });
    const waitingHolds = async (n: number) => {
      for (let i = 0; ; i++) {
        const w = await env.db.raw(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%credits_take_hold%'`);
        if (w.rows[0].n >= n) return;
        assert.ok(i < 400, 'no hold batch waited on the lock');
        await new Promise((r) => setTimeout(r, 25));
      }
    };
    const lockB = await env.db.transaction();
    const lockA = await env.db.transaction();
    try {
      const warm = await call(url, '/v1/chat/completions', { key: a.key, body: body('warm the key cache') });
      assert.equal(warm.status, 200, 'warm-up answered');
      await settled(warm.headers.get('x-gateway-request-id')!);
      const hold = (await env.db('reservations').where({ id: warm.headers.get('x-gateway-request-id')! }).first()).held_credits;
      // B's row locked: the next hold batch (one hold on B) waits in PostgreSQL; A's holds queue in the process behind it.
      await lockB('accounts').where({ id: b.accountId }).forUpdate();
      const blocked = call(url, '/v1/chat/completions', { key: b.key, body: body('in flight') });
      await waitingHolds(1);
      const a1 = await lockA('accounts').where({ id: a.accountId }).forUpdate().first();
      const admits = new Decimal(a1.total_credits).minus(a1.total_usage).div(hold).floor().toNumber();
      assert.ok(admits >= 1 && admits < 19, `A's balance admits some of the 19 holds (${admits})`);
      const queued = Array.from({ length: 19 }, (_, i) => call(url, '/v1/chat/completions', { key: a.key, body: body(`queued ${i}`) }).catch(() => null));
      await new Promise((r) => setTimeout(r, 1500)); // the 19 reach the process and queue behind the batch in flight
      await lockB.commit(); // B's batch returns; A's 19 go out as one batch and wait on A's lock
      assert.equal((await blocked).status, 200, 'the hold on B was answered');
      await waitingHolds(1);
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
      await lockA.commit(); // PostgreSQL runs the dead client's batch to its end
      await Promise.all(queued);
      let rows: Array<{ status: string }> = [];
      for (let i = 0; i < 100; i++) {
        const busy = await env.db.raw(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE query LIKE '%credits_take_hold%' AND state = 'active' AND pid <> pg_backend_pid()`);
        if (busy.rows[0].n === 0) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      rows = await env.db('reservations').where({ account_id: a.accountId }).whereNot({ id: warm.headers.get('x-gateway-request-id')! }).select('status');
      assert.ok(rows.length === 0 || rows.length === admits, `the batch of A is one transaction: 0 or ${admits} holds, got ${rows.length}`);
      const inv = await checkInvariants(a.accountId);
      assert.equal(Number(inv.reservations.pending), inv.account.pending_requests, 'pending counts the held rows');
      assert.equal(new Decimal(inv.reservations.reserved).toString(), new Decimal(inv.account.reserved_credits).toString(), 'reserved is the held rows');
      assert.ok(new Decimal(inv.account.total_usage).lte(inv.account.total_credits), 'nothing overdrawn');
      assert.equal(inv.ledger.usage, inv.account.total_usage, 'ledger and usage agree');
      // Dead: every hold of A's batch is released at 0, once.
      await new Promise((r) => setTimeout(r, 2000));
      await sweep(stack);
      const after = await checkInvariants(a.accountId);
      assert.equal(after.account.pending_requests, 0, 'no hold left');
      assert.equal(Number(after.account.reserved_credits), 0, 'nothing reserved');
      assert.equal(after.ledger.usage, after.account.total_usage, 'ledger and usage agree after the sweep');
      const released = await env.db('reservations').where({ account_id: a.accountId, status: 'released', outcome: 'abandoned' }).count({ n: '*' }).first();
      assert.equal(Number(released!.n), rows.length, 'each hold of the dead batch released');
    } finally {
      await lockB.rollback().catch(() => {});
      await lockA.rollback().catch(() => {});
      child.kill('SIGKILL');
    }
  });
});
