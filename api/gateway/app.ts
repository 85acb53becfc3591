import Router from '@koa/router';
import type { Client } from '@temporalio/client';
import Koa from 'koa';
import type { Drain } from './shared/client-watch';
import type { Db } from '../../platform/db';
import type { Logger } from '../../platform/logger';
import { authenticate } from './shared/auth';
import type { AuthStore } from '../../services/keys/auth-store';
import type { Catalog } from '../../services/catalog/catalog';
import type { KeyedVariant } from './keyed/variant';
import { requestContext } from '../shared/http';
import { aliveCheck, readyCheck } from '../shared/health';
import type { Reservations } from '../../services/credits/holds';
import { testRunRoutes } from '../testruns/routes';
import { audioRoutes } from './media/audio/routes';
import { chatDialect } from './text/dialects/chat';
import { messagesDialect } from './text/dialects/messages';
import { responsesDialect } from './text/dialects/responses';
import { inference } from './text/inference';
import { ROUTING_DEFAULTS, UpstreamHealth } from './text/routing';
import { imageRoutes } from './media/images/routes';
import { installerRoutes } from './installer/routes';
import { credits, generation, keyInfo, model, models, usage } from './reads/reads';
import { countTokens } from './text/count-tokens';
import { embeddings } from './text/embeddings';
import { cors, type CorsOrigins } from './shared/cors';
import { videoRoutes } from './media/videos/routes';
import { metricsMiddleware, metricsSettingsFromEnv, registry, type MetricsSettings } from '../shared/metrics';
import { tracingMiddleware } from '../shared/tracing';
import { registerCreditsGauges } from '../../services/credits/metrics';
import { BREAKER_DEFAULTS, CircuitBreakers } from '../../domain/catalog/routing';
import { RESPONSE_CACHE_DEFAULTS, ResponseCache } from '../../services/cache/responses';
import { openApiRoutes } from '../shared/openapi-routes';
import { gatewayApi, serviceDescriptionSchema } from './openapi';
import { RefusalLog } from '../shared/refusal-log';
import { name as serviceName, version as serviceVersion } from '../../package.json';
import { adminApi } from './admin/openapi';
import { testRunsApi } from '../testruns/openapi';

export interface GatewayDeps {
  db: Db;
  temporal: Client;
  logger: Logger;
  authStore: AuthStore;
  catalog: Catalog;
  reservations: Reservations;
  upstreamTimeoutMs: number;
  /** the key-authenticated variant (GATEWAY_VARIANT=keyed, spec 3 A); absent: the credits variant */
  keyed?: KeyedVariant;
  /** the admin HTTP API under /admin */
  admin?: Router;
  /** the account users' dashboard under /dashboard (api/gateway/dashboard) */
  dashboard?: Koa.Middleware;
  /** credits variant: records every request in request_log (the keyed variant brings its own) */
  requestLogging?: Koa.Middleware;
  /** CORS_ORIGINS: browser clients of /v1; absent: no CORS headers */
  corsOrigins?: CorsOrigins;
  /** /metrics (METRICS, METRICS_TOKEN); absent: read from the environment */
  metrics?: MetricsSettings;
  /** the circuit breakers of the models' routes (one set per process); absent: default settings */
  breakers?: CircuitBreakers;
  /** route measures and cooled provider keys (one per process, the admin API shows it too); absent: a new one */
  health?: UpstreamHealth;
  /** ROUTE_RETRY_BUDGET_MS; absent: ROUTING_DEFAULTS */
  retryBudgetMs?: number;
  /** the info lines of 4xx answers, rate-limited per client; absent: default settings */
  refusals?: RefusalLog;
  /** the response cache (issue 36 part 4); absent: one with the default bounds, not pruned */
  responseCache?: ResponseCache;
  /** this process's drain (SIGTERM): /readyz answers 503 meanwhile, requests see its cut */
  drain?: Drain;
}

