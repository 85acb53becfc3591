import { Readable } from 'node:stream';
import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { Agent, errors, FormData, request, type Dispatcher } from 'undici';
import { Counter, Histogram } from 'prom-client';
import type { Provider } from '../domain/catalog/model';
import type { KeyCooldowns } from '../domain/catalog/route-health';
import { registry } from '../platform/metrics';
import { attemptAttributes } from '../platform/tracing';

// One keep-alive pool per upstream origin, shared by every request of the process.
const agent = new Agent({ keepAliveTimeout: 30_000, connections: 256, pipelining: 1 });

export type UpstreamResponse = Dispatcher.ResponseData;

export class UpstreamFailure extends Error {
  constructor(
    readonly kind: 'timeout' | 'connection',
    /** true when request bytes may have reached the provider: never retried, outcome uncertain */
    readonly maySent: boolean,
    message: string,
  ) {
    super(message);
  }
}

export interface UpstreamOptions {
  timeoutMs: number;
  signal?: AbortSignal;
  authHeaders: (key: string) => Record<string, string>;
  /** this process's rejected keys: skipped while they cool down (issue 36 part 3); absent: every key in order */
  keyHealth?: KeyCooldowns;
  /** a kind that refuses a bad key with a 400 says so in the body (Gemini: API_KEY_INVALID) */
  keyRejected?: (json: unknown) => boolean;
}

export interface FormPart {
  name: string;
  value: string | { data: Buffer; filename: string; contentType: string };
}

// Per provider (catalog id) and route (the provider path the gateway posts to: constants in code).
const latency = new Histogram({
  name: 'upstream_request_duration_seconds',
  help: 'Upstream latency until the response headers (a stream: its first byte), by provider, route and status (or timeout, connection, aborted)',
  labelNames: ['provider', 'route', 'status'] as const,
  buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
  registers: [registry],
});
const failures = new Counter({
  name: 'upstream_errors_total',
  help: 'Upstream calls that failed, by provider, route and kind: timeout, connection, or http_<status> for an answer of 400 or more',
  labelNames: ['provider', 'route', 'kind'] as const,
  registers: [registry],
});

// Statuses by which a provider refuses the whole request for this key, before processing it.
const KEY_REJECTED = new Set([401, 403]);
/** 400 answers whose body refused the key (UpstreamOptions.keyRejected) */
const keyRejected400 = new WeakSet<UpstreamResponse>();

/** The provider refused the gateway's key, not the request: the gateway's problem (next key, next route), never the client's. */
export function keyRefused(res: UpstreamResponse): boolean {
  return KEY_REJECTED.has(res.statusCode) || keyRejected400.has(res);
}

/** A response whose body is already in memory, readable as undici's (text, json, dump, iteration). */
export function bufferedResponse(statusCode: number, headers: Record<string, string | string[] | undefined>, chunks: AsyncIterable<string> | Iterable<string>): UpstreamResponse {
  const body = Object.assign(Readable.from(chunks), {
    async text() {
      let s = '';
      for await (const c of body) s += String(c);
      return s;
    },
    async json() {
      return JSON.parse(await body.text()) as unknown;
    },
    async dump() {
      body.destroy();
    },
  });
  return { statusCode, headers, body, trailers: {}, opaque: null, context: {} } as unknown as UpstreamResponse;
}

/** POSTs JSON to the provider (see `send` for the failover rule). */
export function postUpstream(provider: Provider, path: string, body: unknown, opts: UpstreamOptions): Promise<UpstreamResponse> {
  const payload = JSON.stringify(body);
  return send(provider, path, () => ({ body: payload, headers: { 'content-type': 'application/json' } }), opts);
}

/** POSTs multipart/form-data to the provider (audio files). */
export function postUpstreamForm(provider: Provider, path: string, parts: FormPart[], opts: UpstreamOptions): Promise<UpstreamResponse> {
  // A FormData body is consumed by sending: built anew for every attempt.
  return send(
    provider,
    path,
    () => {
      const form = new FormData();
      for (const p of parts) {
        if (typeof p.value === 'string') form.append(p.name, p.value);
        else form.append(p.name, new Blob([p.value.data], { type: p.value.contentType }), p.value.filename);
      }
      return { body: form, headers: {} };
    },
    opts,
  );
}

/**
 * Sends with the next upstream key only when the provider rejected the key itself (that key then
 * cools down, with opts.keyHealth). A connection dropped after sending is never retried.
 */
