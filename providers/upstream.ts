import { Agent, errors, request, type Dispatcher } from 'undici';
import type { Provider } from '../api/catalog';

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

// Statuses by which a provider refuses the whole request for this key, before processing it.
const KEY_REJECTED = new Set([401, 403]);

/**
 * POSTs JSON to the provider, trying the next upstream key only when the provider rejected the
 * key itself. A connection dropped after sending is never retried.
 */
export async function postUpstream(
  provider: Provider,
  path: string,
  body: unknown,
  opts: { timeoutMs: number; signal?: AbortSignal; authHeaders: (key: string) => Record<string, string> },
): Promise<UpstreamResponse> {
  const keys = provider.api_keys.length ? provider.api_keys : [''];
  const payload = JSON.stringify(body);
  for (let i = 0; ; i++) {
    let res: UpstreamResponse;
    try {
      res = await request(new URL(path, provider.base_url), {
        method: 'POST',
        dispatcher: agent,
        headers: {
          'content-type': 'application/json',
          ...(keys[i] ? opts.authHeaders(keys[i]) : {}),
        },
        body: payload,
        headersTimeout: opts.timeoutMs,
        bodyTimeout: opts.timeoutMs,
        signal: opts.signal,
      });
    } catch (err) {
      if (err instanceof errors.HeadersTimeoutError || err instanceof errors.BodyTimeoutError) {
        throw new UpstreamFailure('timeout', true, `no answer within ${opts.timeoutMs} ms`);
      }
      if (err instanceof errors.RequestAbortedError) throw err;
      const code = (err as { code?: string }).code;
      // Refused connections never carried the request; anything else may have.
      throw new UpstreamFailure('connection', code !== 'ECONNREFUSED', `connection failed (${code ?? (err as Error).message})`);
    }
    if (KEY_REJECTED.has(res.statusCode) && i + 1 < keys.length) {
      await res.body.dump();
      continue;
    }
    return res;
  }
}
