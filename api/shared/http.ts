import { randomUUID } from 'node:crypto';
import type { Context, Next } from 'koa';
import getRawBody from 'raw-body';
import { GatewayError } from '../../domain/shared/errors';
import { isDatabaseUnavailable } from '../../platform/db-errors';
import type { Logger } from '../../platform/logger';
import type { ClientErrorAnswer } from '../../platform/http-server';
import type { RefusalLog } from './refusal-log';

export interface RequestState {
  requestId: string;
  log: Logger;
}

/**
 * Outermost middleware: a request id and a child logger per request, one access-log line (at
 * info for a 4xx, through `refusals`), and the error envelope for anything thrown below. Nothing
 * a client sends yields a bare 500.
 */
export function requestContext(logger: Logger, requestIdHeader: string | null, refusals: RefusalLog | null = null) {
  return async (ctx: Context, next: Next) => {
    const started = process.hrtime.bigint();
    const requestId = randomUUID();
    ctx.state.requestId = requestId;
    ctx.state.log = logger.child({ request_id: requestId });
    if (requestIdHeader) ctx.set(requestIdHeader, requestId);
    try {
      await next();
      if (ctx.body === undefined && ctx.respond !== false) {
        if (ctx.status === 404) throw new GatewayError('route_not_found', { method: ctx.method, path: ctx.path });
        // @koa/router answers a method it knows nowhere (TRACE, …) 501: a 405 like any other method the route lacks.
        if (ctx.status === 405 || ctx.status === 501) throw new GatewayError('method_not_allowed', { method: ctx.method, path: ctx.path }, { allow: ctx.response.get('allow') });
      }
    } catch (err) {
      sendError(ctx, err);
    }
    if (refusals && ctx.status >= 400 && ctx.status < 500) refusals.note(ctx, ctx.state.error as GatewayError | undefined);
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    ctx.state.log.debug({ method: ctx.method, path: ctx.path, status: ctx.status, ms }, 'request');
  };
}

export function sendError(ctx: Context, err: unknown): void {
  let e: GatewayError;
  if (err instanceof GatewayError) e = err;
  else if (isDatabaseUnavailable(err)) {
    ctx.state.log.warn({ err }, 'database unavailable');
    e = new GatewayError('service_unavailable', { detail: 'The database is unavailable; retry shortly.' }, { 'retry-after': '2' });
  } else {
    ctx.state.log.error({ err }, 'unhandled error');
    e = new GatewayError('internal_error', { request_id: ctx.state.requestId });
  }
  if (ctx.respond === false || ctx.headerSent) {
    if (!ctx.res.writableEnded) ctx.res.end();
    return;
  }
  ctx.status = e.status;
  ctx.state.error = e; // the refusal log reads its code and param
  for (const [k, v] of Object.entries(e.headers)) ctx.set(k, v);
  // Each dialect answers errors in its vendor's shape (set by the route); the default is spec 2.10.
  const render = ctx.state.errorBody as ((e: GatewayError) => unknown) | undefined;
  ctx.body = render ? render(e) : e.toEnvelope();
}

/** What Node's parser refuses (platform/http-server.ts), in the envelope. */
export const gatewayClientError: ClientErrorAnswer = (kind, limit) => {
  const e = kind === 'header_too_large' ? new GatewayError('header_too_large', { limit }) : new GatewayError('invalid_request', { detail: 'the request could not be parsed as HTTP/1.1' });
  return { status: e.status, body: e.toEnvelope() };
};

const MB = 1024 * 1024;
/** Size limits are worded in MB everywhere (whole MB where the limit is one). */
export const sizeLimit = (bytes: number): string => `${Number.isInteger(bytes / MB) ? bytes / MB : (bytes / MB).toFixed(2)} MB`;

/** Reads a JSON object body with a size limit; errors are the envelope's. */
export async function readJsonObject(ctx: Context, limitBytes = 4 * 1024 * 1024): Promise<Record<string, unknown>> {
  const type = ctx.request.type;
  if (type && type !== 'application/json' && !type.endsWith('+json')) {
    throw new GatewayError('unsupported_media_type', { detail: `Expected application/json, got ${type}.` });
  }
  let raw: string;
  try {
    raw = await getRawBody(ctx.req, { limit: limitBytes, encoding: 'utf8', length: ctx.get('content-length') || undefined });
  } catch (err) {
    if ((err as { type?: string }).type === 'entity.too.large') throw new GatewayError('request_too_large', { limit: sizeLimit(limitBytes) });
    throw new GatewayError('invalid_request', { detail: 'the request body could not be read' });
  }
  let body: unknown;
  try {
    body = JSON.parse(raw);
  } catch {
    throw new GatewayError('invalid_json');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new GatewayError('invalid_request', { detail: 'the body must be a JSON object' });
  }
  return body as Record<string, unknown>;
}
