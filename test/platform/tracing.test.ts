import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { temporal } from '@temporalio/proto';
import { bundleWorkflowCode, Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { trace } from '@opentelemetry/api';
import { currentTraceparent, flushTracing, startTracing, stopTracing, tracingClientInterceptor, tracingEnabled } from '../../platform/tracing';
import { tracingMiddleware } from '../../api/shared/tracing';
import { workflowsPath } from '../../workers/base';
import { workerTracingOptions, WORKFLOW_TRACING_MODULE } from '../../workers/tracing';
import { call, newAccount, startStack, type Stack } from '../helpers/stack';
import { createOrgWithLogin, platformAdmin, startPanel, unique } from '../helpers/panel';
import type { PanelRuntime } from '../../main/panel-api';
import { freePort } from '../../platform/ports';
import { env } from '../setup/env';
import { setModel, setProvider } from '../../services/catalog/entries';
import { setRoute } from '../../services/catalog/routes';

// Traces over real OTLP/HTTP: an in-process receiver decodes the exporter's JSON and the test
// follows one gateway request from its Koa span to the workflow that settles it.

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes?: Array<{ key: string; value: { stringValue?: string; intValue?: number | string } }>;
  links?: Array<{ traceId: string; spanId: string }>;
}

/** An OTLP/HTTP trace receiver (JSON encoding) keeping every span it is sent. */
async function startReceiver() {
  const spans: OtlpSpan[] = [];
  const contentTypes = new Set<string>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      contentTypes.add(String(req.headers['content-type']));
      if (req.url !== '/v1/traces') return void res.writeHead(404).end();
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { resourceSpans: Array<{ scopeSpans: Array<{ spans: OtlpSpan[] }> }> };
      for (const rs of body.resourceSpans) for (const ss of rs.scopeSpans) spans.push(...ss.spans);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, spans, contentTypes, close: () => new Promise((r) => server.close(r)) };
}

const quiet = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} } as never;

/** A pre-built bundle needs the interceptors module at bundling time. */
const tracedBundle = (domain: 'credits' | 'panel') => bundleWorkflowCode({ workflowsPath: workflowsPath(domain), workflowInterceptorModules: [WORKFLOW_TRACING_MODULE], logger: quiet });

/** The span of `spans` whose parent is `parent` and whose name starts with `prefix`. */
const childOf = (spans: OtlpSpan[], parent: OtlpSpan | undefined, prefix: string) =>
  parent && spans.find((s) => s.parentSpanId === parent.spanId && s.traceId === parent.traceId && s.name.startsWith(prefix));

/** Flushes until `found` returns a complete result (workflow spans arrive when the workflow ends). */
async function waitForSpans<T>(find: () => T, complete: (t: T) => boolean): Promise<T> {
  let found = find();
  for (const deadline = Date.now() + 60_000; !complete(found) && Date.now() < deadline; found = find()) {
    await flushTracing();
    await new Promise((r) => setTimeout(r, 300));
  }
  return found;
}

/** Replays test/histories/<domain> (as test/replay.test.ts does) with the traced bundle: the interceptors add no commands. */
async function replayCommitted(domain: 'credits' | 'panel', bundle: WorkflowBundleWithSourceMap): Promise<void> {
  const dir = path.join(__dirname, '..', 'histories', domain);
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.json'));
  const histories = files.map((f) => {
    const saved = JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')) as { workflowId: string; protobuf: string };
    return { workflowId: saved.workflowId, history: temporal.api.history.v1.History.decode(Buffer.from(saved.protobuf, 'base64')) };
  });
  let replayed = 0;
  for await (const r of Worker.runReplayHistories({ workflowBundle: bundle, ...workerTracingOptions(false) }, histories)) {
    assert.equal(r.error, undefined, `${r.workflowId}: ${String(r.error)}`);
    replayed++;
  }
  assert.ok(files.length > 0, `committed ${domain} histories exist to replay`);
  assert.equal(replayed, files.length, `every committed ${domain} history replayed`);
}

const attr = (s: OtlpSpan, key: string) => {
  const v = s.attributes?.find((a) => a.key === key)?.value;
  return v?.stringValue ?? (v?.intValue === undefined ? undefined : String(v.intValue));
};

