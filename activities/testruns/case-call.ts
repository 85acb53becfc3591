import { Agent, buildConnector, request } from 'undici';
import {
  errorMessageOf,
  extractOutput,
  extractStreamOutput,
  hostAllowed,
  hostOf,
  urlsInBody,
  type CaseOutput,
  type HostRule,
} from '../../domain/testruns/assertions';
import type { Dialect } from '../../domain/testruns/runs';

// One case's HTTP request, behind the network gate: the target and every URL the body makes the
// provider fetch must be allowed, and the connection itself is refused to any other host (so a
// redirect or a bug in the pre-check cannot reach one either).

/** The case reached for a host the configuration does not allow: a failure of the case, never retried. */
export class NetworkGateRefusal extends Error {}

/** No complete answer within the case timeout: a failure of the case, never retried. */
export class CaseTimeout extends Error {}

export interface CaseCall {
  dialect: Dialect;
  url: URL;
  headers: Record<string, string>;
  body: Record<string, unknown>;
  timeoutMs: number;
  allowed: HostRule[];
  /** activity cancellation */
  signal: AbortSignal;
}

export interface CaseHttpAnswer {
  status: number;
  output: CaseOutput;
  errorMessage: string | null;
  latencyMs: number;
  requestId: string | null;
  /** x-gateway-cost: exact credits of a non-streaming answer */
  headerCost: string | null;
}

const MAX_BODY = 8 * 1024 * 1024;

/** Throws NetworkGateRefusal naming the first host the case may not reach. */
export function checkNetworkGate(c: Pick<CaseCall, 'url' | 'body' | 'allowed'>): void {
  for (const [what, u] of [['target', c.url] as const, ...urlsInBody(c.body).map((u) => ['URL in the request body', u] as const)]) {
    const { host, port } = hostOf(u);
    if (!hostAllowed(c.allowed, host, port)) {
      throw new NetworkGateRefusal(`network gate: ${what} ${u.protocol}//${u.host} is not an allowed host (allowed: ${describe(c.allowed)}); add "${u.host}" to the configuration's allowed_hosts`);
    }
  }
}

const describe = (rules: HostRule[]) => rules.map((r) => (r.port ? `${r.host}:${r.port}` : r.host)).join(', ') || 'none';

export async function callCase(c: CaseCall): Promise<CaseHttpAnswer> {
  checkNetworkGate(c);
  const connect = buildConnector({ timeout: Math.min(c.timeoutMs, 10_000) });
  const dispatcher = new Agent({
    connect: (opts, cb) => {
      const port = opts.port || (opts.protocol === 'https:' ? '443' : '80');
      if (!hostAllowed(c.allowed, opts.hostname, port)) cb(new NetworkGateRefusal(`network gate: connection to ${opts.hostname}:${port} refused (not an allowed host)`), null);
      else connect(opts, cb);
    },
  });
  const timeout = AbortSignal.timeout(c.timeoutMs);
  const signal = AbortSignal.any([c.signal, timeout]);
  const started = performance.now();
  try {
    const res = await request(c.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...c.headers },
      body: JSON.stringify(c.body),
      dispatcher,
      signal,
      headersTimeout: c.timeoutMs,
      bodyTimeout: c.timeoutMs,
    });
    let size = 0;
    const chunks: Buffer[] = [];
    for await (const chunk of res.body) {
      size += (chunk as Buffer).length;
      if (size > MAX_BODY) throw new Error(`the answer is larger than ${MAX_BODY} bytes`);
      chunks.push(chunk as Buffer);
    }
    const latencyMs = Math.round(performance.now() - started);
    const text = Buffer.concat(chunks).toString('utf8');
    const header = (name: string) => {
      const v = res.headers[name];
      return typeof v === 'string' ? v : null;
    };
    const isStream = (header('content-type') ?? '').includes('text/event-stream');
    let json: unknown;
    try {
      json = isStream ? undefined : JSON.parse(text);
    } catch {
      json = undefined;
    }
    const ok = res.statusCode >= 200 && res.statusCode < 300;
    const output = !ok ? { text, toolCalls: [] } : isStream ? extractStreamOutput(c.dialect, text) : json === undefined ? { text, toolCalls: [] } : extractOutput(c.dialect, json);
    return {
      status: res.statusCode,
      output,
      errorMessage: ok ? null : (errorMessageOf(json) ?? (text.slice(0, 300) || null)),
      latencyMs,
      requestId: header('x-gateway-request-id') ?? header('x-request-id'),
      headerCost: header('x-gateway-cost'),
    };
  } catch (err) {
    if (c.signal.aborted) throw c.signal.reason;
    if (timeout.aborted) throw new CaseTimeout(`no complete answer within the case timeout of ${c.timeoutMs} ms`);
    const cause = (err as { cause?: unknown }).cause;
    if (err instanceof NetworkGateRefusal) throw err;
    if (cause instanceof NetworkGateRefusal) throw cause;
    throw err;
  } finally {
    await dispatcher.close().catch(() => undefined);
  }
}
