import { request } from 'undici';
import { NODE_API_PREFIX, type EnrolRequest, type Heartbeat, type NodeOperation, type OperationResult } from '../domain/panel/node-ops';

// The agent's side of the node API (domain/panel/node-ops.ts): four calls, Bearer node token.

/** The panel answered with an HTTP error status. */
export class PanelHttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** Whether a failed call means the panel was not reached (network, timeout, 5xx) rather than refused the call. */
export const isUnreachable = (err: unknown): boolean => !(err instanceof PanelHttpError) || err.status >= 500 || err.status === 429;

export interface PanelClient {
  enrol(body: EnrolRequest, signal?: AbortSignal): Promise<{ node: string; heartbeatSeconds: number }>;
  /** long poll: resolves with the queued operations, or none after at most `waitSeconds` */
  operations(waitSeconds: number, signal?: AbortSignal): Promise<NodeOperation[]>;
  result(opId: string, result: OperationResult, signal?: AbortSignal): Promise<void>;
  heartbeat(body: Heartbeat, signal?: AbortSignal): Promise<void>;
}

export function createPanelClient(o: { url: string; token: string }): PanelClient {
  const base = o.url.replace(/\/+$/, '') + NODE_API_PREFIX;
  const call = async (method: 'GET' | 'POST', path: string, body: unknown, signal: AbortSignal | undefined, timeoutMs = 15_000): Promise<unknown> => {
    const res = await request(base + path, {
      method,
      signal,
      headers: { authorization: `Bearer ${o.token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    const text = await res.body.text();
    if (res.statusCode >= 400) throw new PanelHttpError(res.statusCode, `${method} ${path}: HTTP ${res.statusCode} ${text.slice(0, 300)}`);
    return text ? JSON.parse(text) : null;
  };
  return {
    enrol: async (body, signal) => (await call('POST', '/enrol', body, signal)) as { node: string; heartbeatSeconds: number },
    async operations(waitSeconds, signal) {
      const r = (await call('GET', `/operations?wait=${waitSeconds}`, undefined, signal, (waitSeconds + 15) * 1000)) as { operations?: NodeOperation[] } | null;
      return Array.isArray(r?.operations) ? r.operations : [];
    },
    result: async (opId, result, signal) => void (await call('POST', `/operations/${encodeURIComponent(opId)}/result`, result, signal)),
    heartbeat: async (body, signal) => void (await call('POST', '/heartbeat', body, signal)),
  };
}
