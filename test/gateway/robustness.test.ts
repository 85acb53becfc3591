import assert from 'node:assert/strict';
import net from 'node:net';
import { createDb } from '../../platform/db';
import { freePort } from '../../platform/ports';
import { startGatewayApi, type GatewayRuntime } from '../../main/gateway';
import { call, newAccount, settled, useStack } from '../helpers/stack';
import { env } from '../setup/env';

// Issue-14 fixes of the read and error paths: an answer's id is readable before settlement,
// control characters in an id are a 400, and a database outage is a 503 with Retry-After.

describe('gateway robustness', function () {
  const stack = useStack();

  it('GET /v1/generation finds an answer by its body id before the request is settled', async function () {
    const acct = await newAccount({ credits: '5' });
    await stack.stopWorker(); // nothing settles while the worker is away
    try {
      const res = await call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model: 'sim-gpt', messages: [{ role: 'user', content: 'hi' }] } });
      assert.equal(res.status, 200, res.text);
      const requestId = res.headers.get('x-gateway-request-id')!;
      const deadline = Date.now() + 5000;
      let gen;
      do {
        gen = await call(stack.gateway.url, `/v1/generation?id=${encodeURIComponent(res.json.id)}`, { key: acct.key });
        if (gen.status === 200) break;
        await new Promise((r) => setTimeout(r, 50));
      } while (Date.now() < deadline);
      assert.equal(gen.status, 200, gen.text);
      assert.equal(gen.json.data.id, requestId, "the generation is the answer's request, found by its body id");
      assert.equal(gen.json.data.status, 'held', 'not settled yet while the worker is away: still held');
      assert.equal(gen.json.data.billing_source, 'pending', 'billing source is pending before settlement');
    } finally {
      await stack.startWorker();
    }
    const row = await env.db('reservations').where({ account_id: acct.accountId }).first('id');
    assert.equal((await settled(row.id)).status, 'settled', 'the request settles once the worker is back');
  });

  it('an id with a control character answers 400 naming the parameter, not 500', async function () {
    const acct = await newAccount({ credits: '1' });
    for (const id of ['%00', 'abc%0A', '%1Fx', '%7F']) {
      const res = await call(stack.gateway.url, `/v1/generation?id=${id}`, { key: acct.key });
      assert.equal(res.status, 400, res.text);
      assert.equal(res.json.error.code, 'invalid_parameter', `the id ${id} is refused as an invalid parameter`);
      assert.equal(res.json.error.param, 'id', `the error for ${id} names the id parameter`);
    }
  });

  describe('with the database unreachable', function () {
    let gateway: GatewayRuntime;
    let proxy: net.Server;
    const sockets = new Set<net.Socket>();

    before(async function () {
      // The gateway reaches PostgreSQL through a TCP relay this test can cut.
      const pg = new URL(env.databaseUrl);
      proxy = net.createServer((client) => {
        const upstream = net.connect(Number(pg.port), pg.hostname);
        for (const s of [client, upstream]) {
          sockets.add(s);
          s.on('close', () => sockets.delete(s));
          s.on('error', () => s.destroy());
        }
        client.pipe(upstream).pipe(client);
      });
      const port = await freePort();
      await new Promise<void>((resolve) => proxy.listen(port, '127.0.0.1', resolve));
      const relayed = new URL(env.databaseUrl);
      relayed.port = String(port);
      gateway = await startGatewayApi({
        db: createDb(relayed.toString(), 2),
        databaseUrl: env.databaseUrl,
        temporalAddress: env.temporalAddress,
        namespace: 'default',
        logger: env.logger,
        port: 0,
        upstreamTimeoutMs: 10_000,
        keyCacheTtlMs: 60_000,
      });
    });

    after(async function () {
      await gateway?.close();
      proxy?.close();
      for (const s of sockets) s.destroy();
    });

    it('answers 503 service_unavailable with Retry-After, in the envelope, and charges nothing', async function () {
      const acct = await newAccount({ credits: '5' });
      proxy.close();
      for (const s of sockets) s.destroy();
      const res = await call(gateway.url, '/v1/chat/completions', { key: acct.key, body: { model: 'sim-gpt', messages: [{ role: 'user', content: 'hi' }] } });
      assert.equal(res.status, 503, res.text);
      assert.equal(res.json.error.code, 'service_unavailable', 'a database outage answers service_unavailable');
      assert.ok(Number(res.headers.get('retry-after')) >= 1, `a 503 carries retry-after: ${res.headers.get('retry-after')}`);
      assert.equal((await env.db('reservations').where({ account_id: acct.accountId })).length, 0, 'nothing was reserved while the database was unreachable');
    });
  });
});
