import type Koa from 'koa';
import { Counter, Histogram } from 'prom-client';
import { registry } from '../../platform/metrics';
import { loadSettings } from '../../platform/config';

export { registry };

/** METRICS=off hides /metrics; METRICS_TOKEN, when set, requires `Authorization: Bearer <token>`. */
export interface MetricsSettings {
  enabled: boolean;
  token?: string;
}

export function metricsSettingsFromEnv(env: NodeJS.ProcessEnv = process.env): MetricsSettings {
  const c = loadSettings(['METRICS', 'METRICS_TOKEN'], env);
  return { enabled: c.METRICS !== 'off', token: c.METRICS_TOKEN };
}

const requests = new Counter({
  name: 'http_requests_total',
  help: 'HTTP requests answered, by app, method, matched route template, status and (billed gateway requests) catalog model',
  labelNames: ['app', 'method', 'route', 'status', 'model'] as const,
  registers: [registry],
});
const duration = new Histogram({
  name: 'http_request_duration_seconds',
  help: 'HTTP request latency until the response is handed to Node, by app, method, matched route template and status',
  labelNames: ['app', 'method', 'route', 'status', 'model'] as const,
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
  registers: [registry],
});

/**
 * Serves GET /metrics (before any API-key auth) and records every other request. The route label is
 * the router's matched template (never the raw URL, so label cardinality stays bounded); requests no
 * route matched count as "unmatched".
 */
export function metricsMiddleware(app: string, settings: MetricsSettings): Koa.Middleware {
  return async (ctx, next) => {
    if (ctx.path === '/metrics' && settings.enabled) {
      if (ctx.method !== 'GET') return void (ctx.status = 405);
      if (settings.token && ctx.get('authorization') !== `Bearer ${settings.token}`) {
        ctx.status = 401;
        ctx.body = { error: { code: 'unauthenticated', message: 'metrics need the METRICS_TOKEN bearer token', details: {} } };
        return;
      }
      ctx.type = registry.contentType;
      ctx.body = await registry.metrics();
      return;
    }
    const end = duration.startTimer();
    try {
      await next();
    } finally {
      const matched = (ctx as unknown as { _matchedRoute?: unknown })._matchedRoute;
      // The catalog model a billed request held credits for (api/gateway/shared/billable-call.ts): never the raw request field.
      const model = typeof ctx.state.metricsModel === 'string' ? ctx.state.metricsModel : '';
      const labels = { app, method: ctx.method, route: typeof matched === 'string' ? matched : 'unmatched', status: String(ctx.status), model };
      requests.inc(labels);
      end(labels);
    }
  };
}
