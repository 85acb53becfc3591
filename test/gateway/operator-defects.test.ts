import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { setModel, setProvider } from '../../services/catalog/entries';
import { env } from '../setup/env';
import { call, newAccount, useStack } from '../helpers/stack';

// Defects of issue 23, each reproduced over real HTTP against a running gateway.

const user = (content: string) => [{ role: 'user', content }];

/** Polls until fn() is true or the time is up; returns the last value of fn(). */
async function eventually(fn: () => Promise<boolean>, ms = 5000): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 100))) if (await fn()) return true;
  return fn();
}

describe('issue 23 defects (credits variant)', function () {
  this.timeout(60_000);
  const stack = useStack();

  it('defect 1: a model and a provider added while the gateway runs are served without a restart', async () => {
    const acct = await newAccount();
    const chat = (model: string) => call(stack.gateway.url, '/v1/chat/completions', { key: acct.key, body: { model, messages: user('hi [sim tokens=2]') } });
    // The catalog is loaded (a known model answers) before the new rows exist.
    assert.equal((await chat('sim-gpt')).status, 200);
    const provider = `p-${randomUUID().slice(0, 8)}`;
    const model = `m-${randomUUID().slice(0, 8)}`;
    await setProvider(env.db, { id: provider, kind: 'openai', 'base-url': env.simulator.url, 'api-keys': 'sim-upstream-key' });
    await setModel(env.db, { id: model, provider, upstream: 'sim-gpt-2026-01-15', capabilities: 'text', tiers: 'pro', input: '0.000001', output: '0.000001', cache: '0', 'cache-write': '0' });
    const served = await eventually(async () => (await chat(model)).status === 200);
    assert.ok(served, `new model answered ${JSON.stringify((await chat(model)).json)}`);
  });
});
