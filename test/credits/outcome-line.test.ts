import assert from 'node:assert/strict';
import { readyUrl } from '../helpers/child-ready';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { call, newAccount, settled, useStack } from '../helpers/stack';
import { env } from '../setup/env';

// An API process killed the moment its client has the whole answer still has its outcome recorded
// (issue 14: every answered request charged exactly once): the outcome statement leaves the
// process on the outcome line (services/credits/outcome-line.ts) before the answer's last byte.
// To show that the pool could not have done it, the process's only pooled connection is kept
// busy (another request's hold waits on a row lock) when the stream ends.
// An outcome that waits for its batch (the batch interval) is spooled to the journal's folder
// before its answer ends, so a process started on the folder after the kill records it.

describe('an API process killed right after answering', function () {
  this.timeout(60_000);
  useStack();

  it('has handed the outcome to PostgreSQL before the answer ended: recorded and charged once', async function () {
    const [a, b] = await Promise.all([newAccount({ credits: '5' }), newAccount({ credits: '5' })]);
    const child = spawn(process.execPath, ['--require', 'tsx/cjs', path.join(__dirname, '../helpers/gateway-child.ts')], {
      cwd: path.join(__dirname, '../..'),
      env: { ...process.env, DATABASE_URL: env.databaseUrl, TEMPORAL_ADDRESS: env.temporalAddress, HEARTBEAT_MS: '300', DB_POOL_MAX: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const trx = await env.db.transaction();
    try {
      const url = await readyUrl(child, 'gateway child');
      await call(url, '/v1/chat/completions', { key: b.key, body: { model: 'sim-gpt', messages: [{ role: 'user', content: 'warm the key cache [sim tokens=2]' }] } });
      const res = await fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${a.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'sim-gpt', stream: true, messages: [{ role: 'user', content: 'answered, then killed [sim tokens=12 chunk_delay=150]' }] }),
      });
      assert.equal(res.status, 200, 'the streamed request is answered');
      const id = res.headers.get('x-gateway-request-id')!;
      const reader = res.body!.getReader();
      await reader.read();

      // Another request's hold waits on a lock, on the child's only pooled connection.
      await trx('accounts').where({ id: b.accountId }).forUpdate();
      const blocked = call(url, '/v1/chat/completions', { key: b.key, body: { model: 'sim-gpt', messages: [{ role: 'user', content: 'blocked [sim tokens=2]' }] } }).catch(() => null);
      for (let i = 0; ; i++) {
        const w = await env.db.raw(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%credits_take_hold%'`);
        if (w.rows[0].n > 0) break;
        assert.ok(i < 200, 'the second hold never waited on the lock');
        await new Promise((r) => setTimeout(r, 25));
      }

      // The whole answer, then kill -9 at once.
      let text = '';
      for (let c = await reader.read(); !c.done; c = await reader.read()) {
        text += Buffer.from(c.value).toString();
        if (text.includes('[DONE]')) {
          child.kill('SIGKILL');
          break;
        }
      }
      assert.match(text, /"usage"/, 'the client has the whole answer, usage included, before the kill');
      await trx.rollback();
      await blocked;
      const row = await settled(id);
      assert.equal(row.outcome, 'completed', 'the outcome was recorded as completed despite the kill');
      assert.equal(row.status, 'settled', 'the reservation is settled');
      assert.ok(Number(row.charge) > 0, `the request was charged: ${row.charge}`);
      assert.deepEqual((await env.db('ledger').where({ reservation_id: id }).orderBy('id')).map((l) => l.kind), ['hold', 'release', 'charge'], 'charged exactly once: hold, release, charge');
    } finally {
      if (!trx.isCompleted()) await trx.rollback().catch(() => {});
      child.kill('SIGKILL');
    }
  });

  it('an outcome waiting for its batch when the process is killed is spooled: the next process on the folder records it, charged once', async function () {
    const a = await newAccount({ credits: '5' });
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'outcome-spool-'));
    const start = () => {
      const child = spawn(process.execPath, ['--require', 'tsx/cjs', path.join(__dirname, '../helpers/gateway-child.ts')], {
        cwd: path.join(__dirname, '../..'),
        // a batch interval far longer than the test needs: the outcomes after the first wait for it
        env: { ...process.env, DATABASE_URL: env.databaseUrl, TEMPORAL_ADDRESS: env.temporalAddress, HEARTBEAT_MS: '300', OUTCOME_JOURNAL_DIR: dir, CHILD_OUTCOME_BATCH_INTERVAL_MS: '60000' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr!.on('data', (d) => (stderr += String(d)));
      return { child, url: readyUrl(child, 'gateway child', () => stderr) };
    };
    const spooled = () => fs.readdirSync(dir).filter((n) => n.endsWith('.spool')).flatMap((n) => fs.readFileSync(path.join(dir, n), 'utf8').split('\n').filter(Boolean));
    const first = start();
    let second: ReturnType<typeof start> | null = null;
    try {
      const url = await first.url;
      const ask = (content: string, stream = false) => call(url, '/v1/chat/completions', { key: a.key, body: { model: 'sim-gpt', stream, messages: [{ role: 'user', content }] } });
      const sent = await ask('sent at once [sim tokens=3]');
      assert.equal(sent.status, 200, `the first request is answered: ${sent.text}`);
      const waiting = [await ask('waits for its batch [sim tokens=4]'), await ask('streamed, waits too [sim tokens=5]', true)];
      for (const w of waiting) assert.equal(w.status, 200, `answered: ${w.text.slice(0, 300)}`);
      const ids = waiting.map((w) => w.headers.get('x-gateway-request-id')!);
      assert.equal((await settled(sent.headers.get('x-gateway-request-id')!)).status, 'settled', 'the first outcome left at once and settled');
      const recorded = await env.db('settlement_outbox').whereIn('reservation_id', ids).select('reservation_id');
      const held = await env.db('reservations').whereIn('id', ids).where({ status: 'held' }).select('id');
      assert.deepEqual([recorded.length, held.length], [0, 2], 'the other two outcomes wait in the process for their batch: none recorded, both held');
      assert.deepEqual(spooled().map((l) => (JSON.parse(l) as { write: { reservationId: string } }).write.reservationId).sort(), [...ids].sort(), 'both are spooled on disk');
      const metrics = await (await fetch(`${url}/metrics`)).text();
      assert.match(metrics, /^credits_outcome_spooled 2$/m, 'the spool gauge counts them');

      first.child.kill('SIGKILL');
      await new Promise((r) => first.child.once('exit', r));
      second = start(); // takes the dead process's spool over
      await second.url;
      for (const id of ids) {
        const row = await settled(id);
        assert.equal(row.status, 'settled', `${id} settled`);
        assert.ok(Number(row.charge) > 0, `${id} charged: ${row.charge}`);
        assert.deepEqual((await env.db('ledger').where({ reservation_id: id }).orderBy('id')).map((l) => l.kind), ['hold', 'release', 'charge'], `${id} charged exactly once`);
      }
      assert.deepEqual(spooled(), [], 'the spool is empty once the outcomes are written');
    } finally {
      first.child.kill('SIGKILL');
      second?.child.kill('SIGKILL');
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