/** The gateway of spec 1: inference dialects and the billing reads. */
export function createGatewayApp(deps: GatewayDeps): Koa {
  const app = new Koa();
  app.proxy = false;
  // Outermost: every request sees the process's drain; answers given while draining close their connection.
  app.use((ctx, next) => {
    ctx.state.drain = deps.drain;
    if (deps.drain?.draining) ctx.set('connection', 'close');
    return next();
  });
  const textDeps = {
    ...deps,
    breakers: deps.breakers ?? new CircuitBreakers(BREAKER_DEFAULTS, Date.now),
    health: deps.health ?? new UpstreamHealth(ROUTING_DEFAULTS, Date.now),
    retryBudgetMs: deps.retryBudgetMs ?? ROUTING_DEFAULTS.retryBudgetMs,
    responseCache: deps.responseCache ?? new ResponseCache(deps.db, deps.logger, RESPONSE_CACHE_DEFAULTS),
  };
  registerCreditsGauges(registry, deps.db);
  app.use(metricsMiddleware('gateway', deps.metrics ?? metricsSettingsFromEnv())); // outermost: sees final statuses, needs no API key
  const tracing = tracingMiddleware('gateway'); // OTEL_EXPORTER_OTLP_ENDPOINT unset: null, nothing added
  if (tracing) app.use(tracing);
  // The dashboard answers in pages, not the API's envelope, and is not an API request to log.
  if (deps.dashboard) app.use(deps.dashboard);
  // Every answer carries x-request-id (errors too); a billed request's equals x-gateway-request-id.
  app.use(requestContext(deps.logger, 'x-request-id', deps.refusals ?? new RefusalLog(deps.logger)));
  if (deps.keyed) app.use(deps.keyed.requestLogging);
  else if (deps.requestLogging) app.use(deps.requestLogging);
  if (deps.corsOrigins) app.use(cors(deps.corsOrigins));

  const root = new Router();
  root.get('/', serviceDescription(deps.keyed ? 'keyed' : 'credits')); // HEAD / too (clients probe it), without a body
  root.get('/healthz', aliveCheck(deps));
  root.get('/readyz', readyCheck(deps));
  app.use(root.routes());
  app.use(root.allowedMethods());
  // The OpenAPI documents of this port's three APIs and /docs (docs/openapi.md); open, before the admin API's token check.
  app.use(openApiRoutes([{ path: '/openapi.json', api: () => gatewayApi(deps.keyed ? 'keyed' : 'credits') }, { path: '/admin/openapi.json', api: adminApi }, { path: '/testruns/openapi.json', api: testRunsApi }]).routes());
  const installer = installerRoutes(); // install.sh, install.ps1, uninstall.sh, uninstall.ps1 (spec 1 section 1 item 8)
  app.use(installer.routes());
  app.use(installer.allowedMethods());
  if (deps.admin) app.use(deps.admin.routes());
  if (deps.admin) app.use(deps.admin.allowedMethods());
  app.use(testRunRoutes(deps).routes()); // the test-run API under /api (spec 3 B)

  // Messages-dialect clients get errors, authentication ones included, in Anthropic's shape.
  app.use((ctx, next) => {
    if (ctx.path === '/v1/messages' || ctx.path === '/v1/messages/count_tokens') ctx.state.errorBody = messagesDialect.errorBody;
    return next();
  });
  // The keyed variant authenticates every path under /v1, routed or not (spec 3 A 1), so a wrong
  // key counts towards the IP lockout wherever it is sent.
  if (deps.keyed) app.use(deps.keyed.guard);

  const v1 = new Router({ prefix: '/v1' });
  if (!deps.keyed) v1.use(authenticate(deps.authStore));
  v1.post('/chat/completions', inference(textDeps, chatDialect));
  v1.post('/messages', inference(textDeps, messagesDialect));
  v1.post('/messages/count_tokens', countTokens(deps.catalog));
  v1.post('/embeddings', embeddings(deps));
  // a dialect object per request: it remembers the request's tools to show the upstream's calls back
  v1.post('/responses', (ctx) => inference(textDeps, responsesDialect())(ctx));
  v1.get('/credits', credits(deps.db));
  v1.get('/key', keyInfo(deps.db));
  v1.get('/generation', generation(deps.db));
  v1.get('/usage', usage(deps.db));
  v1.get('/models', models(deps.catalog));
  v1.get('/models/:id', model(deps.catalog));
  videoRoutes(v1, deps); // /v1/videos, /v1/videos/models, /v1/videos/{id}, /v1/videos/{id}/content
  v1.use(audioRoutes(deps).routes());
  v1.use(imageRoutes(deps).routes()); // /v1/images, /v1/images/generations, /v1/images/edits, /v1/images/models
  app.use(v1.routes());
  app.use(v1.allowedMethods()); // 405 with Allow; the envelope is added by requestContext
  return app;
}

/** GET / and HEAD /: what this service is and where to start; nothing secret. */
export function serviceDescription(variant: 'credits' | 'keyed') {
  const body = serviceDescriptionSchema.parse({
    name: serviceName,
    variant,
    version: serviceVersion,
    links: { models: '/v1/models', openapi: '/openapi.json', docs: '/docs', health: '/healthz' },
  });
  return (ctx: Koa.Context) => {
    ctx.body = body;
  };
}
