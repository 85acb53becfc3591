import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import Decimal from 'decimal.js';
import { createSettlementActivities } from '../../activities/credits/settlement';
import { GatewayError } from '../../domain/shared/errors';
import { createDb } from '../../platform/db';
import { HOLD_BATCH_SQL, holdElement } from '../../services/credits/hold-statement';
import { Reservations, type HoldRequest } from '../../services/credits/holds';
import { createKey } from '../../services/keys/keys';
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
    for (const r of refused) assert.equal(r.json.error.code, 'insufficient_quota', 'every refusal is for insufficient quota');

    await Promise.all(ok.map((r) => settled(r.headers.get('x-gateway-request-id')!)));
    const inv = await checkInvariants(acct.accountId);
    assert.equal(inv.account.pending_requests, 0, 'no request left pending');
    assert.equal(Number(inv.account.reserved_credits), 0, 'no credits left reserved');
    assert.ok(Number(inv.account.total_usage) <= Number(inv.account.total_credits), `usage ${inv.account.total_usage} within credits ${inv.account.total_credits}`);
    // Sum of charges equals total_usage exactly (decimal strings compared through the database).
    const sum = await env.db('reservations').where({ account_id: acct.accountId }).sum({ s: 'charge' }).first();
    assert.equal(sum!.s, inv.account.total_usage, 'the sum of the charges is the total usage');
    assert.equal(inv.ledger.usage, inv.account.total_usage, 'usage derivable from the ledger');
    const charged = ok.reduce((s, r) => s + Number(r.headers.get('x-gateway-cost')), 0);
    assert.ok(Math.abs(charged - Number(inv.account.total_usage)) < 1e-9, `the summed x-gateway-cost ${charged} equals the total usage ${inv.account.total_usage}`);
    // Rejected requests left no trace.
    const rows = await env.db('reservations').where({ account_id: acct.accountId }).count({ n: '*' }).first();
    assert.equal(Number(rows!.n), ok.length, 'a reservation row only for each answered request');
  });
});

