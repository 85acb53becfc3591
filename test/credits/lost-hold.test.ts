import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import Decimal from 'decimal.js';
import { createSettlementActivities } from '../../activities/credits/settlement';
import { createDb } from '../../platform/db';
import { HOLD_BATCH_SQL, HOLD_ONE, holdElement, holdOneValues, type HoldTerms } from '../../services/credits/hold-statement';
import { Reservations, type HoldRequest } from '../../services/credits/holds';
import { recordOutcome } from '../../services/credits/outbox';
import { call, checkInvariants, newAccount, settled, useStack } from '../helpers/stack';
import { loseHold } from '../helpers/pg-crash';
import { env } from '../setup/env';

// A hold commits without waiting for the disk (issue 14 item 5); a PostgreSQL crash can lose it.
// Here the loss is simulated exactly as recovery leaves it (test/helpers/pg-crash.ts loseHold: the
// rows gone, the account's and key's columns back); the outcome write then writes the hold again
// with its outcome, and settlement charges it once. The real crash: postgres-crash.test.ts.

const TARIFF = { input_multiplier: '0.000002', output_multiplier: '0.000008', cache_multiplier: '0.0000005', cache_creation_multiplier: '0.0000025' };
const COMPLETED = { outcome: 'completed' as const, billable: true, usage: { prompt_tokens: 10, completion_tokens: 5, cached_tokens: 0, cache_write_tokens: 0, reasoning_tokens: null }, providerCost: null, httpStatus: 200 };

/** Every balance derivable from the ledger and the reservation rows (DESIGN.md section 3). */
async function assertBalanced(accountId: string) {
  const inv = await checkInvariants(accountId);
  const same = (a: string, b: string, what: string) => assert.ok(new Decimal(a).eq(b), `${what}: ${a} ≠ ${b}`);
  same(inv.ledger.usage, inv.account.total_usage, 'usage = holds − releases + charges in the ledger');
  same(inv.ledger.grants, inv.account.total_credits, 'credits = grants in the ledger');
  same(inv.reservations.reserved, inv.account.reserved_credits, 'reserved = the sum of held rows');
  assert.equal(inv.reservations.pending, inv.account.pending_requests, 'pending = the count of held rows');
  assert.ok(new Decimal(inv.account.total_usage).lte(inv.account.total_credits), `usage ${inv.account.total_usage} within credits ${inv.account.total_credits}`);
  return inv;
}

async function ledgerKinds(reservationId: string): Promise<string[]> {
  return (await env.db('ledger').where({ reservation_id: reservationId }).orderBy('id')).map((l) => l.kind);
}

