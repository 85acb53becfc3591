import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { isIP } from 'node:net';
import { Agent, request } from 'undici';
import { isPublicAddress } from '../../../../services/shared/webhook-targets';
import { sniffImage, type ImageKind } from './image-kind';

// Image URLs of a request are fetched by the gateway (never forwarded as URLs): only public
// addresses, checked when the socket connects (DNS rebinding cannot slip between check and use),
// on every redirect hop, with a size and a time limit.

export class UrlFetchRefused extends Error {}

export interface FetchPolicy {
  /** the address check; tests replace it to stand a local server in for a public one */
  allowAddress?: (ip: string) => boolean;
  maxBytes?: number;
  timeoutMs?: number;
  maxRedirects?: number;
}

const DEFAULTS = { maxBytes: 20 * 1024 * 1024, timeoutMs: 10_000, maxRedirects: 3 };

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** A `lookup` for net.connect that refuses when any resolved address is not allowed. */
function guardedLookup(allow: (ip: string) => boolean) {
  return (host: string, options: LookupOptions, cb: LookupCallback) => {
    dnsLookup(host, { ...options, all: true }, (err, addresses) => {
      if (err) return cb(err, []);
      const bad = addresses.find((a) => !allow(a.address));
      if (bad || addresses.length === 0) return cb(Object.assign(new UrlFetchRefused(`${host} resolves to a non-public address`), { code: 'EREFUSED_ADDRESS' }), []);
      if (options.all) return cb(null, addresses);
      const first = addresses[0]!;
      cb(null, first.address, first.family);
    });
  };
}

const agents = new WeakMap<(ip: string) => boolean, Agent>();
function agentFor(allow: (ip: string) => boolean): Agent {
  let a = agents.get(allow);
  if (!a) {
    a = new Agent({ connect: { lookup: guardedLookup(allow) } as never, keepAliveTimeout: 1000 });
    agents.set(allow, a);
  }
  return a;
}

/** Fetches one image URL under the policy; throws UrlFetchRefused with a client-facing reason. */
export async function fetchImageUrl(raw: string, policy: FetchPolicy = {}): Promise<{ data: Buffer; kind: ImageKind }> {
  const allow = policy.allowAddress ?? isPublicAddress;
  const { maxBytes, timeoutMs, maxRedirects } = { ...DEFAULTS, ...policy };
  const signal = AbortSignal.timeout(timeoutMs);
  let url = parseUrl(raw);
  for (let hop = 0; ; hop++) {
    // IP literals never pass through lookup: check them here.
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (isIP(host) && !allow(host)) throw new UrlFetchRefused(`${host} is not a public address`);
    let res;
    try {
      res = await request(url, { method: 'GET', dispatcher: agentFor(allow), signal, headersTimeout: timeoutMs, bodyTimeout: timeoutMs, headers: { accept: 'image/png, image/jpeg, image/webp' } });
    } catch (err) {
      const cause = (err as { cause?: unknown }).cause ?? err;
      if (cause instanceof UrlFetchRefused) throw cause;
      const code = (err as { code?: string }).code;
      if (signal.aborted || code === 'UND_ERR_HEADERS_TIMEOUT') throw new UrlFetchRefused(`no answer within ${timeoutMs} ms`);
      throw new UrlFetchRefused(`could not fetch it (${(err as { code?: string }).code ?? (err as Error).message})`);
    }
    if (res.statusCode >= 300 && res.statusCode < 400 && res.headers.location) {
      await res.body.dump();
      if (hop >= maxRedirects) throw new UrlFetchRefused(`more than ${maxRedirects} redirects`);
      url = parseUrl(new URL(String(res.headers.location), url).toString());
      continue;
    }
    if (res.statusCode !== 200) {
      await res.body.dump();
      throw new UrlFetchRefused(`it answered HTTP ${res.statusCode}`);
    }
    res.body.on('error', () => {}); // destroying it below is ours, not a failure to report
    const declared = Number(res.headers['content-length']);
    if (declared > maxBytes) {
      res.body.destroy();
      throw new UrlFetchRefused(`it is larger than ${maxBytes} bytes`);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of res.body) {
        size += (chunk as Buffer).length;
        if (size > maxBytes) {
          throw new UrlFetchRefused(`it is larger than ${maxBytes} bytes`);
        }
        chunks.push(chunk as Buffer);
      }
    } catch (err) {
      if (err instanceof UrlFetchRefused) throw err;
      const code = (err as { code?: string }).code;
      throw new UrlFetchRefused(signal.aborted || code === 'UND_ERR_BODY_TIMEOUT' ? `no answer within ${timeoutMs} ms` : 'the download broke');
    }
    const data = Buffer.concat(chunks);
    const kind = sniffImage(data);
    if (!kind) throw new UrlFetchRefused('it is not a PNG, JPEG or WebP image');
    return { data, kind };
  }
}

function parseUrl(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UrlFetchRefused('it is not a valid URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UrlFetchRefused('only http(s) URLs and base64 data URLs are accepted');
  if (url.username || url.password) throw new UrlFetchRefused('URLs with credentials are not accepted');
  return url;
}
