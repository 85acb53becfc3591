import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Listening {
  url: string;
  server: http.Server;
  /** stops accepting, ends open connections, resolves when the server is closed */
  close(): Promise<void>;
  /** requests whose response has not ended or closed yet */
  inFlight(): number;
  /**
   * A drain's start: no new connections, idle ones closed; a request that still arrives on an open
   * one is served, and every answer from now on says Connection: close, so no client reuses a
   * connection that is about to close (a rolling restart loses no request).
   */
  stopAccepting(): void;
}

/**
 * The answer to a request Node's parser refuses before any handler runs: headers over
 * http.maxHeaderSize (431) or a malformed request (400). Default: Node's bare status line.
 */
export type ClientErrorAnswer = (kind: 'header_too_large' | 'malformed', limit: string) => { status: number; body: unknown };

/** Serves a request handler on host:port (0: a free port); keep-alive longer than common proxies' 60 s. */
export async function listen(handler: http.RequestListener, port: number, host = '127.0.0.1', clientError?: ClientErrorAnswer): Promise<Listening> {
  const server = http.createServer(handler);
  server.keepAliveTimeout = 65_000;
  const inFlight = new Set<http.ServerResponse>();
  let draining = false;
  server.on('request', (_req, res: http.ServerResponse) => {
    if (draining) res.setHeader('connection', 'close');
    inFlight.add(res);
    res.once('close', () => inFlight.delete(res));
  });
  if (clientError) {
    server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
      if (err.code === 'ECONNRESET' || !socket.writable) return void socket.destroy();
      const { status, body } = clientError(err.code === 'HPE_HEADER_OVERFLOW' ? 'header_too_large' : 'malformed', `${Math.round(http.maxHeaderSize / 1024)} KB`);
      const json = JSON.stringify(body);
      socket.end(
        `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(json)}\r\nx-request-id: ${randomUUID()}\r\nconnection: close\r\n\r\n${json}`,
      );
    });
  }
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const { port: bound } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${bound}`,
    server,
    inFlight: () => inFlight.size,
    stopAccepting: () => {
      draining = true;
      for (const res of inFlight) if (!res.headersSent) res.setHeader('connection', 'close');
      server.close();
      server.closeIdleConnections();
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
