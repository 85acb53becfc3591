import assert from 'node:assert/strict';
import { env } from '../setup/env';
import { call, checkInvariants, newAccount, settled, useStack, type TestAccount } from '../helpers/stack';

// Issue 33 item 1: a client that leaves before the provider's first byte is not billed for an
// answer it never got. The gateway watches the client from the moment the request is accepted,
// aborts the provider call (the simulator counts the call closed during its latency) and settles
// the hold `cancelled` at 0.

const simStats = async () => (await call(env.simulator.url, '/_sim/stats')).json;

/** Posts and gives up after `afterMs` (the client closes its connection); resolves once it has. */
async function giveUp(url: string, key: string, body: unknown, afterMs = 1000): Promise<void> {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), afterMs);
  try {
    const res = await fetch(url, { method: 'POST', signal: ctl.signal, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' }, body: JSON.stringify(body) });
    await res.text();
    assert.fail(`the request answered ${res.status} before the client gave up`);
  } catch (err) {
    assert.equal((err as Error).name, 'AbortError', `the client gave up: ${String(err)}`);
  } finally {
    clearTimeout(timer);
  }
}

/** The account's one reservation, once resolved. */
async function onlyReservation(accountId: string) {
  let rows: Array<{ id: string }> = [];
  for (const deadline = Date.now() + 5000; rows.length === 0 && Date.now() < deadline; await new Promise((r) => setTimeout(r, 50))) {
    rows = await env.db('reservations').where({ account_id: accountId }).select('id');
  }
  assert.equal(rows.length, 1, 'one hold was taken');
  return settled(rows[0].id);
}

describe('a client that leaves before the answer (issue 33 item 1)', function () {
  const stack = useStack({ upstreamTimeoutMs: 10_000 });
  let acct: TestAccount;
  beforeEach(async () => {
    acct = await newAccount({ credits: '100' });
    await call(env.simulator.url, '/_sim/stats', { method: 'DELETE' });
  });

  const cases: Array<{ name: string; path: string; body: Record<string, unknown>; upstream?: string }> = [
    { name: 'a chat stream', path: '/v1/chat/completions', body: { model: 'sim-gpt', stream: true, messages: [{ role: 'user', content: 'slow [sim latency=4000]' }] } },
    { name: 'a chat completion', path: '/v1/chat/completions', body: { model: 'sim-gpt', messages: [{ role: 'user', content: 'slow [sim latency=4000]' }] } },
    { name: 'a messages stream', path: '/v1/messages', body: { model: 'sim-claude', max_tokens: 100, stream: true, messages: [{ role: 'user', content: 'slow [sim latency=4000]' }] } },
    { name: 'a message', path: '/v1/messages', body: { model: 'sim-claude', max_tokens: 100, messages: [{ role: 'user', content: 'slow [sim latency=4000]' }] } },
    { name: 'a responses stream', path: '/v1/responses', body: { model: 'sim-gpt', stream: true, input: 'slow [sim latency=4000]' }, upstream: '/v1/chat/completions' },
    { name: 'a response', path: '/v1/responses', body: { model: 'sim-gpt', input: 'slow [sim latency=4000]' }, upstream: '/v1/chat/completions' },
    { name: 'an image', path: '/v1/images/generations', body: { model: 'sim-image-1', prompt: 'slow [sim latency=4000]' } },
  ];
  for (const c of cases) {
    it(`${c.name}: the provider call is aborted and the hold settles cancelled at 0`, async () => {
      await giveUp(stack.gateway.url + c.path, acct.key, c.body);
      const row = await onlyReservation(acct.accountId);
      assert.equal(row.status, "cancelled", `the hold is cancelled, not ${row.status}: ${JSON.stringify(row)}`);
      assert.equal(row.outcome, 'cancelled', 'the outcome says the client cancelled');
      assert.equal(Number(row.charge), 0, `nothing charged for output never sent: ${row.charge}`);
      assert.equal(row.http_status, 499, 'the client-closed status');
      // The simulator saw its caller close the connection during the latency: the gateway aborted the call.
      let closed = 0;
      for (const deadline = Date.now() + 3000; closed === 0 && Date.now() < deadline; await new Promise((r) => setTimeout(r, 50))) {
        closed = (await simStats()).closed_early?.[c.upstream ?? c.path] ?? 0;
      }
      assert.equal(closed, 1, `the upstream call to ${c.upstream ?? c.path} was aborted`);
      const inv = await checkInvariants(acct.accountId);
      assert.equal(Number(inv.account.total_usage), 0, 'no usage left on the account');
      assert.equal(inv.account.pending_requests, 0, 'no hold left');
      assert.equal(Number(inv.ledger.usage), 0, 'the ledger nets to 0');
    });
  }
});
