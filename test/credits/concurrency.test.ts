import assert from 'node:assert/strict';
import { env } from '../setup/env';
import { call, checkInvariants, newAccount, settled, useStack } from '../helpers/stack';

describe('reservations under concurrency', function () {
  this.timeout(120_000);
  const stack = useStack();

  it('200 parallel requests against a balance for a few: no overspend, every hold resolved, charges add up', async () => {
    // Each request holds about 0.0009 credits (max_tokens 100 at 0.000008 plus the prompt bound).
    const acct = await newAccount({ credits: '0.004' });
    const body = { model: 'sim-gpt', max_tokens: 100, messages: [{ role: 'user', content: 'go [sim tokens=20 latency=30]' }] };
    const results = await Promise.all(Array.from({ length: 200 }, () => call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body })));
    const ok = results.filter((r) => r.status === 200);
    const refused = results.filter((r) => r.status === 402);
    assert.equal(ok.length + refused.length, 200, `unexpected: ${JSON.stringify(results.find((r) => r.status !== 200 && r.status !== 402)?.json)}`);
    assert.ok(ok.length >= 1 && ok.length < 200, `ok=${ok.length}`);
    for (const r of refused) assert.equal(r.json.error.code, 'insufficient_quota');

    await Promise.all(ok.map((r) => settled(r.headers.get('x-gateway-request-id')!)));
    const inv = await checkInvariants(acct.accountId);
    assert.equal(inv.account.pending_requests, 0);
    assert.equal(Number(inv.account.reserved_credits), 0);
    assert.ok(Number(inv.account.total_usage) <= Number(inv.account.total_credits), `usage ${inv.account.total_usage} within credits ${inv.account.total_credits}`);
    // Sum of charges equals total_usage exactly (decimal strings compared through the database).
    const sum = await env.db('reservations').where({ account_id: acct.accountId }).sum({ s: 'charge' }).first();
    assert.equal(sum!.s, inv.account.total_usage);
    assert.equal(inv.ledger.usage, inv.account.total_usage);
    const charged = ok.reduce((s, r) => s + Number(r.headers.get('x-gateway-cost')), 0);
    assert.ok(Math.abs(charged - Number(inv.account.total_usage)) < 1e-9, `the summed x-gateway-cost ${charged} equals the total usage ${inv.account.total_usage}`);
    // Rejected requests left no trace.
    const rows = await env.db('reservations').where({ account_id: acct.accountId }).count({ n: '*' }).first();
    assert.equal(Number(rows!.n), ok.length);
  });
});
