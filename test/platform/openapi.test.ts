import assert from 'node:assert/strict';
import http from 'node:http';
import path from 'node:path';
import { chromium } from 'playwright-core';
import type Koa from 'koa';
import type Router from '@koa/router';
import { Client, Connection } from '@temporalio/client';
import { createGatewayApp, type GatewayDeps } from '../../api/gateway/app';
import { adminRoutes } from '../../api/gateway/admin/routes';
import { createPanelApp } from '../../api/panel/app';
import { openApiDocument, openApiPath, type ApiDescription } from '../../api/shared/openapi';
import { gatewayApi } from '../../api/gateway/openapi';
import { adminApi } from '../../api/gateway/admin/openapi';
import { testRunsApi } from '../../api/testruns/openapi';
import { panelApi } from '../../api/panel/openapi';
import { CacheInvalidation } from '../../platform/cache-invalidation';
import { Catalog } from '../../services/catalog/catalog';
import { useStack } from '../helpers/stack';
import { platformAdmin, usePanel } from '../helpers/panel';
import { env } from '../setup/env';

// Every route a Koa router of an API registers has an operation in that API's document, and
// nothing else is described; each document is a well-formed OpenAPI 3.1 document, served.

/** Routes no document describes, each with its reason. */
const EXEMPT: Record<string, string> = {
  'GET /openapi.json': 'the document itself',
  'GET /admin/openapi.json': 'the document itself',
  'GET /testruns/openapi.json': 'the document itself',
  'GET /docs': 'the HTML page rendering the documents',
  'GET /docs/assets/:file': "swagger-ui's static files",
};

/** METHOD path of every route registered on the app's routers (HEAD is Koa's automatic twin of GET). */
function registeredRoutes(app: Koa): string[] {
  const out = new Set<string>();
  for (const mw of app.middleware as (Koa.Middleware & { router?: Router })[]) {
    for (const layer of mw.router?.stack ?? []) {
      for (const m of layer.methods) if (m !== 'HEAD') out.add(`${m} ${layer.path}`);
    }
  }
  return [...out].sort();
}

const described = (api: ApiDescription) => api.operations.map((o) => `${o.method.toUpperCase()} ${o.path}`);

function assertComplete(routes: string[], apis: ApiDescription[]) {
  const documented = new Set(apis.flatMap(described));
  const missing = routes.filter((r) => !documented.has(r) && !(r in EXEMPT));
  assert.deepEqual(missing, [], 'routes without an operation in their OpenAPI document');
  const stale = [...documented].filter((d) => !routes.includes(d));
  assert.deepEqual(stale, [], 'operations that no router serves');
}

type Doc = { openapi: string; paths: Record<string, Record<string, Operation>>; components?: { schemas?: Record<string, unknown>; securitySchemes?: Record<string, unknown> }; security?: Record<string, string[]>[] };
type Operation = { operationId: string; parameters?: { in: string; name: string; required?: boolean }[]; responses: Record<string, { content?: Record<string, unknown> }>; security?: Record<string, string[]>[]; requestBody?: unknown };

