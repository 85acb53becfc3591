import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Listening {
  url: string;
  server: http.Server;
  /** stops accepting, ends open connections, resolves when the server is closed */
  close(): Promise<void>;
}

/** Serves a request handler on host:port (0: a free port); keep-alive longer than common proxies' 60 s. */
export async function listen(handler: http.RequestListener, port: number, host = '127.0.0.1'): Promise<Listening> {
  const server = http.createServer(handler);
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const { port: bound } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${bound}`,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
