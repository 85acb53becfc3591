import assert from 'node:assert/strict';
import { createHmac, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Decimal from 'decimal.js';
import { createAccount } from '../../services/accounts/accounts';
import { createKey } from '../../services/keys/keys';
import { keysWithUsage } from '../../services/dashboard/reads';
import { env } from '../setup/env';
import { call, newAccount, settled, useStack } from '../helpers/stack';
import { cli, cliWith, oneObject } from '../helpers/admin-cli';
import { until } from '../helpers/until';

// Low-balance and spend events (issue 23, feature 5): webhook endpoints per account, events
// recorded by settlement and delivered by `account-webhook-<id>` workflows, signed, retried,
// received here by a real HTTP server that checks the signature.

const ADMIN_TOKEN = 'issue-23-events-admin';
const admin = (base: string, p: string, body?: unknown, method?: string) => call(base, p, { body, method, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });

interface Received {
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A webhook receiver on 127.0.0.1 that answers 500 to the first `failFirst` requests. */
async function receiver(failFirst = 0) {
  const got: Received[] = [];
  let seen = 0;
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      got.push({ headers: req.headers, body });
      res.statusCode = seen++ < failFirst ? 500 : 204;
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, got, close: () => new Promise<void>((r) => server.close(() => r())) };
}

/** `t=<unix>,v1=<hex>` checked against the secret, as a receiver would. */
function verified(secret: string, r: Received): boolean {
  const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(String(r.headers['gateway-signature']));
  if (!m) return false;
  return createHmac('sha256', secret).update(`${m[1]}.${r.body}`).digest('hex') === m[2];
}

const webhookStack = { adminToken: ADMIN_TOKEN, accountWebhooks: { allowTargets: ['127.0.0.1'], retry: { initialMs: 200, maxMs: 400, giveUpAfterMs: 10_000 } } };

describe('issue 23 feature 5: account webhooks (credits variant)', function () {
  this.timeout(90_000);
  const stack = useStack(webhookStack);

  it('endpoints: created with a secret shown once, listed without it, deleted; private targets refused unless allowed', async () => {
    const acct = await newAccount();
    const base = stack.gateway.url;
    const refused = await admin(base, `/admin/accounts/${acct.accountId}/webhooks`, { url: 'http://10.1.2.3/hook' });
    assert.equal(refused.status, 400, refused.text);
    assert.equal(refused.json.error.param, 'url', 'the refusal names the url field');
    assert.match(refused.json.error.message, /GATEWAY_WEBHOOK_ALLOW_TARGETS/, 'the refusal points to the setting that allows private targets');
    assert.equal((await admin(base, `/admin/accounts/${acct.accountId}/webhooks`, { url: 'ftp://example.com/' })).status, 400, 'a non-HTTP target is refused 400');
    assert.equal((await admin(base, `/admin/accounts/${randomUUID()}/webhooks`, { url: 'http://127.0.0.1:9/hook' })).status, 404, 'an unknown account has no webhooks to add: 404');
    const made = await admin(base, `/admin/accounts/${acct.accountId}/webhooks`, { url: 'http://127.0.0.1:9/hook' });
    assert.equal(made.status, 201, made.text);
    assert.match(made.json.secret, /^whsec_/, 'the secret is shown once, with the whsec_ prefix');
    const listed = await admin(base, `/admin/accounts/${acct.accountId}/webhooks`);
    assert.equal(listed.json.endpoints.length, 1, 'the listing holds the one endpoint');
    assert.equal(listed.json.endpoints[0].secret, undefined, 'the listing does not show the secret');
    assert.ok(!JSON.stringify(await env.db('account_webhook_endpoints').where({ id: made.json.id })).includes(made.json.secret), 'the secret is stored sealed');
    assert.equal((await admin(base, `/admin/webhooks/${made.json.id}`, undefined, 'DELETE')).status, 200, 'the endpoint is deleted');
    assert.equal((await admin(base, `/admin/webhooks/${made.json.id}`, undefined, 'DELETE')).status, 404, 'a deleted endpoint is gone: 404');

    // The CLI refuses loopback targets unless the operator setting allows them.
    const cliRefused = await cli('webhook', 'create', '--account', acct.accountId, '--url', 'http://127.0.0.1:9/hook');
    assert.equal(cliRefused.code, 2, cliRefused.stdout);
    const cliMade = await cliWith({ GATEWAY_WEBHOOK_ALLOW_TARGETS: '127.0.0.1' }, 'webhook', 'create', '--account', acct.accountId, '--url', 'http://127.0.0.1:9/hook');
    assert.equal(cliMade.code, 0, cliMade.stdout);
    assert.match(oneObject(cliMade).secret, /^whsec_/, 'the CLI shows the secret once, with the whsec_ prefix');
    assert.equal((await cli('webhook', 'list', '--account', acct.accountId)).json.endpoints.length, 1, 'the CLI lists the one endpoint');
    assert.equal((await cli('webhook', 'delete', '--id', cliMade.json.id)).code, 0, 'the CLI deletes the endpoint');
    assert.equal((await cli('account', 'threshold', '--account', acct.accountId, '--threshold', 'lots')).code, 2, 'a non-numeric threshold is a CLI usage error (exit 2)');
  });

  it('balance.low fires once when a settlement crosses the threshold, signed, retried after a 500, re-armed above it', async () => {
    const acct = await newAccount({ credits: '10' });
    const hook = await receiver(1);
    try {
      const base = stack.gateway.url;
      const made = await admin(base, `/admin/accounts/${acct.accountId}/webhooks`, { url: hook.url });
      assert.equal(made.status, 201, made.text);
      const t = await admin(base, `/admin/accounts/${acct.accountId}/low-balance-threshold`, { low_balance_threshold: '10' }, 'PUT');
      assert.equal(t.status, 200, t.text);
      assert.equal(t.json.low_balance_armed, true, 'setting a threshold below the balance arms it');
      const chat = () => call(base, '/v1/chat/completions', { key: acct.key, body: { model: 'sim-gpt', messages: [{ role: 'user', content: 'spend [sim tokens=3]' }] } });
      const first = await chat();
      assert.equal(first.status, 200, first.text);
      await settled(first.headers.get('x-gateway-request-id')!);
      const second = await chat();
      await settled(second.headers.get('x-gateway-request-id')!);

      const delivered = await until('the delivery delivered', () => env.db('account_webhook_deliveries').where({ endpoint_id: made.json.id, status: 'delivered' }).first());
      assert.equal(delivered.attempts, 2, 'the delivery took two attempts: the 500, then the success');
      assert.equal(hook.got.length, 2, 'the receiver got the failed attempt and the delivery'); // the 500, then the delivery
      for (const r of hook.got) assert.ok(verified(made.json.secret, r), 'the signature verifies with the secret');
      const event = JSON.parse(hook.got[1].body);
      assert.equal(event.type, 'balance.low', 'the event is balance.low');
      assert.equal(event.account_id, acct.accountId, 'the event names the account');
      assert.equal(event.data.threshold, '10', 'the event names the threshold');
      assert.equal(event.data.request_id, first.headers.get('x-gateway-request-id'), 'the event names the request whose settlement crossed the threshold');
      const a = await env.db('accounts').where({ id: acct.accountId }).first();
      assert.equal(event.data.balance, new Decimal(a.total_credits).sub(a.total_usage).plus(new Decimal((await env.db('reservations').where({ id: second.headers.get('x-gateway-request-id') }).first()).charge)).toString(), 'the event shows the balance right after the crossing settlement');
      // Fired once: the second settlement, below the threshold still, fired nothing.
      assert.equal((await env.db('account_webhook_deliveries').where({ endpoint_id: made.json.id })).length, 1, 'the second settlement below the threshold fired nothing');
      assert.equal(a.low_balance_armed, false, 'the crossing disarmed the threshold');

      // Credits back above the threshold re-arm it; the next crossing fires again.
      await admin(base, `/admin/accounts/${acct.accountId}/credits`, { credits: '1' });
      assert.equal((await env.db('accounts').where({ id: acct.accountId }).first()).low_balance_armed, true, 'credits back above the threshold re-arm it');
      await admin(base, `/admin/accounts/${acct.accountId}/low-balance-threshold`, { low_balance_threshold: new Decimal(a.total_credits).plus(1).sub(a.total_usage).toString() }, 'PUT');
      const third = await chat();
      await settled(third.headers.get('x-gateway-request-id')!);
      await until('two deliveries delivered', async () => (await env.db('account_webhook_deliveries').where({ endpoint_id: made.json.id, status: 'delivered' })).length === 2);
      const history = await stack.temporal.workflow.getHandle(`account-webhook-${delivered.id}`).fetchHistory();
      assert.ok((history.events ?? []).some((e) => e.timerStartedEventAttributes), 'the retry waited on a durable timer');
      await admin(base, `/admin/webhooks/${made.json.id}`, undefined, 'DELETE');
    } finally {
      await hook.close();
    }
  });
});

describe('issue 23 feature 5: key.spend_limit_reached (keyed variant)', function () {
  this.timeout(90_000);
  const stack = useStack({ ...webhookStack, variant: 'keyed' });

  it('fires when a settlement brings the key spend to its limit', async () => {
    const a = await createAccount(env.db, { name: `events-${randomUUID()}`, tier: 'pro', credits: '100' });
    const hook = await receiver();
    try {
      const made = await admin(stack.gateway.url, `/admin/accounts/${a.id}/webhooks`, { url: hook.url });
      assert.equal(made.status, 201, made.text);
      // The provider's cost above the hold is charged up to the hold: a limit equal to the hold is reached.
      const body = { model: 'sim-gpt', max_tokens: 20, messages: [{ role: 'user', content: 'costly [sim tokens=3 cost=5]' }] };
      const probe = await createKey(env.db, { accountId: a.id, label: 'probe', format: 'mt', settings: { spend_limit: '50' } });
      const p = await call(stack.gateway.url, '/v1/chat/completions', { key: probe.key, body });
      assert.equal(p.status, 200, p.text);
      const held = (await settled(p.headers.get('x-gateway-request-id')!)).held_credits;
      assert.equal((await env.db('account_webhook_deliveries').where({ endpoint_id: made.json.id })).length, 0, 'a request under the spend limit fires nothing');

      const k = await createKey(env.db, { accountId: a.id, label: 'limited', format: 'mt', settings: { spend_limit: new Decimal(held).toString() } });
      const r = await call(stack.gateway.url, '/v1/chat/completions', { key: k.key, body });
      assert.equal(r.status, 200, r.text);
      await settled(r.headers.get('x-gateway-request-id')!);
      await until('the webhook received', async () => hook.got.length > 0);
      const event = JSON.parse(hook.got[0].body);
      assert.ok(verified(made.json.secret, hook.got[0]), 'the webhook signature verifies with the endpoint secret');
      assert.equal(event.type, 'key.spend_limit_reached', 'the event is key.spend_limit_reached');
      assert.equal(event.data.key_id, k.id, 'the event names the key');
      assert.equal(event.data.spend, event.data.spend_limit, "the key's spend equals its limit");
      assert.equal(hook.got.length, 1, 'exactly one event was delivered');
      // The next request is refused for the limit: settlement told of it already, no second event.
      const refused = await call(stack.gateway.url, '/v1/chat/completions', { key: k.key, body });
      assert.equal(refused.status, 403, refused.text);
      assert.equal((await env.db('account_webhook_deliveries').where({ endpoint_id: made.json.id })).length, 1, 'a refusal after the limit was reached by settlement fires nothing more');
      await admin(stack.gateway.url, `/admin/webhooks/${made.json.id}`, undefined, 'DELETE');
    } finally {
      await hook.close();
    }
  });
});

describe('issue 33 item 8: key.spend_limit_reached at the first refusal for the limit (keyed variant)', function () {
  this.timeout(90_000);
  const stack = useStack({ ...webhookStack, variant: 'keyed' });

  it('a key whose remainder fits no hold: the first refusal fires the event, once per limit value; the key reads "limit reached"', async () => {
    const a = await createAccount(env.db, { name: `refusals-${randomUUID()}`, tier: 'pro', credits: '100' });
    const hook = await receiver();
    try {
      const made = await admin(stack.gateway.url, `/admin/accounts/${a.id}/webhooks`, { url: hook.url });
      assert.equal(made.status, 201, made.text);
      const k = await createKey(env.db, { accountId: a.id, label: 'tiny', format: 'mt', settings: { spend_limit: '0.000001' } });
      const deliveries = async () => env.db('account_webhook_deliveries').where({ endpoint_id: made.json.id }).orderBy('created_at').select('payload');
      const body = { model: 'sim-gpt', max_tokens: 20, messages: [{ role: 'user', content: 'hello [sim tokens=3]' }] };
      const [status] = await keysWithUsage(env.db, a.id);
      assert.equal(status.status, 'active', 'before any refusal the key is active');

      const first = await call(stack.gateway.url, '/v1/chat/completions', { key: k.key, body });
      assert.equal(first.status, 403, first.text);
      assert.equal(first.json.error.code, 'key_spend_limit_exceeded', 'refused for the spend limit');
      await until('the webhook received', async () => hook.got.length > 0);
      const event = JSON.parse(hook.got[0].body);
      assert.ok(verified(made.json.secret, hook.got[0]), 'the event is signed');
      assert.equal(event.type, 'key.spend_limit_reached', 'the event type');
      assert.deepEqual(
        { key: event.data.key_id, spend: event.data.spend, limit: event.data.spend_limit, request: event.data.request_id, refused: event.data.refused },
        { key: k.id, spend: '0', limit: '0.000001', request: first.headers.get('x-request-id'), refused: true },
        'the event names the key, its spend and limit, and the refused request',
      );

      for (let i = 0; i < 2; i++) assert.equal((await call(stack.gateway.url, '/v1/chat/completions', { key: k.key, body })).status, 403, 'refused again');
      assert.equal((await deliveries()).length, 1, 'further refusals under the same limit fire nothing more');
      const view = await admin(stack.gateway.url, `/admin/keys/${k.id}`);
      assert.equal(view.json.limit_reached, true, `the key view says the limit is reached: ${view.text}`);
      assert.equal((await keysWithUsage(env.db, a.id))[0].status, 'limit reached', 'the dashboard shows the key as limit reached');

      // A new limit value that still fits no hold: its first refusal fires again.
      const changed = await admin(stack.gateway.url, `/admin/keys/${k.id}`, { spend_limit: '0.000002' }, 'PATCH');
      assert.equal(changed.status, 200, changed.text);
      assert.equal((await keysWithUsage(env.db, a.id))[0].status, 'active', 'a new limit no request was refused for: active again');
      assert.equal((await call(stack.gateway.url, '/v1/chat/completions', { key: k.key, body })).status, 403, 'refused under the new limit');
      const all = await deliveries();
      assert.deepEqual(all.map((d) => d.payload.spend_limit), ['0.000001', '0.000002'], 'one event per limit value');
    } finally {
      await hook.close();
    }
  });
});