/** What OpenAPI 3.1 requires of what we generate; schemathesis loads and validates the served documents as well (bench/fuzz.sh). */
function assertWellFormed(doc: Doc) {
  assert.equal(doc.openapi, '3.1.0', 'the document declares OpenAPI 3.1.0');
  const ids = new Set<string>();
  const schemes = Object.keys(doc.components?.securitySchemes ?? {});
  for (const req of doc.security ?? []) for (const k of Object.keys(req)) assert.ok(schemes.includes(k), `security ${k} is declared`);
  for (const [path, item] of Object.entries(doc.paths)) {
    assert.match(path, /^\/[^:*]*$/, `${path}: OpenAPI path template`);
    const templated = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();
    for (const [method, op] of Object.entries(item)) {
      const where = `${method.toUpperCase()} ${path}`;
      assert.ok(!ids.has(op.operationId), `${where}: operationId ${op.operationId} is unique`);
      ids.add(op.operationId);
      const pathParams = (op.parameters ?? []).filter((p) => p.in === 'path');
      assert.deepEqual(pathParams.map((p) => p.name).sort(), templated, `${where}: every path parameter declared`);
      assert.ok(pathParams.every((p) => p.required === true), `${where}: path parameters are required`);
      assert.ok(Object.keys(op.responses).some((s) => /^2\d\d$/.test(s)), `${where}: a success response`);
      assert.ok(op.responses.default?.content?.['application/json'], `${where}: the error envelope as default response`);
      for (const req of op.security ?? []) for (const k of Object.keys(req)) assert.ok(schemes.includes(k), `${where}: security ${k} is declared`);
    }
  }
  // every $ref resolves
  const text = JSON.stringify(doc);
  for (const [, name] of text.matchAll(/"\$ref":"#\/components\/schemas\/([^"]+)"/g)) assert.ok(doc.components?.schemas?.[name], `$ref ${name} resolves`);
}