describe('traces: off by default', () => {
  it('registers nothing without OTEL_EXPORTER_OTLP_ENDPOINT', () => {
    assert.equal(startTracing({ endpoint: undefined, serviceName: 'test' }), false, 'without an endpoint tracing does not start');
    assert.equal(tracingEnabled(), false, 'tracing is reported off');
    assert.equal(tracingMiddleware('gateway'), null, 'no Koa tracing middleware without tracing');
    assert.equal(tracingClientInterceptor(), null, 'no Temporal client interceptor without tracing');
    assert.deepEqual(workerTracingOptions(), {}, 'no worker tracing options without tracing');
    assert.equal(currentTraceparent(), undefined, 'no traceparent is recorded with outcomes');
    // No tracer provider: the API's no-op span, which records nothing.
    const span = trace.getTracer('probe').startSpan('probe');
    assert.equal(span.isRecording(), false, 'the no-op span records nothing');
    assert.equal(span.spanContext().traceId, '0'.repeat(32), 'the no-op span has the all-zero trace id');
  });
});

describe('traces: a gateway request to its settlement workflow (OTLP/HTTP)', function () {
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let stack: Stack;
  let bundle: WorkflowBundleWithSourceMap;

  before(async function () {
    this.timeout(180_000);
    receiver = await startReceiver();
    assert.equal(startTracing({ endpoint: receiver.url, serviceName: 'tracing-test' }), true, 'tracing starts with the receiver as endpoint');
    bundle = await tracedBundle('credits');
    stack = await startStack({ workflowBundle: bundle });
  });
  after(async function () {
    this.timeout(60_000);
    await stack?.close();
    await stopTracing();
    await receiver?.close();
  });

  it('links the Koa span to the settlement relay span, whose trace holds the workflow and activity spans', async function () {
    this.timeout(90_000);
    const { key } = await newAccount();
    const res = await call(stack.gateway.url, '/v1/chat/completions', { key, body: { model: 'sim-gpt', messages: [{ role: 'user', content: 'hi [sim tokens=3]' }] } });
    assert.equal(res.status, 200, res.text);
    const requestId = res.headers.get('x-gateway-request-id')!;
    assert.ok(requestId, 'the answer carries x-gateway-request-id');

    const found = await waitForSpans(
      () => {
        const spans = receiver.spans;
        const koa = spans.find((s) => s.name === 'POST /v1/chat/completions' && attr(s, 'gateway.request_id') === requestId);
        const relay = koa && spans.find((s) => s.name === 'settlement.relay' && s.links?.some((l) => l.traceId === koa.traceId && l.spanId === koa.spanId));
        const start = childOf(spans, relay, 'StartWorkflow:settlementWorkflow');
        const run = childOf(spans, start, 'RunWorkflow:settlementWorkflow');
        const startActivity = childOf(spans, run, 'StartActivity:');
        const runActivity = childOf(spans, startActivity, 'RunActivity:');
        return { koa, relay, start, run, startActivity, runActivity };
      },
      (f) => f.runActivity !== undefined,
    );
    const names = [...new Set(receiver.spans.map((s) => s.name))].join(', ');
    assert.ok(found.koa, `no Koa span for ${requestId}; spans: ${names}`);
    assert.equal(attr(found.koa, 'request.id'), requestId, 'a billed request answers x-request-id = x-gateway-request-id');
    assert.equal(attr(found.koa, 'http.route'), '/v1/chat/completions', 'the Koa span names the matched route');
    assert.ok(found.relay, `no settlement.relay span linked to the request's span; spans: ${names}`);
    assert.ok(found.start, 'the traced client started the settlement workflow inside the relay span');
    assert.ok(found.run, 'the workflow span is the start span\'s child');
    assert.ok(found.startActivity && found.runActivity, 'the activity spans are the workflow span\'s descendants');
    assert.match(found.runActivity.name, /^RunActivity:settle/, 'the activity under the settlement workflow is the settle activity');
    // The exporter speaks OTLP/HTTP JSON.
    assert.deepEqual([...receiver.contentTypes], ['application/json'], 'the exporter sends OTLP/HTTP JSON only');
    const settled = await env.db('reservations').where({ id: requestId }).first('status');
    assert.equal(settled.status, 'settled', 'the traced request settled');
  });

  it('issue 33 item 10: a client span per provider attempt, child of the request span: provider, path, status, fallback', async function () {
    this.timeout(90_000);
    const tag = randomUUID().slice(0, 8);
    const down = `trace-down-${tag}`;
    await setProvider(env.db, { id: down, kind: 'openai', 'base-url': 'http://127.0.0.1:1/', 'api-keys': 'k' });
    const model = `traced-${tag}`;
    await setModel(env.db, { id: model, provider: down, upstream: 'gone', capabilities: 'text', tiers: 'pro', input: '0.000001', output: '0.000002', cache: '0', 'cache-write': '0' });
    await setRoute(env.db, { model, provider: down, upstream: 'gone', priority: 0 });
    await setRoute(env.db, { model, provider: 'simulator', upstream: 'sim-gpt-2026-01-15', priority: 1 });
    const { key } = await newAccount();
    const res = await call(stack.gateway.url, '/v1/chat/completions', { key, body: { model, messages: [{ role: 'user', content: 'hi [sim tokens=3]' }] } });
    assert.equal(res.status, 200, `the second route answers: ${res.text}`);
    const requestId = res.headers.get('x-gateway-request-id')!;
    const found = await waitForSpans(
      () => {
        const koa = receiver.spans.find((s) => s.name === 'POST /v1/chat/completions' && attr(s, 'gateway.request_id') === requestId);
        const attempts = koa ? receiver.spans.filter((s) => s.parentSpanId === koa.spanId && s.traceId === koa.traceId && s.name === 'POST v1/chat/completions') : [];
        return { koa, attempts };
      },
      (f) => f.attempts.length >= 2,
    );
    assert.ok(found.koa, 'the request span was exported');
    const view = found.attempts
      .map((s) => ({ provider: attr(s, 'gateway.provider'), attempt: attr(s, 'gateway.route.attempt'), fallback: s.attributes?.find((a) => a.key === 'gateway.fallback')?.value, status: attr(s, 'http.response.status_code') ?? attr(s, 'error.type') }))
      .sort((a, b) => Number(a.attempt) - Number(b.attempt));
    assert.deepEqual(
      view,
      [
        { provider: down, attempt: '0', fallback: { boolValue: false }, status: 'connection' },
        { provider: 'simulator', attempt: '1', fallback: { boolValue: true }, status: '200' },
      ],
      'one client span per attempt: the refused connection, then the fallback route that answered',
    );
  });

  it('replays the committed credits histories with the tracing interceptors in the bundle', async function () {
    this.timeout(120_000);
    await replayCommitted('credits', bundle);
  });
});

