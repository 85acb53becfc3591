import { Agent, errors, FormData, request } from 'undici';
import type { Provider } from '../api/catalog';
import { UpstreamFailure, type UpstreamResponse } from './upstream';

// Multipart POSTs to a provider (audio files), with the failover rule of postUpstream: the next
// upstream key only when the provider refused the key itself; a dropped connection is not retried.
// A `body` option on postUpstream would make this file unnecessary (see the audio README section).
const agent = new Agent({ keepAliveTimeout: 30_000, connections: 64, pipelining: 1 });
const KEY_REJECTED = new Set([401, 403]);

export interface FormPart {
  name: string;
  value: string | { data: Buffer; filename: string; contentType: string };
}

export async function postUpstreamForm(
  provider: Provider,
  path: string,
  parts: FormPart[],
  opts: { timeoutMs: number; signal?: AbortSignal; authHeaders: (key: string) => Record<string, string> },
): Promise<UpstreamResponse> {
  const keys = provider.api_keys.length ? provider.api_keys : [''];
  for (let i = 0; ; i++) {
    // A FormData body is consumed by sending: built anew for every attempt.
    const form = new FormData();
    for (const p of parts) {
      if (typeof p.value === 'string') form.append(p.name, p.value);
      else form.append(p.name, new Blob([p.value.data], { type: p.value.contentType }), p.value.filename);
    }
    let res: UpstreamResponse;
    try {
      res = await request(new URL(path, provider.base_url), {
        method: 'POST',
        dispatcher: agent,
        headers: keys[i] ? opts.authHeaders(keys[i]) : {},
        body: form,
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
      throw new UpstreamFailure('connection', code !== 'ECONNREFUSED', `connection failed (${code ?? (err as Error).message})`);
    }
    if (KEY_REJECTED.has(res.statusCode) && i + 1 < keys.length) {
      await res.body.dump();
      continue;
    }
    return res;
  }
}
