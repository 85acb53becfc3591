import { randomUUID } from 'node:crypto';
import type { Context, Next } from 'koa';
import getRawBody from 'raw-body';
import { z } from 'zod';
import { PanelError } from '../../../domain/panel/errors';
import { isDatabaseUnavailable } from '../../../platform/db-errors';
import type { Logger } from '../../../platform/logger';
import type { ClientErrorAnswer } from '../../../platform/http-server';

/**
 * Outermost middleware of the panel API: a request id (x-request-id) and a child logger per
 * request, one access-log line, and the panel error body for anything thrown below.
 */
export function panelContext(logger: Logger) {
  return async (ctx: Context, next: Next) => {
    const started = process.hrtime.bigint();
    const requestId = randomUUID();
    ctx.state.requestId = requestId;
    ctx.state.log = logger.child({ request_id: requestId });
    ctx.set('x-request-id', requestId);
    try {
      await next();
      if (ctx.body === undefined && ctx.respond !== false) {
        if (ctx.status === 404) throw new PanelError('route_not_found', { method: ctx.method, path: ctx.path });
        // @koa/router answers a method it knows nowhere (TRACE, …) 501: a 405 like any other method the route lacks.
        if (ctx.status === 405 || ctx.status === 501) throw new PanelError('method_not_allowed', { method: ctx.method, path: ctx.path }, { allow: ctx.response.get('allow') });
      }
    } catch (err) {
      sendPanelError(ctx, toPanelError(ctx, err));
    }
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    ctx.state.log.info({ method: ctx.method, path: ctx.path, status: ctx.status, ms, login: ctx.state.principal?.username }, 'request');
  };
}

function toPanelError(ctx: Context, err: unknown): PanelError {
  if (err instanceof PanelError) return err;
  if (err instanceof z.ZodError) return zodError(err);
  if (isDatabaseUnavailable(err)) {
    ctx.state.log.warn({ err }, 'database unavailable');
    return new PanelError('service_unavailable', {}, { 'retry-after': '2' });
  }
  ctx.state.log.error({ err }, 'unhandled error');
  return new PanelError('internal_error', { request_id: ctx.state.requestId });
}

export function sendPanelError(ctx: Context, e: PanelError): void {
  if (ctx.headerSent) return;
  ctx.status = e.status;
  for (const [k, v] of Object.entries(e.headers)) ctx.set(k, v);
  ctx.body = e.toBody();
}

/** What Node's parser refuses (platform/http-server.ts), in the panel's error body. */
export const panelClientError: ClientErrorAnswer = (kind, limit) => {
  const e = kind === 'header_too_large' ? new PanelError('header_too_large', { limit }) : new PanelError('validation_failed', { field: 'request', detail: 'request: not parseable as HTTP/1.1' });
  return { status: e.status, body: e.toBody() };
};

/** The first zod issue as validation_failed, naming the field. */
export function zodError(err: z.ZodError): PanelError {
  const i = err.issues[0];
  const field = [...i.path.map(String), ...(i.code === 'unrecognized_keys' ? [i.keys[0]] : [])].join('.') || 'body';
  const detail = i.code === 'unrecognized_keys' ? 'is not a known field' : i.message;
  return new PanelError('validation_failed', { field, detail: `${field}: ${detail}` });
}

export function parse<S extends z.ZodType>(schema: S, input: unknown): z.infer<S> {
  const r = schema.safeParse(input);
  if (!r.success) throw zodError(r.error);
  return r.data;
}

/** How deep a panel body may nest: far beyond any route's schema, far below what a recursive walk survives. */
export const MAX_BODY_DEPTH = 64;

/**
 * Checks every request once, before any handler: the query (flat, so no recursion) and a JSON body,
 * which is read, scanned and parsed here and handed to jsonBody. PostgreSQL text cannot hold NUL, so
 * NUL is refused anywhere; nesting is counted in one loop over the text, never by a recursive walk.
 */
export function panelInput() {
  return async (ctx: Context, next: Next) => {
    const query = ctx.query;
    if (/%00/.test(ctx.path) || Object.entries(query).some(([k, v]) => k.includes('\0') || [v ?? ''].flat().some((x) => x.includes('\0')))) {
      throw new PanelError('validation_failed', { field: 'query', detail: 'query: text must not contain NUL (%00)' });
    }
    if (ctx.request.type === 'application/json') ctx.state.jsonBody = await readJsonBody(ctx);
    await next();
  };
}

/** The JSON object body that panelInput read (at most 256 KB; an empty body is {}). */
export async function jsonBody(ctx: Context): Promise<Record<string, unknown>> {
  if (ctx.state.jsonBody) return ctx.state.jsonBody as Record<string, unknown>;
  const length = ctx.get('content-length');
  if (length === '0' || (!length && !ctx.get('transfer-encoding'))) return {};
  throw new PanelError('unsupported_media_type');
}

async function readJsonBody(ctx: Context): Promise<Record<string, unknown>> {
  const length = ctx.get('content-length');
  if (length === '0' || (!length && !ctx.get('transfer-encoding'))) return {};
  let raw: string;
  try {
    raw = await getRawBody(ctx.req, { limit: 256 * 1024, encoding: 'utf8', length: length || undefined });
  } catch (err) {
    const tooLarge = (err as { type?: string }).type === 'entity.too.large';
    throw new PanelError('validation_failed', { field: 'body', detail: tooLarge ? 'body: larger than 256 KB' : 'body: could not be read' });
  }
  if (!raw.trim()) return {};
  const found = scanJson(raw);
  if (found === 'nul') throw new PanelError('validation_failed', { field: 'body', detail: 'body: text must not contain NUL (\\u0000)' });
  if (found === 'deep') throw new PanelError('validation_failed', { field: 'body', detail: `body: nested deeper than ${MAX_BODY_DEPTH} levels` });
  let body: unknown;
  try {
    body = JSON.parse(raw);
  } catch {
    throw new PanelError('validation_failed', { field: 'body', detail: 'body: not valid JSON' });
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new PanelError('validation_failed', { field: 'body', detail: 'body: must be a JSON object' });
  return body as Record<string, unknown>;
}

/** One pass over JSON text: a NUL (raw or as the escape \u0000, in a key or a value) or nesting past MAX_BODY_DEPTH. */
function scanJson(raw: string): 'nul' | 'deep' | null {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i];
    if (c === '\0') return 'nul';
    if (inString) {
      if (c === '\\') {
        if (raw.startsWith('u0000', i + 1)) return 'nul';
        i++; // the escaped character, so \\ and \" end nothing
      } else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{' || c === '[') {
      if (++depth > MAX_BODY_DEPTH) return 'deep';
    } else if (c === '}' || c === ']') depth--;
  }
  return null;
}

/** Parses the JSON body with a schema. */
export const bodyOf = async <S extends z.ZodType>(ctx: Context, schema: S): Promise<z.infer<S>> => parse(schema, await jsonBody(ctx));
