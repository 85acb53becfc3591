import Router from '@koa/router';
import type { Client } from '@temporalio/client';
import type { Context, Middleware, Next } from 'koa';
import { z } from 'zod';
import {
  addCase,
  archiveCase,
  caseView,
  ciTokenProject,
  configurationView,
  findCase,
  findConfiguration,
  getProject,
  isUuid,
  listCases,
  listConfigurations,
  replaceCase,
  setConfiguration,
} from '../../services/testruns/projects';
import { GatewayError } from '../../domain/shared/errors';
import { caseInputSchema, configurationInputSchema, configurationSchema, RUN_STATUSES, runCreateSchema } from '../../domain/testruns/runs';
import type { Db } from '../../platform/db';
import { readJsonObject } from '../shared/http';
import { serviceErrors } from '../shared/service-errors';
import { validate } from '../shared/validate';
import { cancelRun, createRun, executeRun, listRuns, reconcileRun, runView, type Project } from '../../services/testruns/runs';

export interface TestRunRouteDeps {
  db: Db;
  temporal: Client;
}

/**
 * Requests a browser makes, refused before anything else (README "Test runs"): an `Origin`
 * header (every cross-origin fetch, every CORS preflight), any `Sec-Fetch-Site` (browsers send
 * Fetch Metadata with every request to a secure or local origin), or a `Sec-Fetch-Mode` other
 * than `cors` (navigate, no-cors, same-origin, websocket). `Sec-Fetch-Mode: cors` alone is what
 * Node's own fetch sends from CI scripts, so it is not refused by itself. No CORS header is ever
 * sent, so a browser cannot read any answer of this API either.
 */
export function browserSignal(ctx: Context): string | null {
  if (ctx.get('origin')) return 'the request carries an Origin header';
  const site = ctx.get('sec-fetch-site');
  if (site) return `Sec-Fetch-Site: ${site}`;
  const mode = ctx.get('sec-fetch-mode').toLowerCase();
  if (mode && mode !== 'cors') return `Sec-Fetch-Mode: ${mode}`;
  if (ctx.method === 'OPTIONS' && ctx.get('access-control-request-method')) return 'a CORS preflight';
  return null;
}

async function apiEdge(ctx: Context, next: Next) {
  ctx.set('cache-control', 'no-store');
  const browser = browserSignal(ctx);
  if (browser) throw new GatewayError('browser_request_refused', { detail: browser });
  await next();
}

/** Authorization: Bearer <CI token>; the token's project becomes ctx.state.ciProject. */
function ciAuth(db: Db) {
  return async (ctx: Context, next: Next) => {
    const header = ctx.get('authorization');
    if (!header) throw new GatewayError('missing_ci_token');
    const token = /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1];
    const found = token ? await ciTokenProject(db, token) : null;
    if (!found) throw new GatewayError('invalid_ci_token');
    ctx.state.ciProject = found.project;
    await next();
  };
}


/** The token's project when the path names it (by id or name); any other project is 404, as if unknown. */
function ownProject(ctx: Context): Project {
  const p = ctx.state.ciProject as Project;
  const ref = String(ctx.params.id);
  if (ref.toLowerCase() !== p.id && ref !== p.name) throw new GatewayError('not_found', { detail: `No project '${ref}'.`, param: 'id' });
  return p;
}

export const idempotencyKey = z.string().regex(/^[\x21-\x7e]{1,255}$/, 'must be 1-255 visible ASCII characters');

export const caseListQuery = z.object({ tag: z.string().optional(), archived: z.enum(['true', 'false']).optional() }).strict();
export const runListQuery = z
  .object({ limit: z.coerce.number().int().min(1).max(100).default(20), status: z.enum(RUN_STATUSES).optional() })
  .strict();
export const configurationReplaceSchema = z.object({ settings: configurationSchema }).strict();

/**
 * The test-run API (spec 3 B) under /api, on the gateway's port: projects' cases and
 * configurations, runs, execution, cancel. CI tokens only, never from a browser.
 */