describe('a hold lost in a PostgreSQL crash (simulated)', function () {
  this.timeout(60_000);
  const stack = useStack();

  it('through the gateway: the outcome write writes the lost hold again and it is charged once, the cost the answer showed', async function () {
    const acct = await newAccount({ credits: '5' });
    const answer = call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model: 'sim-gpt', messages: [{ role: 'user', content: 'slow [sim tokens=6 latency=1000]' }] } });
    // The hold is committed before the request is forwarded; the provider takes a second.
    let held: { id: string } | undefined;
    for (let i = 0; i < 100 && !held; i++) {
      held = await env.db('reservations').where({ account_id: acct.accountId, status: 'held' }).first('id');
      if (!held) await new Promise((r) => setTimeout(r, 20));
    }
    assert.ok(held, 'no hold seen while the provider works');
    await loseHold(env.db, held.id);
    assert.equal(Number((await checkInvariants(acct.accountId)).account.total_usage), 0, 'the crash took the hold away');

    const r = await answer;
    assert.equal(r.status, 200, r.text);
    const id = r.headers.get('x-gateway-request-id')!;
    assert.equal(id, held.id, 'the answer\'s request id is the lost hold\'s id');
    const row = await settled(id);
    assert.equal(row.status, 'settled', 'the request settles');
    assert.ok(row.hold_recreated_at, 'marked as written again');
    assert.equal(row.charge, (await env.db.raw('SELECT ?::numeric(38,12) AS c', [r.headers.get('x-gateway-cost')])).rows[0].c, 'charged the cost the answer showed');
    assert.deepEqual(await ledgerKinds(id), ['hold', 'release', 'charge'], 'the ledger: hold written again, released, charged once');
    const inv = await assertBalanced(acct.accountId);
    assert.equal(inv.account.total_usage, row.charge, 'the account\'s usage is the charge');
    assert.equal(inv.account.pending_requests, 0, 'no request left pending');
  });

  it('a streamed answer whose hold was lost mid-stream is charged once', async function () {
    const acct = await newAccount({ credits: '5' });
    const res = await fetch(`${stack.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${acct.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sim-gpt', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'stream [sim tokens=12 chunk_delay=40]' }] }),
    });
    assert.equal(res.status, 200, 'the stream starts');
    const id = res.headers.get('x-gateway-request-id')!;
    const reader = res.body!.getReader();
    await reader.read();
    await loseHold(env.db, id);
    let text = '';
    for (let c = await reader.read(); !c.done; c = await reader.read()) text += Buffer.from(c.value).toString();
    assert.match(text, /\[DONE\]/, 'the stream ends with [DONE]');
    const row = await settled(id);
    assert.equal(row.status, 'settled', 'the request settles');
    assert.ok(Number(row.charge) > 0, `the request was charged: ${row.charge}`);
    assert.ok(row.hold_recreated_at, `the lost hold was re-written: ${JSON.stringify(row)}`);
    assert.deepEqual(await ledgerKinds(id), ['hold', 'release', 'charge'], 'the ledger: hold written again, released, charged once');
    await assertBalanced(acct.accountId);
  });

  it('with the key’s spend (keyed variant): written again into the spend, settled to the charge; a repeated outcome write changes nothing', async function () {
    const acct = await newAccount({ credits: '10' });
    await env.db('api_keys').where({ id: acct.keyId }).update({ spend_limit: '5' });
    const reservations = new Reservations(env.db, { logger: env.logger, trackKeySpend: true, processId: randomUUID() });
    const h: HoldRequest = { reservationId: randomUUID(), accountId: acct.accountId, keyId: acct.keyId, model: 'sim-gpt', provider: 'simulator', endpoint: '/v1/chat/completions', tariff: TARIFF, held: '0.5', complimentary: false };
    const hold = await reservations.hold(h);
    await loseHold(env.db, h.reservationId);
    assert.equal((await env.db('api_keys').where({ id: acct.keyId }).first()).spend, '0.000000000000', 'the lost hold left no spend on the key');

    await hold.report(COMPLETED);
    const row = await env.db('reservations as r').leftJoin('settlement_outbox as o', 'o.reservation_id', 'r.id').where('r.id', h.reservationId).first('r.*', 'o.report', 'o.recorded_at');
    assert.equal(row.status, 'held', 'reported, not yet settled');
    assert.equal(row.held_credits, '0.500000000000', 'the hold written again at its amount');
    assert.equal(row.key_spend_tracked, true, 'the re-written hold counts in the key\'s spend');
    assert.equal(row.input_multiplier, '0.000002000000', 'the tariff copied at hold time');
    assert.equal(row.report.outcome, 'completed', 'the outcome is recorded');
    assert.ok(row.recorded_at && row.hold_recreated_at, `reported and its hold re-written: recorded_at ${row.recorded_at}, hold_recreated_at ${row.hold_recreated_at}`);
    assert.equal((await env.db('api_keys').where({ id: acct.keyId }).first()).spend, '0.500000000000', 'the re-written hold is back in the key\'s spend');

    // The same outcome written again (a retry whose first attempt did commit): nothing more.
    const terms: HoldTerms = { ...h, modality: 'text', ownerWorkflowId: null, processId: row.api_process_id, trackKeySpend: true };
    assert.equal(await recordOutcome(env.db, h.reservationId, COMPLETED, terms), null, 'a repeated outcome write records nothing');
    assert.deepEqual(await ledgerKinds(h.reservationId), ['hold'], 'a repeated outcome write adds no ledger row');

    const { settleBatch } = createSettlementActivities(env.db);
    assert.deepEqual(await settleBatch([h.reservationId]), { settled: 1, charged: '0.00006' }, 'the first settlement charges once');
    assert.deepEqual(await settleBatch([h.reservationId]), { settled: 0, charged: '0' }, 'a second settlement finds nothing to do');
    assert.deepEqual(await ledgerKinds(h.reservationId), ['hold', 'release', 'charge'], 'the ledger: hold, release, one charge');
    assert.equal((await env.db('api_keys').where({ id: acct.keyId }).first()).spend, '0.000060000000', 'the key\'s spend is settled to the charge');
    const inv = await assertBalanced(acct.accountId);
    assert.equal(inv.account.total_usage, '0.000060000000', 'the account\'s usage is the charge');
  });

  it('room the lost hold left, taken by another hold meanwhile: written again at what still fits; the balance and the key limit hold', async function () {
    const acct = await newAccount({ credits: '1' });
    await env.db('api_keys').where({ id: acct.keyId }).update({ spend_limit: '0.9' });
    const reservations = new Reservations(env.db, { logger: env.logger, trackKeySpend: true, processId: randomUUID() });
    const pricey = { ...TARIFF, output_multiplier: '0.01' }; // 100 completion tokens: 1 credit before the cap
    const request = (held: string): HoldRequest => ({ reservationId: randomUUID(), accountId: acct.accountId, keyId: acct.keyId, model: 'sim-gpt', provider: 'simulator', endpoint: '/v1/chat/completions', tariff: pricey, held, complimentary: false });
    const lostRequest = request('0.6');
    const lost = await reservations.hold(lostRequest);
    await loseHold(env.db, lostRequest.reservationId);
    const other = await reservations.hold(request('0.7')); // fits only because the first hold is gone
    const big = { ...COMPLETED, usage: { ...COMPLETED.usage, completion_tokens: 100 } };

    await lost.report(big);
    const row = await env.db('reservations').where({ id: lostRequest.reservationId }).first();
    assert.equal(row.held_credits, '0.200000000000', 'the key’s 0.9 less the other hold’s 0.7');
    await other.report(big);
    const { settleBatch } = createSettlementActivities(env.db);
    await settleBatch([lostRequest.reservationId, other.reservationId]);
    const rows = await env.db('reservations').whereIn('id', [lostRequest.reservationId, other.reservationId]);
    assert.ok(rows.every((r) => r.status === 'settled'), `both settled: ${rows.map((r) => r.status).join(', ')}`);
    assert.equal(rows.find((r) => r.id === lostRequest.reservationId).charge, '0.200000000000', 'charged what was held, never more');
    const key = await env.db('api_keys').where({ id: acct.keyId }).first();
    assert.equal(key.spend, '0.900000000000', 'the key\'s spend reaches its limit exactly');
    assert.ok(Number(key.spend) <= Number(key.spend_limit), `key spend ${key.spend} within its limit ${key.spend_limit}`);
    const inv = await assertBalanced(acct.accountId);
    assert.equal(inv.account.total_usage, '0.900000000000', 'the account\'s usage is both charges');
  });

  it('the hold statement turns synchronous_commit off for its own transaction only, and not for a hold a workflow resolves', async function () {
    const acct = await newAccount({ credits: '5' });
    const terms = (ownerWorkflowId: string | null): HoldTerms => ({ reservationId: randomUUID(), accountId: acct.accountId, keyId: acct.keyId, model: 'sim-gpt', provider: 'simulator', endpoint: '/v1/chat/completions', tariff: TARIFF, held: '0.1', complimentary: false, modality: 'text', ownerWorkflowId, processId: null, trackKeySpend: false });
    for (const [owner, expected] of [[null, 'off'], ['video-x', 'on']] as const) {
      await env.db
        .transaction(async (trx) => {
          const t = terms(owner);
          await trx.raw(HOLD_BATCH_SQL, [JSON.stringify([holdElement(t, 0)]), false, owner !== null]);
          assert.equal((await trx.raw('SHOW synchronous_commit')).rows[0].synchronous_commit, expected, `synchronous_commit within the hold transaction (owner ${owner})`);
          await trx.raw('SET LOCAL synchronous_commit = on');
          // a hold alone (HOLD_ONE, knex's placeholders for its numbered ones)
          await trx.raw(HOLD_ONE.text.replace(/\$\d+/g, '?'), holdOneValues({ ...t, reservationId: randomUUID() }, owner !== null));
          assert.equal((await trx.raw('SHOW synchronous_commit')).rows[0].synchronous_commit, expected, `synchronous_commit within a lone hold's transaction (owner ${owner})`);
          throw new Error('rollback');
        })
        .catch((err) => {
          if (err.message !== 'rollback') throw err;
        });
    }
    // On a single pooled connection: the next statement commits durably again.
    const one = createDb(env.databaseUrl, 1);
    try {
      const reservations = new Reservations(one, { logger: env.logger });
      await reservations.hold({ reservationId: randomUUID(), accountId: acct.accountId, keyId: acct.keyId, model: 'sim-gpt', provider: 'simulator', endpoint: '/v1/chat/completions', tariff: TARIFF, held: '0.1', complimentary: false });
      assert.equal((await one.raw('SHOW synchronous_commit')).rows[0].synchronous_commit, 'on', 'the next statement on the same connection commits durably');
    } finally {
      await one.destroy();
    }
  });
});
