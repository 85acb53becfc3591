import assert from 'node:assert/strict';
import Decimal from 'decimal.js';
import { env } from '../setup/env';
import { call, newAccount, settled, useStack } from '../helpers/stack';
import { cli, oneObject } from '../helpers/admin-cli';

// `new cycle` (issue 23, feature 4): a new purchase cycle carries the balance over and starts
// the cycle's credits and usage again; a request held across the start settles in the new cycle.

const ADMIN_TOKEN = 'issue-23-cycles-admin';
const admin = (base: string, p: string, body?: unknown) => call(base, p, { body, method: 'POST', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });

describe('issue 23 feature 4: a new billing cycle', function () {
  this.timeout(60_000);
  const stack = useStack({ adminToken: ADMIN_TOKEN });
  const creditsOf = async (key: string) => (await call(stack.gateway.url, '/v1/credits', { key })).json.data;

  it('admin API: the balance carries over, a grant is added, a held request settles against the new cycle', async () => {
    const acct = await newAccount({ credits: '10' });
    const used = await call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model: 'sim-gpt', messages: [{ role: 'user', content: 'hi [sim tokens=3]' }] } });
    assert.equal(used.status, 200, used.text);
    await settled(used.headers.get('x-gateway-request-id')!);
    const before = await creditsOf(acct.key);
    assert.ok(before.total_usage > 0, `usage before the cycle reset: ${before.total_usage}`);

    // A request holding credits while the cycle starts (the simulator answers after 1.5 s).
    const slow = call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model: 'sim-gpt', messages: [{ role: 'user', content: 'slow [sim tokens=3 latency=1500]' }] } });
    for (let i = 0; i < 50 && (await creditsOf(acct.key)).pending_requests === 0; i++) await new Promise((r) => setTimeout(r, 20));
    const held = await env.db('accounts').where({ id: acct.accountId }).first();
    assert.equal(held.pending_requests, 1, 'the slow request holds credits while the cycle starts');

    const r = await admin(stack.gateway.url, `/admin/accounts/${acct.accountId}/cycle`, { credits: '5' });
    assert.equal(r.status, 200, r.text);
    const remainingBefore = new Decimal(held.total_credits).sub(held.total_usage);
    assert.equal(new Decimal(r.json.carried_over).toString(), remainingBefore.toString(), 'the remaining balance carries over to the new cycle');
    assert.equal(new Decimal(r.json.remaining_credits).toString(), remainingBefore.plus(5).toString(), 'remaining credits are the carried-over balance plus the 5 granted');
    assert.equal(new Decimal(r.json.total_usage).toString(), new Decimal(held.reserved_credits).toString(), 'the new cycle\'s usage starts at the held request\'s reservation');

    const done = await slow;
    assert.equal(done.status, 200, done.text);
    const row = await settled(done.headers.get('x-gateway-request-id')!);
    const after = await creditsOf(acct.key);
    assert.equal(new Decimal(after.total_usage).toString(), new Decimal(row.charge).toString(), 'the new cycle\'s usage is the held request\'s charge');
    assert.equal(new Decimal(after.remaining_credits).toString(), remainingBefore.plus(5).plus(held.reserved_credits).sub(row.charge).toString(), 'remaining credits: carried over + 5 granted + the released hold - the charge');
    assert.equal(after.reserved_credits, 0, 'nothing is held once the slow request settled');
    assert.ok(Date.parse(after.cycle_started_at) > Date.parse(before.cycle_started_at), `a new cycle started: ${before.cycle_started_at} → ${after.cycle_started_at}`);
    // Every cycle start is kept, with the totals it ended.
    const cycles = await env.db('account_cycles').where({ account_id: acct.accountId });
    assert.equal(cycles.length, 1, 'the cycle start is recorded once');
    assert.equal(new Decimal(cycles[0].previous_total_usage).toString(), new Decimal(held.total_usage).toString(), 'the cycle record keeps the usage the old cycle ended with');
    assert.equal((await env.db('ledger').where({ account_id: acct.accountId, kind: 'grant' })).length, 2, 'the cycle added a second grant to the ledger');
  });

  it('CLI: account new-cycle, with the same validation as the admin API', async () => {
    const acct = await newAccount({ credits: '3' });
    const r = await cli('account', 'new-cycle', '--account', acct.accountId);
    assert.equal(r.code, 0, r.stdout);
    assert.equal(new Decimal(oneObject(r).total_credits).toString(), '3', 'the CLI\'s new cycle carries over the 3 credits');
    assert.equal(new Decimal(r.json.total_usage).toString(), '0', 'the CLI\'s new cycle starts with no usage');
    assert.equal((await cli('account', 'new-cycle', '--account', acct.accountId, '--credits', 'ten')).code, 2, 'a non-numeric --credits is a usage error (exit 2)');
    assert.equal((await cli('account', 'new-cycle', '--account', '00000000-0000-4000-8000-000000000000')).code, 1, 'an unknown account is an error (exit 1)');
    const bad = await admin(stack.gateway.url, `/admin/accounts/${acct.accountId}/cycle`, { credits: '1.5x' });
    assert.equal(bad.status, 400, `a malformed credits amount is refused with 400: ${bad.text}`);
    assert.equal((await admin(stack.gateway.url, `/admin/accounts/00000000-0000-4000-8000-000000000000/cycle`, {})).status, 404, 'the cycle of an unknown account is 404');
    assert.equal((await env.db('account_cycles').where({ account_id: acct.accountId })).length, 1, 'the refused requests started no cycle: only the CLI\'s one is recorded');
  });
});