// Group commit of holds (issue 31): one statement decides a whole batch, per account and per key
// in arrival order, exactly as single statements in that order would. Holds submitted in one tick
// to one Reservations form two batches: the first alone (nothing in flight), the rest together.
describe('hold batches (group commit)', function () {
  this.timeout(120_000);
  useStack();

  const TARIFF = { input_multiplier: '0.000002', output_multiplier: '0.000008', cache_multiplier: '0.0000005', cache_creation_multiplier: '0.0000025' };
  const request = (accountId: string, keyId: string, held: string): HoldRequest => ({
    reservationId: randomUUID(), accountId, keyId, model: 'sim-gpt', provider: 'simulator', endpoint: '/v1/chat/completions', tariff: TARIFF, held, complimentary: false,
  });

  /** The rule as the test states it: key limit first (a key at its limit refuses even 0), then the balance. */
  function expected(holds: Array<{ keyId: string; held: string }>, balance: string, limits: Map<string, string | null>): string[] {
    let left = new Decimal(balance);
    const keyLeft = new Map([...limits].map(([k, v]) => [k, v === null ? null : new Decimal(v)]));
    return holds.map((h) => {
      const k = keyLeft.get(h.keyId) ?? null;
      if (k !== null && !(k.gt(0) && k.gte(h.held))) return 'spend_limit';
      if (left.lt(h.held)) return 'insufficient_quota';
      left = left.minus(h.held);
      if (k !== null) keyLeft.set(h.keyId, k.minus(h.held));
      return 'taken';
    });
  }

  async function verdicts(res: Reservations, reqs: HoldRequest[]): Promise<string[]> {
    const settledAll = await Promise.allSettled(reqs.map((r) => res.hold(r)));
    return settledAll.map((s) => (s.status === 'fulfilled' ? 'taken' : s.reason instanceof GatewayError ? (s.reason.code === 'key_spend_limit_exceeded' ? 'spend_limit' : s.reason.code) : `error ${String(s.reason)}`));
  }

  it('many holds on one account where the balance admits only some: exactly those, in arrival order, in one batch statement', async () => {
    const acct = await newAccount({ credits: '10' });
    const sizes = ['4', '7', '5', '0.5', '3', '0.25', '2', '0.125', '9', '0.0625', '1', '0.03125', '0'];
    const reqs = sizes.map((s) => request(acct.accountId, acct.keyId, s));
    const got = await verdicts(new Reservations(env.db, { logger: env.logger }), reqs);
    const want = expected(reqs, '10', new Map());
    assert.deepEqual(got, want, 'each hold admitted exactly when what the earlier holds left allows it');
    assert.ok(want.includes('insufficient_quota') && want.filter((v) => v === 'taken').length > 3, 'the case binds: some admitted after a refusal');

    const rows = await env.db('reservations').where({ account_id: acct.accountId }).select('id', 'held_credits', 'balance_before', 'created_at');
    const taken = reqs.filter((_, i) => want[i] === 'taken');
    assert.deepEqual(rows.map((r) => r.id).sort(), taken.map((r) => r.reservationId).sort(), 'a row for each admitted hold and none for the refused');
    // One transaction's now(): the holds after the first went out as one statement.
    assert.ok(new Set(rows.map((r) => r.created_at.getTime())).size <= 2, `at most two batch statements, saw ${new Set(rows.map((r) => r.created_at.getTime())).size}`);
    // balance_before of each is what the earlier admitted holds of its batch left.
    let left = new Decimal(10);
    for (const r of taken) {
      assert.equal(new Decimal(rows.find((x) => x.id === r.reservationId)!.balance_before).toString(), left.toString(), `balance before ${r.reservationId}`);
      left = left.minus(r.held);
    }
    const inv = await checkInvariants(acct.accountId);
    const sum = taken.reduce((s, r) => s.plus(r.held), new Decimal(0));
    assert.equal(new Decimal(inv.account.total_usage).toString(), sum.toString(), 'usage is the admitted holds');
    assert.equal(new Decimal(inv.account.reserved_credits).toString(), sum.toString(), 'reserved is the admitted holds');
    assert.equal(inv.account.pending_requests, taken.length, 'pending counts the admitted holds');
    assert.ok(new Decimal(inv.account.total_usage).lte(inv.account.total_credits), 'nothing overdrawn');
    assert.equal(inv.ledger.usage, inv.account.total_usage, 'a hold ledger row per admitted hold');
    assert.equal(Number(inv.reservations.pending), taken.length, 'held rows');
  });

  it('a hold alone (HOLD_ONE) decides and writes as the batch function does for a batch of one', async () => {
    const sizes = ['4', '7', '5', '0.5', '3', '0', '2.5', '9'];
    const alone = await newAccount({ credits: '10' });
    const viaFunction = await newAccount({ credits: '10' });
    const res = new Reservations(env.db, { logger: env.logger });
    const outcomes: Array<[string, string]> = [];
    for (const size of sizes) {
      // one at a time: each is a batch of one, so the process sends HOLD_ONE
      const [got] = await verdicts(res, [request(alone.accountId, alone.keyId, size)]);
      const t = { ...request(viaFunction.accountId, viaFunction.keyId, size), modality: 'text', ownerWorkflowId: null, processId: null, trackKeySpend: false };
      const row = (await env.db.raw(HOLD_BATCH_SQL, [JSON.stringify([holdElement(t, 0)]), false, false])).rows[0];
      outcomes.push([got, row.verdict]);
    }
    assert.deepEqual(outcomes.map(([a]) => a), outcomes.map(([, f]) => f), 'the same verdict for each hold');
    assert.deepEqual(outcomes.map(([a]) => a), expected(sizes.map((held) => ({ keyId: alone.keyId, held })), '10', new Map()), 'and the rule as the test states it');
    const columns = async (accountId: string) => {
      const a = await env.db('accounts').where({ id: accountId }).first('total_usage', 'reserved_credits', 'pending_requests');
      const rows = await env.db('reservations').where({ account_id: accountId }).orderBy('created_at').select('held_credits', 'balance_before', 'status', 'key_spend_tracked', 'modality', 'input_multiplier');
      const ledger = await env.db('ledger').where({ account_id: accountId }).orderBy('id').select('kind', 'amount');
      return { a, rows, ledger };
    };
    assert.deepEqual(await columns(alone.accountId), await columns(viaFunction.accountId), 'the same account columns, reservation rows and ledger rows');
    const inv = await checkInvariants(alone.accountId);
    assert.equal(inv.ledger.usage, inv.account.total_usage, 'a hold ledger row per admitted hold');
  });

  it('spend-limited keys in one batch: each key limit and the balance bind per hold in arrival order', async () => {
    const acct = await newAccount({ credits: '8' });
    const k1 = await createKey(env.db, { accountId: acct.accountId, format: 'mt', settings: { spend_limit: '5' } });
    const k2 = await createKey(env.db, { accountId: acct.accountId, format: 'mt', settings: { spend_limit: '3' } });
    const k3 = await createKey(env.db, { accountId: acct.accountId, format: 'mt', settings: { spend_limit: '2' } });
    await env.db('api_keys').where({ id: k3.id }).update({ spend: '2' }); // at its limit: refuses even a hold of 0
    const plan: Array<[string, string]> = [[k1.id, '2'], [k2.id, '2'], [k1.id, '4'], [k2.id, '1.5'], [k1.id, '3'], [k3.id, '0'], [acct.keyId, '1'], [k2.id, '1'], [k1.id, '0.5'], [acct.keyId, '0.75'], [k1.id, '0.5']];
    const reqs = plan.map(([keyId, held]) => request(acct.accountId, keyId, held));
    const got = await verdicts(new Reservations(env.db, { logger: env.logger, trackKeySpend: true }), reqs);
    const want = expected(reqs, '8', new Map([[k1.id, '5'], [k2.id, '3'], [k3.id, '0'], [acct.keyId, null]]));
    assert.deepEqual(got, want, 'verdicts per hold');
    assert.ok(want.includes('spend_limit') && want.includes('insufficient_quota'), 'both limits bind in this batch');
    for (const [k, limit] of [[k1.id, '5'], [k2.id, '3']]) {
      const key = await env.db('api_keys').where({ id: k }).first();
      const held = reqs.filter((r, i) => r.keyId === k && want[i] === 'taken').reduce((s, r) => s.plus(r.held), new Decimal(0));
      assert.equal(new Decimal(key.spend).toString(), held.toString(), `spend of key ${k} is its admitted holds`);
      assert.ok(new Decimal(key.spend).lte(limit), `spend of key ${k} within its limit`);
    }
    const inv = await checkInvariants(acct.accountId);
    assert.ok(new Decimal(inv.account.total_usage).lte(inv.account.total_credits), 'nothing overdrawn');
    assert.equal(inv.ledger.usage, inv.account.total_usage, 'ledger and usage agree');
  });

  it('mixed accounts in opposite orders from two processes, settled meanwhile: no deadlock, every invariant', async () => {
    const accounts = await Promise.all(Array.from({ length: 6 }, () => newAccount({ credits: '3' })));
    const { settleBatch } = createSettlementActivities(env.db);
    // Two processes: each its own pool and its own batches.
    const pools = [createDb(env.databaseUrl, 4), createDb(env.databaseUrl, 4)];
    try {
      const procs = pools.map((d) => new Reservations(d, { logger: env.logger }));
      const taken: string[] = [];
      const settling: Array<Promise<unknown>> = [];
      for (let round = 0; round < 8; round++) {
        const order = round % 2 === 0 ? accounts : [...accounts].reverse();
        const reqs = procs.map((_, p) => (p === 0 ? order : [...order].reverse()).flatMap((a) => [request(a.accountId, a.keyId, '0.25'), request(a.accountId, a.keyId, '0.125')]));
        const results = await Promise.allSettled(procs.flatMap((res, p) => reqs[p].map((r) => res.hold(r))));
        for (const r of results) {
          if (r.status === 'rejected') assert.ok(r.reason instanceof GatewayError && r.reason.code === 'insufficient_quota', `only refusals, got ${String(r.reason)}`);
          else taken.push(r.value.reservationId);
        }
        // Settle what was taken so far, set-based, while the next round holds.
        const ids = taken.splice(0);
        const report = JSON.stringify({ outcome: 'completed', billable: true, usage: { prompt_tokens: 10, completion_tokens: 10, cached_tokens: 0, cache_write_tokens: 0, reasoning_tokens: null }, providerCost: null, httpStatus: 200 });
        if (ids.length) await env.db('settlement_outbox').insert(ids.map((id) => ({ reservation_id: id, report })));
        settling.push(settleBatch(ids.filter((_, i) => i % 2 === 0)), settleBatch(ids.filter((_, i) => i % 2 === 1)));
      }
      await Promise.all(settling);
    } finally {
      await Promise.all(pools.map((d) => d.destroy()));
    }
    for (const a of accounts) {
      const inv = await checkInvariants(a.accountId);
      assert.equal(inv.account.pending_requests, 0, 'every hold settled');
      assert.equal(Number(inv.account.reserved_credits), 0, 'nothing reserved');
      assert.ok(new Decimal(inv.account.total_usage).lte(inv.account.total_credits), 'nothing overdrawn');
      assert.equal(inv.ledger.usage, inv.account.total_usage, 'ledger and usage agree');
      assert.equal(new Decimal(inv.reservations.charged).toString(), new Decimal(inv.account.total_usage).toString(), 'usage is the charges');
    }
  });
});
