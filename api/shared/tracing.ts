import { context, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type Koa from 'koa';
import { tracingEnabled } from '../../platform/tracing';

/**
 * A server span per request, named by the router's matched template (`POST /v1/chat/completions`),
 * parented by an incoming W3C traceparent. Workflows started while it is active (the traced
 * Temporal client) join its trace. The request ids are attributes: `request.id` (x-request-id) and,
 * for a billed gateway request, `gateway.request_id` (x-gateway-request-id). Null when tracing is off.
 */
export function tracingMiddleware(app: string): Koa.Middleware | null {
  if (!tracingEnabled()) return null;
  return async (ctx, next) => {
    const parent = propagation.extract(context.active(), ctx.headers);
    const span = trace.getTracer(`api/${app}`).startSpan(ctx.method, { kind: SpanKind.SERVER, attributes: { 'http.request.method': ctx.method, 'url.path': ctx.path, 'service.app': app } }, parent);
    try {
      await context.with(trace.setSpan(parent, span), next);
    } catch (err) {
      span.recordException(err as Error);
      throw err;
    } finally {
      const matched = (ctx as unknown as { _matchedRoute?: unknown })._matchedRoute;
      const route = typeof matched === 'string' ? matched : 'unmatched';
      span.updateName(`${ctx.method} ${route}`);
      span.setAttribute('http.route', route);
      span.setAttribute('http.response.status_code', ctx.status);
      const requestId = ctx.response.get('x-request-id');
      const gatewayRequestId = ctx.response.get('x-gateway-request-id');
      if (requestId) span.setAttribute('request.id', requestId);
      if (gatewayRequestId) span.setAttribute('gateway.request_id', gatewayRequestId);
      if (ctx.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    }
  };
}
