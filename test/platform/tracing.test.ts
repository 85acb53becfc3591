import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { temporal } from '@temporalio/proto';
import { bundleWorkflowCode, Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { flushTracing, startTracing, stopTracing, tracingClientInterceptor, tracingEnabled } from '../../platform/tracing';
import { tracingMiddleware } from '../../api/shared/tracing';
import { workflowsPath } from '../../workers/base';
import { workerTracingOptions, WORKFLOW_TRACING_MODULE } from '../../workers/tracing';
import { call, newAccount, startStack, type Stack } from '../helpers/stack';
import { env } from '../setup/env';

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

const attr = (s: OtlpSpan, key: string) => {
  const v = s.attributes?.find((a) => a.key === key)?.value;
  return v?.stringValue ?? (v?.intValue === undefined ? undefined : String(v.intValue));
};

describe('traces: off by default', () => {
  it('registers nothing without OTEL_EXPORTER_OTLP_ENDPOINT', () => {
    assert.equal(startTracing({ endpoint: undefined, serviceName: 'test' }), false);
    assert.equal(tracingEnabled(), false);
    assert.equal(tracingMiddleware('gateway'), null);
    assert.equal(tracingClientInterceptor(), null);
    assert.deepEqual(workerTracingOptions(), {});
  });
});

describe('traces: a gateway request to its settlement workflow (OTLP/HTTP)', function () {
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let stack: Stack;
  let bundle: WorkflowBundleWithSourceMap;

  before(async function () {
    this.timeout(180_000);
    receiver = await startReceiver();
    assert.equal(startTracing({ endpoint: receiver.url, serviceName: 'tracing-test' }), true);
    // Pre-built bundles (tests) need the interceptors module at bundling time.
    const quiet = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} } as never;
    bundle = await bundleWorkflowCode({ workflowsPath: workflowsPath('credits'), workflowInterceptorModules: [WORKFLOW_TRACING_MODULE], logger: quiet });
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
    assert.ok(requestId);

    const find = () => {
      const koa = receiver.spans.find((s) => s.name === 'POST /v1/chat/completions' && attr(s, 'gateway.request_id') === requestId);
      const relay = koa && receiver.spans.find((s) => s.name === 'settlement.relay' && s.links?.some((l) => l.traceId === koa.traceId && l.spanId === koa.spanId));
      const child = (parent: OtlpSpan | undefined, prefix: string) => parent && receiver.spans.find((s) => s.parentSpanId === parent.spanId && s.traceId === parent.traceId && s.name.startsWith(prefix));
      const start = child(relay, 'StartWorkflow:settlementWorkflow');
      const run = child(start, 'RunWorkflow:settlementWorkflow');
      const startActivity = child(run, 'StartActivity:');
      const runActivity = child(startActivity, 'RunActivity:');
      return { koa, relay, start, run, startActivity, runActivity };
    };
    let found = find();
    for (const deadline = Date.now() + 60_000; !found.runActivity && Date.now() < deadline; found = find()) {
      await flushTracing();
      await new Promise((r) => setTimeout(r, 300));
    }
    const names = [...new Set(receiver.spans.map((s) => s.name))].join(', ');
    assert.ok(found.koa, `no Koa span for ${requestId}; spans: ${names}`);
    assert.equal(attr(found.koa, 'request.id'), requestId, 'a billed request answers x-request-id = x-gateway-request-id');
    assert.equal(attr(found.koa, 'http.route'), '/v1/chat/completions');
    assert.ok(found.relay, `no settlement.relay span linked to the request's span; spans: ${names}`);
    assert.ok(found.start, 'the traced client started the settlement workflow inside the relay span');
    assert.ok(found.run, 'the workflow span is the start span\'s child');
    assert.ok(found.startActivity && found.runActivity, 'the activity spans are the workflow span\'s descendants');
    assert.match(found.runActivity.name, /^RunActivity:settle/);
    // The exporter speaks OTLP/HTTP JSON.
    assert.deepEqual([...receiver.contentTypes], ['application/json']);
    const settled = await env.db('reservations').where({ id: requestId }).first('status');
    assert.equal(settled.status, 'settled');
  });

  it('replays the committed credits histories with the tracing interceptors in the bundle', async function () {
    this.timeout(120_000);
    const dir = path.join(__dirname, '..', 'histories', 'credits');
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
    assert.equal(replayed, files.length);
  });
});
