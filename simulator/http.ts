// Small HTTP helpers shared by the simulator routes.
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';

export const BODY_LIMIT = 32 * 1024 * 1024;

export function sendJson(res: ServerResponse, status: number, value: unknown, headers: OutgoingHttpHeaders = {}): void {
  if (res.headersSent || res.destroyed) return;
  const body = JSON.stringify(value);
  res.writeHead(status, {
    ...headers,
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

function errorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 429) return 'rate_limit_error';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

export interface ErrorOptions {
  type?: string;
  code?: string | null;
  param?: string | null;
  headers?: OutgoingHttpHeaders;
}

/** OpenAI-style error body: `{ error: { message, type, param, code } }`. */
export function sendError(res: ServerResponse, status: number, message: string, opts: ErrorOptions = {}): void {
  sendJson(
    res,
    status,
    { error: { message, type: opts.type ?? errorType(status), param: opts.param ?? null, code: opts.code ?? null } },
    opts.headers,
  );
}

export type BodyResult = { ok: true; body: Buffer } | { ok: false; reason: 'too_large' };

/**
 * Reads the whole request body. Rejects if the client goes away mid-body. Past the limit the
 * rest is drained and discarded so the 413 can still be delivered.
 */
export function readBody(req: IncomingMessage, limit = BODY_LIMIT): Promise<BodyResult> {
  const declared = Number(req.headers['content-length']);
  if (declared > limit) {
    req.resume();
    return Promise.resolve({ ok: false, reason: 'too_large' });
  }
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on('data', (chunk: Buffer) => {
      if (tooLarge) return;
      size += chunk.length;
      if (size > limit) {
        tooLarge = true;
        parts.length = 0;
        resolve({ ok: false, reason: 'too_large' });
        return;
      }
      parts.push(chunk);
    });
    req.on('end', () => resolve({ ok: true, body: parts.length === 1 && parts[0] ? parts[0] : Buffer.concat(parts) }));
    req.on('error', reject);
    req.on('close', () => {
      if (!req.complete) reject(new Error('client closed the request before the body was complete'));
    });
  });
}

/**
 * Waits `ms`, resolving false early when the connection closes, so a long latency never
 * outlives its socket (and never keeps a test process alive after close()).
 */
export function pause(ms: number, res: ServerResponse): Promise<boolean> {
  if (res.destroyed) return Promise.resolve(false);
  if (ms <= 0) return Promise.resolve(true);
  return new Promise((resolve) => {
    const onClose = (): void => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      res.off('close', onClose);
      resolve(true);
    }, ms);
    res.once('close', onClose);
  });
}

/** Resolves true once the response can take more data, false if the connection closed. */
export function drained(res: ServerResponse): Promise<boolean> {
  return new Promise((resolve) => {
    const done = (ok: boolean) => (): void => {
      res.off('drain', onDrain);
      res.off('close', onClose);
      resolve(ok);
    };
    const onDrain = done(true);
    const onClose = done(false);
    res.once('drain', onDrain);
    res.once('close', onClose);
  });
}

export function bearerKey(req: IncomingMessage): string | null {
  const auth = req.headers.authorization;
  if (!auth) return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(auth);
  return match?.[1] ?? null;
}