function send(
  provider: Provider,
  path: string,
  payload: () => { body: string | FormData; headers: Record<string, string> },
  opts: UpstreamOptions,
): Promise<UpstreamResponse> {
  return sendWithKeys(
    provider,
    path,
    async (key) => {
    const { body, headers } = payload();
    try {
      return await request(new URL(path, provider.base_url), {
        method: 'POST',
        dispatcher: agent,
        headers: { ...headers, ...(key ? opts.authHeaders(key) : {}) },
        body,
        headersTimeout: opts.timeoutMs,
        bodyTimeout: opts.timeoutMs,
        signal: opts.signal,
      });
    } catch (err) {
      // The caller's abort (a client that left) surfaces as an AbortError: never a provider failure.
      if (opts.signal?.aborted || err instanceof errors.RequestAbortedError) throw err;
      if (err instanceof errors.HeadersTimeoutError || err instanceof errors.BodyTimeoutError) {
        throw new UpstreamFailure('timeout', true, `no answer within ${opts.timeoutMs} ms`);
      }
      const code = (err as { code?: string }).code;
      // Refused connections never carried the request; anything else may have.
      throw new UpstreamFailure('connection', code !== 'ECONNREFUSED', `connection failed (${code ?? (err as Error).message})`);
    }
    },
    opts.keyHealth,
    opts.keyRejected,
  );
}

/**
 * One provider call per key until one is not refused as a key (401/403, or a 400 `keyRejected` reads so), measured and traced:
 * `attempt` sends with a key ('' when the provider has none) and throws an UpstreamFailure, or
 * anything else for the caller's abort; a rejected key cools down (keyHealth). Shared by kinds whose client library does its own HTTP.
 */
export async function sendWithKeys(
  provider: Provider,
  route: string,
  attempt: (key: string) => Promise<UpstreamResponse>,
  keyHealth?: KeyCooldowns,
  keyRejected?: UpstreamOptions['keyRejected'],
): Promise<UpstreamResponse> {
  // keys cooling after a rejection go last (domain/catalog/route-health.ts)
  const keys = !provider.api_keys.length ? [''] : keyHealth ? keyHealth.usable(provider.id, provider.api_keys) : provider.api_keys;
  for (let i = 0; ; i++) {
    let res: UpstreamResponse;
    const labels = { provider: provider.id, route };
    const end = latency.startTimer(labels);
    // A client span per attempt, until the answer's headers (as the latency histogram): the trace shows upstream latency.
    const span = trace.getTracer('providers/upstream').startSpan(`POST ${route}`, {
      kind: SpanKind.CLIENT,
      attributes: { 'http.request.method': 'POST', 'server.address': new URL(provider.base_url).host, 'gateway.provider': provider.id, 'gateway.upstream.path': route, 'gateway.key_retry': i > 0, ...attemptAttributes() },
    });
    try {
      res = await attempt(keys[i]);
    } catch (err) {
      const kind = err instanceof UpstreamFailure ? err.kind : 'aborted';
      end({ status: kind });
      span.setAttribute('error.type', kind);
      span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
      span.end();
      if (kind !== 'aborted') failures.inc({ ...labels, kind });
      throw err;
    }
    end({ status: String(res.statusCode) });
    span.setAttribute('http.response.status_code', res.statusCode);
    if (res.statusCode >= 500 || res.statusCode === 429) span.setStatus({ code: SpanStatusCode.ERROR });
    span.end();
    if (res.statusCode >= 400) failures.inc({ ...labels, kind: `http_${res.statusCode}` });
    if (res.statusCode === 400 && keyRejected) {
      // read to tell a refused key from a refused request; handed on from memory
      const text = await res.body.text();
      res = bufferedResponse(res.statusCode, res.headers, [text]);
      let json: unknown = null;
      try {
        json = JSON.parse(text);
      } catch {
        // not JSON: not a key refusal
      }
      if (keyRejected(json)) keyRejected400.add(res);
    }
    if (keys[i]) {
      if (keyRefused(res)) keyHealth?.rejected(provider.id, keys[i], res.statusCode);
      else if (res.statusCode < 400) keyHealth?.accepted(provider.id, keys[i]);
    }
    if (keyRefused(res) && i + 1 < keys.length) {
      await res.body.dump();
      continue;
    }
    return res;
  }
}