export function testRunRoutes(deps: TestRunRouteDeps): { routes(): Middleware } {
  const { db, temporal } = deps;
  const r = new Router({ prefix: '/api' });
  r.use(ciAuth(db), serviceErrors);

  r.get('/projects/:id', async (ctx) => {
    ctx.body = await getProject(db, ownProject(ctx).id);
  });

  // ---- cases ----
  r.get('/projects/:id/cases', async (ctx) => {
    const q = validate(caseListQuery, ctx.query);
    ctx.body = { data: await listCases(db, ownProject(ctx).id, { tag: q.tag, archived: q.archived === 'true' }) };
  });
  r.post('/projects/:id/cases', async (ctx) => {
    const p = ownProject(ctx);
    const body = validate(caseInputSchema, await readJsonObject(ctx));
    ctx.status = 201;
    ctx.body = await addCase(db, p.id, body);
  });
  r.get('/projects/:id/cases/:case', async (ctx) => {
    ctx.body = caseView(await findCase(db, ownProject(ctx).id, ctx.params.case));
  });
  r.put('/projects/:id/cases/:case', async (ctx) => {
    const p = ownProject(ctx);
    const body = validate(caseInputSchema, await readJsonObject(ctx));
    ctx.body = await replaceCase(db, p.id, ctx.params.case, body);
  });
  r.delete('/projects/:id/cases/:case', async (ctx) => {
    ctx.body = await archiveCase(db, ownProject(ctx).id, ctx.params.case);
  });

  // ---- configurations ----
  r.get('/projects/:id/configurations', async (ctx) => {
    ctx.body = { data: await listConfigurations(db, ownProject(ctx).id) };
  });
  r.post('/projects/:id/configurations', async (ctx) => {
    const p = ownProject(ctx);
    const body = validate(configurationInputSchema, await readJsonObject(ctx));
    ctx.status = 201;
    ctx.body = await setConfiguration(db, p.id, body, { replace: false });
  });
  r.get('/projects/:id/configurations/:cfg', async (ctx) => {
    ctx.body = configurationView(await findConfiguration(db, ownProject(ctx).id, ctx.params.cfg));
  });
  r.put('/projects/:id/configurations/:cfg', async (ctx) => {
    const p = ownProject(ctx);
    const body = validate(configurationReplaceSchema, await readJsonObject(ctx));
    const name = isUuid(ctx.params.cfg) ? (await findConfiguration(db, p.id, ctx.params.cfg)).name : ctx.params.cfg;
    ctx.body = await setConfiguration(db, p.id, { name, settings: body.settings }, { replace: true });
  });

  // ---- runs ----
  r.post('/projects/:id/runs', async (ctx) => {
    const p = ownProject(ctx);
    const key = ctx.get('idempotency-key') ? validateHeader(ctx.get('idempotency-key')) : null;
    const raw = await readJsonObject(ctx);
    const body = validate(runCreateSchema, raw);
    const { runId, replayed } = await createRun(db, p, body, raw, key);
    ctx.status = replayed ? 200 : 201;
    if (replayed) ctx.set('idempotent-replayed', 'true');
    ctx.body = await runView(db, p.id, runId);
  });
  r.get('/projects/:id/runs', async (ctx) => {
    const p = ownProject(ctx);
    const q = validate(runListQuery, ctx.query);
    ctx.body = { data: await listRuns(db, p.id, q) };
  });
  r.get('/runs/:id', async (ctx) => {
    const p = ctx.state.ciProject as Project;
    let view = await runView(db, p.id, ctx.params.id);
    if (await reconcileRun(db, temporal, view)) view = await runView(db, p.id, ctx.params.id);
    ctx.body = view;
  });
  r.post('/runs/:id/execute', async (ctx) => {
    ctx.status = 202;
    ctx.body = await executeRun(db, temporal, ctx.state.ciProject as Project, ctx.params.id);
  });
  r.post('/runs/:id/cancel', async (ctx) => {
    ctx.status = 202;
    ctx.body = await cancelRun(db, temporal, ctx.state.ciProject as Project, ctx.params.id);
  });

  // The edge rule covers every path under /api, routed or not, OPTIONS included.
  const routes = r.routes() as unknown as Middleware;
  const allowed = r.allowedMethods() as unknown as Middleware;
  const dispatch: Middleware = (ctx, next) => (ctx.path === '/api' || ctx.path.startsWith('/api/') ? apiEdge(ctx, () => routes(ctx, () => allowed(ctx, next))) : next());
  // The router is visible on the middleware, as on @koa/router's own, so the OpenAPI test sees its routes.
  return { routes: () => Object.assign(dispatch, { router: r }) };
}

function validateHeader(v: string): string {
  const r = idempotencyKey.safeParse(v);
  if (!r.success) throw new GatewayError('invalid_parameter', { param: 'Idempotency-Key', detail: r.error.issues[0].message });
  return r.data;
}