/** fetch refuses TRACE: a plain request, the answer's status, headers and JSON body. */
function request(url: string, method: string): Promise<{ status: number; headers: http.IncomingHttpHeaders; json: { error: { code: string } } }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, json: JSON.parse(text) }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('OpenAPI documents', () => {
  let temporal: Client;
  let connection: Connection;
  let invalidation: CacheInvalidation;
  before(async () => {
    connection = await Connection.connect({ address: env.temporalAddress });
    temporal = new Client({ connection });
    invalidation = new CacheInvalidation(env.databaseUrl, env.logger);
  });
  after(async () => {
    await connection.close();
  });

  it('describes every route of the gateway port (gateway, admin API, test-run API) and nothing more', () => {
    const admin = adminRoutes({ db: env.db, token: null, defaultKeyFormat: 'gw_ai', variant: 'credits', invalidation });
    const deps = { db: env.db, temporal, logger: env.logger, catalog: new Catalog(env.db, invalidation), admin, upstreamTimeoutMs: 1000 } as unknown as GatewayDeps;
    const routes = registeredRoutes(createGatewayApp(deps));
    assert.ok(routes.includes('POST /v1/chat/completions') && routes.includes('POST /admin/keys') && routes.includes('POST /api/projects/:id/runs'), 'the routers were found');
    assertComplete(routes, [gatewayApi('credits'), adminApi(), testRunsApi()]);
  });

  it('describes every route of the panel API and nothing more', () => {
    const app = createPanelApp({
      db: env.db,
      temporal,
      logger: env.logger,
      logins: { auth: {} as never, issuer: 'test', secureCookies: false },
      dns: {} as never,
      alerts: { webhooks: { allowTargets: [] } as never },
      imports: {} as never,
    });
    const routes = registeredRoutes(app);
    assert.ok(routes.includes('POST /v1/orgs') && routes.includes('POST /v1/orgs/:id/imports'), 'the routers were found');
    assertComplete(routes, [panelApi()]);
  });

  it('fails on a route without an operation (the check itself)', () => {
    assert.throws(() => assertComplete(['GET /v1/orgs', 'GET /v1/unknown'], [panelApi()]), /routes without an operation/);
  });

  it('generates well-formed OpenAPI 3.1 documents for all five (both gateway variants)', () => {
    for (const api of [gatewayApi('credits'), gatewayApi('keyed'), adminApi(), testRunsApi(), panelApi()]) {
      const doc = openApiDocument(api) as unknown as Doc;
      assertWellFormed(doc);
      assert.equal(Object.values(doc.paths).reduce((n, item) => n + Object.keys(item).length, 0), api.operations.length, `${api.title}: one operation each`);
    }
    const gateway = openApiDocument(gatewayApi('credits')) as unknown as Doc;
    const chat = gateway.paths['/v1/chat/completions'].post as Operation & { responses: Record<string, { headers?: Record<string, unknown>; content?: Record<string, unknown> }> };
    assert.ok(chat.responses['200'].content?.['text/event-stream'], 'streaming answers are described');
    assert.deepEqual(Object.keys(chat.responses['200'].headers ?? {}).sort(), ['x-gateway-cache', 'x-gateway-cost', 'x-gateway-request-id', 'x-request-id'], 'the answer headers, the response cache header included');
    assert.ok((chat.parameters ?? []).some((p) => p.in === 'header' && p.name === 'x-gateway-cache'), 'the response-cache opt-in header is a request parameter');
    assert.ok(chat.responses.default.headers && 'retry-after' in chat.responses.default.headers, 'the error answer of chat completions documents retry-after');
    // the request schema is the handler's own: a field the chat schema has is in the document
    assert.ok(JSON.stringify(chat.requestBody).includes('"stream_options"'), 'the chat request schema has stream_options');
    assert.equal(openApiPath('/v1/orgs/:id/logins'), '/v1/orgs/{id}/logins', "Koa's :param becomes an OpenAPI {param} template");
  });

  describe('served on the gateway port', () => {
    const stack = useStack({ adminToken: 'openapi-admin-token' });
    it('serves the three documents and /docs with its assets, without a key', async () => {
      for (const [path, title] of [
        ['/openapi.json', 'Inference gateway (credits variant)'],
        ['/admin/openapi.json', 'Gateway admin API'],
        ['/testruns/openapi.json', 'Test-run API'],
      ]) {
        const res = await fetch(stack.gateway.url + path);
        assert.equal(res.status, 200, path);
        assert.match(res.headers.get('content-type') ?? '', /application\/json/, `${path} is served as JSON`);
        const doc = (await res.json()) as Doc & { info: { title: string } };
        assert.equal(doc.info.title, title, `${path} is the ${title} document`);
        assertWellFormed(doc);
      }
      const page = await fetch(`${stack.gateway.url}/docs`);
      assert.equal(page.status, 200, '/docs answers');
      const html = await page.text();
      assert.match(html, /swagger-ui-bundle\.js/, 'the /docs page loads the swagger-ui bundle');
      const init = await (await fetch(`${stack.gateway.url}/docs/assets/init.js`)).text();
      assert.match(init, /"\/admin\/openapi\.json"/, 'the swagger-ui init script lists the admin document');
      const bundle = await fetch(`${stack.gateway.url}/docs/assets/swagger-ui-bundle.js`);
      assert.equal(bundle.status, 200, 'the swagger-ui bundle is served');
      assert.ok((await bundle.arrayBuffer()).byteLength > 100_000, 'the swagger-ui bundle from node_modules');
      // a method no route has (found by schemathesis: a bare 501 before) is a 405 in the envelope, with Allow
      for (const path of ['/v1/chat/completions', '/healthz', '/install.sh', '/admin/keys', '/api/runs/x']) {
        const trace = await request(stack.gateway.url + path, 'TRACE');
        assert.equal(trace.status, 405, path);
        assert.equal(trace.json.error.code, 'method_not_allowed', path);
        assert.ok(trace.headers['x-request-id'], path);
      }
      assert.match((await request(`${stack.gateway.url}/v1/models`, 'TRACE')).headers.allow ?? '', /GET/, 'a 405 names GET in its Allow header');
      // a query past Node's header limit: 431 in the envelope (a bare 431 before, found by schemathesis)
      const long = await request(`${stack.gateway.url}/v1/usage?model=${'%C3%BA'.repeat(4000)}`, 'GET');
      assert.equal(long.status, 431, 'a query past the header limit is refused with 431');
      assert.equal(long.json.error.code, 'header_too_large', 'the 431 is in the envelope with header_too_large');
      assert.ok(long.headers['x-request-id'], 'a 431 answer carries x-request-id');
      // swagger-ui renders the document in chromium with every request kept to this server (no CDN)
      const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
      try {
        const page = await browser.newPage();
        const foreign: string[] = [];
        page.on('request', (r) => void (r.url().startsWith(stack.gateway.url) || r.url().startsWith('data:') || foreign.push(r.url())));
        await page.goto(`${stack.gateway.url}/docs`);
        await page.locator('.opblock-summary-path', { hasText: '/v1/chat/completions' }).first().waitFor({ timeout: 30_000 });
        await page.screenshot({ path: path.join('test-artifacts', 'openapi', 'docs.png') });
        assert.deepEqual(foreign, [], 'swagger-ui made no request beyond this server');
      } finally {
        await browser.close();
      }
      const unknown = await fetch(`${stack.gateway.url}/docs/assets/..%2Fpackage.json`);
      assert.equal(unknown.status, 404, 'a path escaping the assets folder is not found');
      assert.equal(((await unknown.json()) as { error: { code: string } }).error.code, 'route_not_found', 'the 404 is in the envelope with route_not_found');
    });

    it("takes instants with offsets PostgreSQL refuses (the longer fuzz run's 500s), in UTC", async () => {
      const admin = { authorization: 'Bearer openapi-admin-token', 'content-type': 'application/json' };
      const made = await fetch(`${stack.gateway.url}/admin/accounts`, { method: 'POST', headers: admin, body: JSON.stringify({ name: 'offset', plan_expires_at: '9814-01-29T01:47:32.7765+17:25' }) });
      assert.equal(made.status, 201, await made.clone().text());
      assert.match(JSON.stringify(await made.json()), /9814-01-28T08:22:32\.776/, 'plan_expires_at is stored in UTC');
      const report = await fetch(`${stack.gateway.url}/admin/reports/uncovered?since=${encodeURIComponent('5352-08-24T02:33:35.94+20:46')}`, { headers: admin });
      assert.equal(report.status, 200, await report.clone().text());
    });
  });

  describe('served on the panel port', () => {
    const base = usePanel();
    it('serves its document and /docs before the console page', async () => {
      const res = await fetch(`${base()}/openapi.json`);
      assert.equal(res.status, 200, 'the panel serves its document');
      const doc = (await res.json()) as Doc & { info: { title: string } };
      assert.equal(doc.info.title, 'Hosting panel API', "the panel's document is the Hosting panel API");
      assertWellFormed(doc);
      const page = await fetch(`${base()}/docs`, { headers: { accept: 'text/html' } });
      assert.equal(page.status, 200, 'the panel serves /docs before the console page');
      assert.match(await page.text(), /\/docs\/assets\/init\.js/, "the panel's /docs page loads its init script");
      const long = await request(`${base()}/v1/orgs?after=${'%C3%BA'.repeat(4000)}`, 'GET');
      assert.equal(long.status, 431, 'a query past the header limit is refused with 431 by the panel');
      assert.equal(long.json.error.code, 'header_too_large', "the panel's 431 is in its error body with header_too_large");
      // a method a route lacks is a 405 in the panel's error body, with Allow (404 or a bare 501 before)
      for (const [method, path] of [['TRACE', '/v1/orgs'], ['TRACE', '/healthz'], ['TRACE', '/v1/auth/sign-in'], ['PUT', '/v1/alerts']]) {
        const res = await request(base() + path, method);
        assert.equal(res.status, 405, `${method} ${path}`);
        assert.equal(res.json.error.code, 'method_not_allowed', `${method} ${path}: the 405 says method_not_allowed`);
        assert.ok(res.headers.allow, `${method} ${path}: Allow`);
      }
    });

    it("refuses NUL in text and takes instants with any offset (the longer fuzz run's 500s)", async () => {
      const admin = await platformAdmin(base());
      const nul = await admin.req('POST', '/v1/account/tokens', { name: 'a\u0000b' });
      assert.equal(nul.status, 400, 'a name with NUL is refused with 400');
      assert.equal(nul.json.error.code, 'validation_failed', 'the NUL refusal is a validation failure');
      const alerts = await admin.get(`/v1/alerts?before=${encodeURIComponent('0418-07-27T10:31:53.646868+23:50')}`);
      assert.equal(alerts.status, 200, JSON.stringify(alerts.json));
    });
  });
});