describe('traces: a panel request to its node-op workflow (OTLP/HTTP)', function () {
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let panel: PanelRuntime;
  let bundle: WorkflowBundleWithSourceMap;
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'panel-trace-'));

  before(async function () {
    this.timeout(180_000);
    receiver = await startReceiver();
    assert.equal(startTracing({ endpoint: receiver.url, serviceName: 'tracing-test' }), true, 'tracing starts with the receiver as endpoint');
    let webPort: number;
    [bundle, webPort] = await Promise.all([tracedBundle('panel'), freePort()]);
    fs.chmodSync(root, 0o755); // nginx and PHP-FPM workers (www-data) read below it
    panel = await startPanel({
      databaseUrl: env.databaseUrl,
      nodeOps: { taskQueue: `panel-trace-${randomUUID()}`, timeoutMs: 2500, pollMs: 1000 },
      hosting: { root, webPort, webHost: '127.0.0.1', workflowBundle: bundle },
    });
  });
  after(async function () {
    this.timeout(60_000);
    await panel?.close();
    await stopTracing();
    await receiver?.close();
    fs.rmSync(root, { recursive: true, force: true });
  });

  it('puts the node-op workflow a site creation starts, and its activities, in the request\'s trace', async function () {
    this.timeout(120_000);
    const admin = await platformAdmin(panel.url);
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const reseller = await createOrgWithLogin(provider.client, { type: 'reseller' });
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const r = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: `${unique('trace')}.example.com` });
    assert.equal(r.status, 201, JSON.stringify(r.json));
    const found = await waitForSpans(
      () => {
        const spans = receiver.spans;
        const koa = spans.find((s) => s.name === 'POST /v1/orgs/:id/sites' && attr(s, 'url.path') === `/v1/orgs/${customer.id}/sites`);
        const start = childOf(spans, koa, 'StartWorkflow:nodeOpWorkflow');
        const run = childOf(spans, start, 'RunWorkflow:nodeOpWorkflow');
        const startActivity = childOf(spans, run, 'StartActivity:');
        const runActivity = childOf(spans, startActivity, 'RunActivity:');
        return { koa, start, run, runActivity };
      },
      (f) => f.runActivity !== undefined,
    );
    const names = [...new Set(receiver.spans.map((s) => s.name))].join(', ');
    assert.ok(found.koa, `no Koa span for the site creation; spans: ${names}`);
    assert.match(attr(found.koa, 'request.id') ?? '', /\S/, 'the panel request id is an attribute');
    assert.equal(attr(found.koa, 'http.response.status_code'), '201', 'the Koa span records the 201 of the site creation');
    assert.ok(found.start, `the node-op start is the request span's child; spans: ${names}`);
    assert.ok(found.run && found.runActivity, `the workflow and its activities follow; spans: ${names}`);
  });

  it('replays the committed panel histories with the tracing interceptors in the bundle', async function () {
    this.timeout(180_000);
    await replayCommitted('panel', bundle);
  });
});
