import { randomUUID } from 'node:crypto';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';

export interface Listening {
  url: string;
  server: http.Server;
  /** stops accepting, ends open connections, resolves when the server is closed */
  close(): Promise<void>;
  /** requests whose response has not ended or closed yet */
  inFlight(): number;
  /** open client connections, idle keep-alive ones included */
  openConnections(): number;
  /**
   * A drain's start: no new connections; open ones stay, a request that arrives on one is served,
   * and every answer not yet begun says Connection: close, so each connection closes after its
   * next answer instead of under a client that is sending on it (a rolling restart loses no request).
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
  const connections = new Set<net.Socket>();
  server.on('connection', (socket: net.Socket) => {
    connections.add(socket);
    socket.once('close', () => connections.delete(socket));
  });
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
    openConnections: () => connections.size,
    stopAccepting: () => {
      draining = true;
      for (const res of inFlight) if (!res.headersSent) res.setHeader('connection', 'close');
      // The listener only: http.Server.close() would also close the idle keep-alive connections,
      // and a client sending on one at that moment loses its request.
      net.Server.prototype.close.call(server);
    },
    close: () =>
      new Promise<void>((resolve) => {
        // After stopAccepting the listener is closed already: 'close' comes once the last connection ends.
        if (server.listening) server.close(() => resolve());
        else if (connections.size === 0) resolve();
        else server.once('close', () => resolve());
        server.closeAllConnections();
      }),
  };
}
