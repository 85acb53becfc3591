import assert from 'node:assert/strict';
import type { PanelClient } from './panel';

// Reconciliation passes over the API (test/panel/reconcile/reconcile*.test.ts, bench/panel-reconcile.ts).

export async function waitPass(c: PanelClient, id: string, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await c.get(`/v1/reconcile/passes/${id}`);
    assert.equal(r.status, 200, JSON.stringify(r.json));
    if (r.json.status !== 'running') return r.json;
    if (Date.now() > deadline) throw new Error(`pass ${id} still running after ${timeoutMs} ms`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

/** Starts a pass now and waits for its report. */
export async function runPass(c: PanelClient) {
  const r = await c.post('/v1/reconcile/run');
  assert.ok(r.status === 202 || r.status === 200, JSON.stringify(r.json));
  return waitPass(c, r.json.pass.id);
}

export async function siteActive(c: PanelClient, id: string, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await c.get(`/v1/sites/${id}`);
    if (r.json?.status === 'active') return r.json;
    if (r.json?.status === 'failed' || Date.now() > deadline) throw new Error(`site ${id}: ${JSON.stringify(r.json)}`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

/** Review, then confirm: the two requests of a policy change. */
export async function setPolicy(admin: PanelClient, siteId: string, policy: 'observe' | 'remediate') {
  const review = await admin.post(`/v1/reconcile/sites/${siteId}/policy`, { policy });
  assert.equal(review.status, 200, JSON.stringify(review.json));
  const done = await admin.post(`/v1/reconcile/sites/${siteId}/policy`, { policy, confirmation_token: review.json.confirmation_token });
  assert.equal(done.status, 200, JSON.stringify(done.json));
}

