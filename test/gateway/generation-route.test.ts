import assert from 'node:assert/strict';
import { call, newAccount, settled, useStack } from '../helpers/stack';

// Issue 33 item 5: GET /v1/generation shows a request's route and attempts as soon as its answer
// was sent, not only once it is settled.

describe('GET /v1/generation before settlement (issue 33 item 5)', function () {
  const stack = useStack();

  it('shows the route and the attempts of an answered request still held', async () => {
    const acct = await newAccount({ credits: '10' });
    await stack.stopWorker(); // nothing settles meanwhile
    try {
      const r = await call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model: 'sim-gpt', messages: [{ role: 'user', content: 'hi [sim tokens=3]' }] } });
      assert.equal(r.status, 200, r.text);
      const id = r.headers.get('x-gateway-request-id')!;
      let g = await call(stack.gateway.url, `/v1/generation?id=${id}`, { key: acct.key });
      for (const deadline = Date.now() + 3000; !g.json?.data?.route && Date.now() < deadline; await new Promise((res) => setTimeout(res, 50))) {
        g = await call(stack.gateway.url, `/v1/generation?id=${id}`, { key: acct.key });
      }
      assert.equal(g.json.data.status, 'held', 'not settled yet');
      assert.equal(g.json.data.route?.provider, 'simulator', `the route that answered: ${JSON.stringify(g.json.data)}`);
      assert.equal(g.json.data.route.attempts.length, 1, 'its one attempt');
      assert.equal(g.json.data.route.attempts[0].result, 'ok', 'the attempt answered');
    } finally {
      await stack.startWorker();
    }
  });

  it('shows the same route once settled', async () => {
    const acct = await newAccount({ credits: '10' });
    const r = await call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model: 'sim-gpt', messages: [{ role: 'user', content: 'hi [sim tokens=3]' }] } });
    const id = r.headers.get('x-gateway-request-id')!;
    await settled(id);
    const g = await call(stack.gateway.url, `/v1/generation?id=${id}`, { key: acct.key });
    assert.equal(g.json.data.route?.provider, 'simulator', 'the route that answered');
  });
});
