import assert from 'node:assert/strict';
import { readyUrl } from '../helpers/child-ready';
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import { env } from '../setup/env';
import { checkInvariants, newAccount, settled, useStack } from '../helpers/stack';

// Issue 33 item 3: SIGTERM drains a gateway API process. New connections are refused at once;
// a stream shorter than the grace (GATEWAY_DRAIN_SECONDS) completes and is charged in full; one
// longer is cut by the server once the grace is over: an error event, not billed, never a 499.

async function startChild(drainSeconds: number): Promise<{ child: ChildProcess; url: string; exited: Promise<number | null> }> {
  const child = spawn(process.execPath, ['--require', 'tsx/cjs', path.join(__dirname, '../helpers/gateway-child.ts')], {
    cwd: path.join(__dirname, '../..'),
    env: { ...process.env, DATABASE_URL: env.databaseUrl, TEMPORAL_ADDRESS: env.temporalAddress, GATEWAY_DRAIN_SECONDS: String(drainSeconds) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = await readyUrl(child, 'gateway child');
  return { child, url, exited };
}

/** Opens a chat stream and waits for its first chunk. */
async function openStream(url: string, key: string, content: string) {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'sim-gpt', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content }] }),
  });
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
}

describe('SIGTERM drains a gateway process (issue 33 item 3)', function () {
  useStack(); // the credits worker and relay settle what the child records
  this.timeout(60_000);

  it('refuses new connections, lets a stream shorter than the grace finish with 200 and charges it in full', async () => {
    const acct = await newAccount({ credits: '10' });
    const { child, url, exited } = await startChild(10);
    try {
      const stream = await openStream(url, acct.key, 'finish me [sim tokens=30 chunk_delay=100]');
      child.kill('SIGTERM');
      await new Promise((r) => setTimeout(r, 300));
      await assert.rejects(fetch(`${url}/healthz`), (err: Error & { cause?: { code?: string } }) => {
        assert.equal(err.cause?.code, 'ECONNREFUSED', `a new connection is refused: ${String(err.cause ?? err)}`);
        return true;
      }, 'no new connection while draining');
      const text = await stream.rest;
      assert.ok(text.includes('data: [DONE]'), `the stream completed: ${text.slice(-300)}`);
      assert.ok(!text.includes('"error"'), 'no error event');
      assert.equal(await exited, 0, 'the drained process exits 0');
      const row = await settled(stream.id);
      assert.equal(row.status, 'settled', 'charged');
      assert.equal(row.outcome, 'completed', 'completed, not cancelled');
      assert.equal(row.http_status, 200, 'answered 200');
      assert.equal(row.completion_tokens, 30, 'charged for every token sent');
      const usage = JSON.parse(text.split('\n\n').filter((e) => e.includes('"usage":{')).pop()!.slice(6)).usage;
      assert.equal(Number(row.charge), usage.cost, 'the charge the answer showed');
      const inv = await checkInvariants(acct.accountId);
      assert.equal(inv.account.pending_requests, 0, 'no hold left');
      assert.equal(Number(inv.ledger.usage), Number(inv.account.total_usage), 'the ledger matches');
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('cuts a stream longer than the grace as a server-side failure: not billed, never a client cancel', async () => {
    const acct = await newAccount({ credits: '10' });
    const { child, url, exited } = await startChild(1);
    try {
      const stream = await openStream(url, acct.key, 'too long [sim tokens=100 chunk_delay=100]');
      child.kill('SIGTERM');
      const text = await stream.rest;
      assert.ok(text.includes('service_unavailable'), `the stream ends with the gateway's error: ${text.slice(-300)}`);
      assert.equal(await exited, 0, 'the drained process exits 0');
      const row = await settled(stream.id);
      assert.equal(row.status, 'released', 'not billed');
      assert.equal(row.outcome, 'failed', 'a failure of the gateway, not a cancel');
      assert.equal(row.http_status, 503, 'a server-side cut, not 499');
      assert.equal(Number(row.charge), 0, 'nothing charged');
      const inv = await checkInvariants(acct.accountId);
      assert.equal(inv.account.pending_requests, 0, 'no hold left');
      assert.equal(Number(inv.account.total_usage), 0, 'no usage');
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('while draining, answers say Connection: close, and a request that still arrives on a connection opened before is answered', async () => {
    const acct = await newAccount({ credits: '10' });
    const { child, url, exited } = await startChild(10);
    const agents = [0, 1].map(() => new http.Agent({ keepAlive: true, maxSockets: 1 })); // one connection each, reused
    const post = (agent: http.Agent, content: string, stream: boolean) =>
      new Promise<{ status: number; connection: string | undefined; body: string }>((resolve, reject) => {
        const req = http.request(`${url}/v1/chat/completions`, { method: 'POST', agent, headers: { authorization: `Bearer ${acct.key}`, 'content-type': 'application/json' } }, (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (d: string) => (body += d));
          res.on('end', () => resolve({ status: res.statusCode!, connection: res.headers.connection, body }));
        });
        req.on('error', reject);
        req.end(JSON.stringify({ model: 'sim-gpt', stream, messages: [{ role: 'user', content }] }));
      });
    try {
      const stream = post(agents[0], 'first [sim tokens=10 chunk_delay=100]', true);
      const plain = post(agents[1], 'slow [sim latency=1500]', false);
      await new Promise((r) => setTimeout(r, 300));
      child.kill('SIGTERM');
      const p = await plain;
      assert.equal(p.status, 200, 'the plain request in flight is answered');
      assert.equal(p.connection, 'close', 'its head went out during the drain: Connection: close');
      const a = await stream;
      assert.equal(a.status, 200, 'the stream finished');
      assert.equal(a.connection, 'keep-alive', 'its head went out before the drain: the client may reuse the connection');
      const b = await post(agents[0], 'second', false);
      assert.equal(b.status, 200, `the request on the open connection is answered: ${b.body.slice(0, 200)}`);
      assert.equal(b.connection, 'close', 'and tells the client not to reuse the connection');
      assert.equal(await exited, 0, 'the drained process exits 0');
    } finally {
      for (const a of agents) a.destroy();
      child.kill('SIGKILL');
    }
  });
});
