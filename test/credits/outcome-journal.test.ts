import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Decimal from 'decimal.js';
import { createSettlementActivities } from '../../activities/credits/settlement';
import { GatewayError } from '../../domain/shared/errors';
import { createAccount } from '../../services/accounts/accounts';
import { createKey } from '../../services/keys/keys';
import { Reservations, type HoldRequest } from '../../services/credits/holds';
import { OutcomeJournal } from '../../services/credits/outcome-journal';
import { holdsOfDeadProcesses } from '../../services/credits/settlement';
import { createDb, migrate, type Db } from '../../platform/db';
import { freePort } from '../../platform/ports';
import { startEmbeddedPostgres, type EmbeddedDatabase } from '../../platform/postgres';
import { seedSimulatorCatalog } from '../../simulator/seed';
import { readyUrl } from '../helpers/child-ready';
import { killPostgres } from '../helpers/pg-crash';
import { checkInvariants, newAccount } from '../helpers/stack';
import { env } from '../setup/env';

// Issue 33 item 2: outcomes PostgreSQL cannot take wait in a durable journal (append + fsync under
// DATA_DIR) and are replayed until it takes them, exactly once per reservation id, also by the
// next process after a kill -9. Past its bound a process refuses new requests with a 503.

const TARIFF = { input_multiplier: '0.000002', output_multiplier: '0.000008', cache_multiplier: '0.0000005', cache_creation_multiplier: '0.0000025' };
const COMPLETED = { outcome: 'completed' as const, billable: true, usage: { prompt_tokens: 1000, completion_tokens: 500, cached_tokens: 0, cache_write_tokens: 0, reasoning_tokens: null }, providerCost: null, httpStatus: 200 };

const lines = (dir: string) =>
  fs
    .readdirSync(dir)
    .filter((n) => n.endsWith('.jsonl'))
    .flatMap((n) => fs.readFileSync(path.join(dir, n), 'utf8').split('\n').filter(Boolean));

/** Ledger kinds per reservation: exactly one hold, release and charge each when charged once. */
async function ledgerKinds(db: Db, ids: string[]): Promise<Map<string, string[]>> {
  const rows = await db('ledger').whereIn('reservation_id', ids).select('reservation_id', 'kind');
  return new Map(ids.map((id) => [id, rows.filter((r) => r.reservation_id === id).map((r) => r.kind).sort()]));
}

describe('outcome journal: bound and replay in one process (issue 33 item 2)', function () {
  this.timeout(30_000);
  let dir: string;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'outcome-journal-'));
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('at its bound refuses new holds with 503 in the envelope; a process started on the folder replays the outcomes once; a second replay changes nothing', async () => {
    const acct = await newAccount({ credits: '10' });
    const hold = (r: Reservations): Promise<Awaited<ReturnType<Reservations['hold']>>> =>
      r.hold({ reservationId: randomUUID(), accountId: acct.accountId, keyId: acct.keyId, model: 'sim-gpt', provider: 'simulator', endpoint: '/v1/chat/completions', tariff: TARIFF, held: '1', complimentary: false } satisfies HoldRequest);
    // A journal whose database is unreachable (a closed port): what it holds stays there.
    const unreachable = createDb(`postgres://postgres@127.0.0.1:${await freePort()}/none`, 1);
    const stuck = new OutcomeJournal(unreachable, env.logger, { dir, maxEntries: 2, maxBytes: 1_000_000, batchIntervalMs: 0 });
    stuck.open();
    const reservations = new Reservations(env.db, { logger: env.logger, journal: stuck });
    const holds = [await hold(reservations), await hold(reservations)];
    for (const h of holds) void stuck.append({ reservationId: h.reservationId, report: { ...COMPLETED, latencyMs: 5 } });
    assert.equal(stuck.depth, 2, 'both outcomes wait');
    assert.equal(lines(dir).length, 2, 'both are on disk when append returns');
    const refusal = await hold(reservations).then(
      () => null,
      (err: unknown) => err,
    );
    assert.ok(refusal instanceof GatewayError, `a GatewayError: ${String(refusal)}`);
    assert.equal(refusal.status, 503, 'refused with 503');
    assert.equal(refusal.code, 'service_unavailable', 'the envelope code');
    assert.match(refusal.message, /outcome journal is full/, `says why: ${refusal.message}`);
    assert.equal(refusal.headers['retry-after'], '5', 'says when to retry');
    stuck.stop();
    await unreachable.destroy();
    const copy = lines(dir);

    // The next process on the folder takes the file over and replays it.
    const next = new OutcomeJournal(env.db, env.logger, { dir, maxEntries: 2, maxBytes: 1_000_000, batchIntervalMs: 0 });
    next.open();
    assert.equal(next.depth, 2, 'the outcomes left behind are taken over');
    const deadline = Date.now() + 10_000;
    while (next.depth > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.equal(next.depth, 0, 'replayed');
    assert.equal(lines(dir).length, 0, 'the file is emptied once written');
    const { settleBatch } = createSettlementActivities(env.db);
    const ids = holds.map((h) => h.reservationId);
    assert.equal((await settleBatch(ids)).settled, 2, 'both settle');

    // The same outcomes replayed again (a crash between the write and the file's cut): nothing changes.
    fs.writeFileSync(path.join(dir, `${process.pid}-${randomUUID()}.jsonl`), copy.join('\n') + '\n');
    next.stop();
    const again = new OutcomeJournal(env.db, env.logger, { dir, maxEntries: 2, maxBytes: 1_000_000, batchIntervalMs: 0 });
    again.open();
    while (again.depth > 0 && Date.now() < deadline + 10_000) await new Promise((r) => setTimeout(r, 50));
    assert.equal(again.depth, 0, 'replayed again');
    const fresh = new Reservations(env.db, { logger: env.logger, journal: again });
    assert.ok(await hold(fresh), 'a journal below its bound admits holds');
    again.stop();
    assert.equal((await settleBatch(ids)).settled, 0, 'nothing more to settle');
    for (const [id, kinds] of await ledgerKinds(env.db, ids)) assert.deepEqual(kinds, ['charge', 'hold', 'release'], `${id} charged once`);
    const inv = await checkInvariants(acct.accountId);
    assert.equal(inv.account.pending_requests, 1, 'only the last hold is left');
    assert.ok(new Decimal(inv.ledger.usage).eq(inv.account.total_usage), `ledger usage ${inv.ledger.usage} equals the account's ${inv.account.total_usage}`);
    assert.ok(new Decimal(inv.account.total_usage).eq('1.012'), `two charges of 0.006 and the last hold of 1: ${inv.account.total_usage}`);
  });
});

