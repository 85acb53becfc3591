import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import { metricsMiddleware } from '../../api/shared/metrics';
import { call, newAccount, useStack } from '../helpers/stack';
import { usePanel } from '../helpers/panel';
import { env } from '../setup/env';
import { freePort } from '../../platform/ports';

// Prometheus /metrics on the gateway and panel ports, scraped after real traffic.

/** The sample value of one series, or undefined when the scrape lacks it. */
function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && want.every((w) => l.includes(w)));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('metrics: gateway /metrics', () => {
  const stack = useStack();

  it('counts requests by matched route template, without an API key', async () => {
    const { key } = await newAccount();
    const chat = await call(stack.gateway.url, '/v1/chat/completions', { key, body: { model: 'sim-gpt', messages: [{ role: 'user', content: 'hi [sim tokens=3]' }] } });
    assert.equal(chat.status, 200, chat.text);
    assert.equal((await call(stack.gateway.url, '/v1/models/sim-gpt', { key })).status, 200, 'GET /v1/models/sim-gpt with a key answers 200');
    assert.equal((await call(stack.gateway.url, '/v1/models/sim-gpt')).status, 401, 'GET /v1/models/sim-gpt without a key answers 401');

    const res = await fetch(`${stack.gateway.url}/metrics`);
    assert.equal(res.status, 200, '/metrics is served without an API key');
    assert.match(res.headers.get('content-type') ?? '', /text\/plain/, '/metrics is in the Prometheus text format');
    const text = await res.text();
    assert.ok((sample(text, 'http_requests_total', { app: 'gateway', route: '/v1/chat/completions', status: '200', method: 'POST' }) ?? 0) >= 1, text);
    assert.ok((sample(text, 'http_requests_total', { app: 'gateway', route: '/v1/models/:id', status: '200' }) ?? 0) >= 1, 'GET /v1/models/:id is counted under its route pattern');
    assert.ok((sample(text, 'http_request_duration_seconds_count', { app: 'gateway', route: '/v1/chat/completions', status: '200', model: 'sim-gpt' }) ?? 0) >= 1, text);
    assert.ok((sample(text, 'http_requests_total', { app: 'gateway', route: '/v1/models/:id', status: '200', model: '' }) ?? 0) >= 1, 'unbilled requests have no model');
    // The raw URL never becomes a label value: cardinality stays bounded.
    assert.ok(!text.includes('route="/v1/models/sim-gpt"'), 'the raw URL is not a label value');
    assert.match(text, /^process_cpu_user_seconds_total /m, 'the process metrics are included');
    const { rows } = await env.db.raw(`SELECT count(*)::int AS n FROM reservations WHERE status = 'held'`);
    assert.match(text, /^# TYPE credits_outbox_backlog gauge/m, 'the outbox backlog gauge is declared');
    assert.ok((sample(text, 'credits_hold_attempts_total', { model: 'sim-gpt', result: 'taken' }) ?? 0) >= 1, text);
    assert.equal(Number(/^credits_holds_open (\S+)/m.exec(text)?.[1]), rows[0].n, 'credits_holds_open equals the held reservations in the database');
  });

  it('counts upstream calls, settlements and workflow starts, and includes the Temporal SDK metrics', async function () {
    this.timeout(60_000);
    const { key } = await newAccount();
    const ok = await call(stack.gateway.url, '/v1/chat/completions', { key, body: { model: 'sim-gpt', messages: [{ role: 'user', content: 'hi [sim tokens=3]' }] } });
    assert.equal(ok.status, 200, ok.text);
    const failed = await call(stack.gateway.url, '/v1/chat/completions', { key, body: { model: 'sim-gpt', messages: [{ role: 'user', content: 'hi [sim status=500]' }] } });
    assert.ok(failed.status >= 500, failed.text);
    const id = ok.headers.get('x-gateway-request-id')!;
    for (const deadline = Date.now() + 30_000; (await env.db('reservations').where({ id }).first('status')).status === 'held'; ) {
      assert.ok(Date.now() < deadline, 'the request was not settled within 30 s');
      await new Promise((r) => setTimeout(r, 200));
    }
    await new Promise((r) => setTimeout(r, 1500)); // the SDK's buffered metrics are drained every second
    const text = await (await fetch(`${stack.gateway.url}/metrics`)).text();
    const { rows } = await env.db.raw(`SELECT p.id FROM models m JOIN providers p ON p.id = m.provider_id WHERE m.id = 'sim-gpt'`);
    const provider = rows[0].id as string;
    assert.ok((sample(text, 'upstream_request_duration_seconds_count', { provider, status: '200' }) ?? 0) >= 1, text);
    assert.ok((sample(text, 'upstream_errors_total', { provider, kind: 'http_500' }) ?? 0) >= 1, text);
    assert.ok((sample(text, 'credits_holds_resolved_total', { status: 'settled' }) ?? 0) >= 1, text);
    assert.ok(Number(/^credits_settlement_lag_seconds_count (\S+)/m.exec(text)?.[1]) >= 1, text);
    assert.ok((sample(text, 'workflow_starts_total', { workflow_type: 'settlementWorkflow', result: 'started' }) ?? 0) >= 1, text);
    // Core's own metrics, from the buffered runtime the root hooks installed (as npm start does).
    assert.ok((sample(text, 'temporal_workflow_completed', { workflow_type: 'settlementWorkflow' }) ?? 0) >= 1, text.split('\n').filter((l) => l.startsWith('temporal_')).slice(0, 40).join('\n'));
  });
});

describe('metrics: panel /metrics', () => {
  const base = usePanel();

  it('counts the panel requests by matched route', async () => {
    assert.equal((await fetch(`${base()}/healthz`)).status, 200, 'the panel /healthz answers 200');
    const text = await (await fetch(`${base()}/metrics`)).text();
    assert.ok((sample(text, 'http_requests_total', { app: 'panel', route: '/healthz', status: '200' }) ?? 0) >= 1, text);
    // The gauges are PostgreSQL's counts at scrape time.
    const { rows } = await env.db.raw(`SELECT count(*)::int AS n FROM panel_nodes WHERE state = 'alive'`);
    assert.equal(sample(text, 'panel_nodes', { state: 'alive' }) ?? 0, rows[0].n, text);
    assert.match(text, /^# TYPE panel_alerts gauge/m, 'the panel alerts gauge is declared');
    assert.match(text, /^# TYPE panel_import_items gauge/m, 'the panel import items gauge is declared');
  });
});

describe('metrics: METRICS_TOKEN and METRICS=off', () => {
  async function serve(settings: { enabled: boolean; token?: string }) {
    const app = new Koa();
    app.use(metricsMiddleware('probe', settings));
    app.use((ctx) => void (ctx.body = 'ok'));
    const server = app.listen(0);
    await new Promise((r) => server.once('listening', r));
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => new Promise((r) => server.close(r)) };
  }

  it('requires the bearer token when one is set', async () => {
    const s = await serve({ enabled: true, token: 'scrape-secret' });
    try {
      assert.equal((await fetch(`${s.url}/metrics`)).status, 401, 'no token: 401');
      assert.equal((await fetch(`${s.url}/metrics`, { headers: { authorization: 'Bearer wrong' } })).status, 401, 'a wrong bearer token: 401');
      const ok = await fetch(`${s.url}/metrics`, { headers: { authorization: 'Bearer scrape-secret' } });
      assert.equal(ok.status, 200, 'the right bearer token is let in');
      assert.match(await ok.text(), /http_requests_total/, 'the scrape lists http_requests_total');
    } finally {
      await s.close();
    }
  });

  it('is not served when disabled', async () => {
    const s = await serve({ enabled: false });
    try {
      const res = await fetch(`${s.url}/metrics`);
      assert.equal(await res.text(), 'ok', 'with METRICS off, /metrics falls through to the app');
    } finally {
      await s.close();
    }
  });
});

describe('metrics: TEMPORAL_METRICS_ADDR', () => {
  it('has the Temporal SDK serve its metrics on that address instead of /metrics', async function () {
    this.timeout(60_000);
    const address = `127.0.0.1:${await freePort()}`;
    // A process of its own: the SDK runtime is installed once per process (this one's by the root hooks).
    const code = `
      const { DefaultLogger, NativeConnection } = require('@temporalio/worker');
      const { installTemporalRuntime } = require('./platform/temporal-metrics');
      installTemporalRuntime({ logger: new DefaultLogger('ERROR'), metrics: true, prometheusAddress: process.env.ADDR });
      NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS }).then(() => process.stdout.write('ready\\n'));
      setInterval(() => {}, 1000);`;
    const child = spawn(process.execPath, ['--require', 'tsx/cjs', '-e', code], { cwd: path.join(__dirname, '..', '..'), env: { ...process.env, ADDR: address, TEMPORAL_ADDRESS: env.temporalAddress }, stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      await new Promise<void>((resolve, reject) => {
        child.stdout!.on('data', (d: Buffer) => d.toString().includes('ready') && resolve());
        child.once('exit', (c) => reject(new Error(`the child exited (${c}) before connecting`)));
      });
      const res = await fetch(`http://${address}/metrics`);
      assert.equal(res.status, 200, 'the SDK serves its metrics on TEMPORAL_METRICS_ADDR');
      const text = await res.text();
      assert.match(text, /^temporal_request\{.*operation="GetSystemInfo"/m, text);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
