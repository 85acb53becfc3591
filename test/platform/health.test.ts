import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { Client, Connection } from '@temporalio/client';
import Koa from 'koa';
import { aliveCheck, readyCheck } from '../../api/shared/health';
import { createDb } from '../../platform/db';
import { freePort } from '../../platform/ports';
import { markDraining } from '../../platform/readiness';
import { usePanel } from '../helpers/panel';
import { useStack } from '../helpers/stack';
import { env } from '../setup/env';

// GET /healthz (alive) and GET /readyz (ready: PostgreSQL and Temporal answer, not draining) on the
// gateway's port (the test-run API's too) and the panel's; load balancers route on /readyz.

async function get(url: string): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(url);
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

describe('health: /healthz and /readyz', () => {
  const stack = useStack();
  const panel = usePanel();

  it('both answer 200 on the gateway and panel ports while PostgreSQL and Temporal answer, without a key or sign-in', async () => {
    for (const base of [stack.gateway.url, panel()]) {
      const alive = await get(`${base}/healthz`);
      assert.equal(alive.status, 200, `${base}/healthz: ${JSON.stringify(alive.json)}`);
      assert.deepEqual(alive.json, { ok: true, postgres: 'up', temporal: 'up' }, `${base}/healthz keeps its shape`);
      const ready = await get(`${base}/readyz`);
      assert.equal(ready.status, 200, `${base}/readyz: ${JSON.stringify(ready.json)}`);
      assert.deepEqual(ready.json, { ready: true, postgres: 'up', temporal: 'up', draining: false }, `${base}/readyz body`);
    }
  });

  it('with PostgreSQL unreachable the process is alive (/healthz 200, postgres down) but not ready (/readyz 503)', async () => {
    const db = createDb(`postgres://nobody:x@127.0.0.1:${await freePort()}/none`, 1, 0);
    const temporal = new Client({ connection: await Connection.connect({ address: env.temporalAddress }) });
    const app = new Koa();
    app.use((ctx) => (ctx.path === '/healthz' ? aliveCheck({ db, temporal })(ctx) : readyCheck({ db, temporal })(ctx)));
    const server = app.listen(0, '127.0.0.1');
    try {
      await new Promise((resolve) => server.once('listening', resolve));
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const alive = await get(`${base}/healthz`);
      assert.equal(alive.status, 200, 'alive even with its database down: a supervisor must not restart it for that');
      assert.deepEqual(alive.json, { ok: true, postgres: 'down', temporal: 'up' }, 'what it sees of its dependencies');
      const ready = await get(`${base}/readyz`);
      assert.equal(ready.status, 503, 'not ready without its database');
      assert.deepEqual(ready.json, { ready: false, postgres: 'down', temporal: 'up', draining: false }, '/readyz names what is down');
    } finally {
      server.close();
      await db.destroy();
      await temporal.connection.close();
    }
  });

  // Last: draining is process-wide and stays set (a process drains once, from SIGTERM on).
  it('once draining (main/start.ts and panel-api mark it at SIGTERM) /readyz is 503 with draining true, /healthz stays 200', async () => {
    markDraining();
    for (const base of [stack.gateway.url, panel()]) {
      const ready = await get(`${base}/readyz`);
      assert.equal(ready.status, 503, `${base}/readyz while draining`);
      assert.deepEqual(ready.json, { ready: false, postgres: 'up', temporal: 'up', draining: true }, `${base}/readyz body while draining`);
      assert.equal((await get(`${base}/healthz`)).status, 200, `${base}/healthz while draining: still alive`);
    }
  });
});