interface Child {
  child: ChildProcess;
  url: string;
}

describe('PostgreSQL down 120 s while streams finish; a gateway killed with outcomes in its journal (issue 33 item 2)', function () {
  this.timeout(300_000);
  let tmp: string;
  let pgDir: string;
  let port: number;
  let pg: EmbeddedDatabase | null = null;
  let db: Db | null = null;
  let pgUp = false;
  const children: ChildProcess[] = [];
  let journalDir: string;

  const startPg = async () => {
    pg = await startEmbeddedPostgres({ dir: pgDir, port, database: 'journal_test', persistent: true, logger: env.logger });
    pgUp = true;
    return pg;
  };
  const startChild = async (): Promise<Child> => {
    let stderr = '';
    const child = spawn(process.execPath, ['--require', 'tsx/cjs', path.join(__dirname, '../helpers/gateway-child.ts')], {
      cwd: path.join(__dirname, '../..'),
      env: { ...process.env, DATABASE_URL: pg!.url, TEMPORAL_ADDRESS: env.temporalAddress, OUTCOME_JOURNAL_DIR: journalDir, HEARTBEAT_MS: '1000' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stderr!.on('data', (d) => (stderr += String(d)));
    children.push(child);
    return { child, url: await readyUrl(child, 'gateway child', () => stderr) };
  };

  before(async function () {
    this.timeout(60_000);
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-journal-'));
    fs.chmodSync(tmp, 0o755); // as root, PostgreSQL runs as the `postgres` user
    pgDir = path.join(tmp, 'pg');
    journalDir = path.join(tmp, 'outcome-journal');
    port = await freePort();
    db = createDb((await startPg()).url, 5);
    await migrate(db);
    await seedSimulatorCatalog(db, env.simulator.url);
  });

  after(async function () {
    for (const c of children) c.kill('SIGKILL');
    await db?.destroy().catch(() => {});
    if (pgUp) await pg?.stop().catch(() => {}); // a killed one is not stopped again
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('every answered request is charged exactly once after the database returns, no hold stays, ledger drift 0; the killed process loses nothing', async function () {
    const d = db!;
    const account = await createAccount(d, { name: 'journal', tier: 'pro', credits: '100' });
    const { key } = await createKey(d, { accountId: account.id, label: 'journal' });
    const [a, b] = [await startChild(), await startChild()];

    const chat = (url: string, body: object) =>
      fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'sim-gpt', ...body }) });
    /** A stream that runs ~6 s: resolves once its first chunk is here (its hold is taken), with the rest to come. */
    const openStream = async (url: string) => {
      const res = await chat(url, { stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'outage [sim tokens=30 chunk_delay=200]' }] });
      assert.equal(res.status, 200, 'the stream starts');
      const reader = res.body!.getReader();
      let text = new TextDecoder().decode((await reader.read()).value);
      const rest = (async () => {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) return text;
          text += new TextDecoder().decode(value);
        }
      })();
      return { id: res.headers.get('x-gateway-request-id')!, rest };
    };
    const before = await chat(a.url, { messages: [{ role: 'user', content: 'before the outage' }] });
    assert.equal(before.status, 200, 'answered before the outage');
    const streams = [...(await Promise.all([0, 1, 2].map(() => openStream(a.url)))).map((s) => ({ ...s, on: 'a' })), ...(await Promise.all([0, 1, 2].map(() => openStream(b.url)))).map((s) => ({ ...s, on: 'b' }))];

    await killPostgres(pgDir);
    pgUp = false;
    const down = Date.now();
    const answered = new Map<string, number>(); // request id → the cost the client was shown
    for (const s of streams) {
      const text = await s.rest;
      assert.ok(text.includes('data: [DONE]'), `the stream completed while the database was down: ${text.slice(-300)}`);
      const usage = JSON.parse(text.split('\n\n').filter((e) => e.includes('"usage":{')).pop()!.slice(6)).usage;
      answered.set(s.id, usage.cost);
    }
    const finished = Date.now();
    const refused = await chat(a.url, { messages: [{ role: 'user', content: 'during the outage' }] });
    assert.equal(refused.status, 503, 'a new request is refused while the database is down');
    assert.ok(((await refused.json()) as { error?: { message?: string } }).error?.message, 'in the product envelope');

    const metric = async (url: string, name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(await (await fetch(`${url}/metrics`)).text())?.[1]);
    assert.equal(await metric(a.url, 'credits_outcome_journal_entries'), 3, "a's three outcomes wait in its journal");
    assert.equal(await metric(b.url, 'credits_outcome_journal_entries'), 3, "b's three outcomes wait in its journal");
    assert.ok((await metric(b.url, 'credits_outcome_journal_bytes')) > 0, 'their bytes are shown');
    assert.equal(lines(journalDir).length, 6, 'all six are on disk');

    // kill -9 of a while its journal holds outcomes; b lives on through the whole outage.
    a.child.kill('SIGKILL');
    while (Date.now() - down < 120_000) await new Promise((r) => setTimeout(r, 1000));
    const oldest = await metric(b.url, 'credits_outcome_journal_oldest_seconds');
    assert.ok(oldest >= (Date.now() - finished) / 1000 - 1, `the oldest waiting outcome is ${oldest} s old: it waits since its stream finished`);
    await startPg();
    const c = await startChild(); // takes a's journal over
    const ids = [...answered.keys()];
    const deadline = Date.now() + 30_000;
    for (;;) {
      const recorded = await d('settlement_outbox').whereIn('reservation_id', ids).count<{ n: number }[]>({ n: '*' }).first();
      if (Number(recorded!.n) === ids.length) break;
      assert.ok(Date.now() < deadline, `every outcome recorded within 30 s of the database's return (${recorded!.n} of ${ids.length})`);
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal(await metric(b.url, 'credits_outcome_journal_entries'), 0, "b's journal is empty");
    assert.equal(await metric(c.url, 'credits_outcome_journal_entries'), 0, "c replayed a's journal");
    assert.ok((await metric(c.url, 'credits_outcome_journal_replayed_total')) >= 3, "c counts a's replayed outcomes");
    assert.equal(lines(journalDir).length, 0, 'nothing left on disk');
    assert.deepEqual((await holdsOfDeadProcesses(d, { deadAfterMs: 0, unrecordedOlderThanMs: 0 }, null)).filter((h) => answered.has(h.id)), [], 'no answered request is left for the sweeper');

    const { settleBatch } = createSettlementActivities(d);
    await settleBatch([...ids, before.headers.get('x-gateway-request-id')!]);
    const rows = await d('reservations').whereIn('id', ids);
    for (const r of rows) {
      assert.equal(r.status, 'settled', `${r.id} charged`);
      assert.equal(r.outcome, 'completed', `${r.id} completed`);
      assert.equal(Number(r.charge), answered.get(r.id), `${r.id} charged what its answer showed`);
    }
    for (const [id, kinds] of await ledgerKinds(d, ids)) assert.deepEqual(kinds, ['charge', 'hold', 'release'], `${id} charged exactly once`);
    const inv = await checkInvariants(account.id, d);
    assert.equal(inv.account.pending_requests, 0, 'no hold left');
    assert.ok(new Decimal(inv.account.reserved_credits).isZero(), `nothing reserved: ${inv.account.reserved_credits}`);
    assert.ok(new Decimal(inv.ledger.usage).eq(inv.account.total_usage), `ledger drift 0: ${inv.ledger.usage} vs ${inv.account.total_usage}`);
    assert.ok(new Decimal(inv.ledger.grants).eq(inv.account.total_credits), 'grants match');
    for (const ch of [b, c]) ch.child.kill('SIGKILL');
  });
});
