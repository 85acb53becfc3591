import net from 'node:net';

// A TCP proxy the chaos run puts between the credits worker and Temporal. Held, it forwards
// nothing (bytes wait in the proxy): the relay's claims commit in PostgreSQL while their workflow
// starts cannot reach Temporal. Dropped, every connection is closed and what waited is thrown
// away, as when the worker dies before its start requests left it.

export interface TcpProxy {
  port: number;
  hold(): void;
  /** closes every connection, discarding the bytes that waited */
  drop(): void;
  release(): void;
  close(): Promise<void>;
}

interface Pair {
  client: net.Socket;
  upstream: net.Socket;
  toUpstream: Buffer[];
  toClient: Buffer[];
}

export function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  let held = false;
  const pairs = new Set<Pair>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target);
    const pair: Pair = { client, upstream, toUpstream: [], toClient: [] };
    pairs.add(pair);
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('data', (d) => (held ? pair.toUpstream.push(d) : upstream.write(d)));
    upstream.on('data', (d) => (held ? pair.toClient.push(d) : client.write(d)));
    for (const s of [client, upstream]) {
      s.on('error', end);
      s.on('close', end);
    }
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      resolve({
        port: (server.address() as net.AddressInfo).port,
        hold: () => {
          held = true;
        },
        drop: () => {
          for (const p of [...pairs]) {
            p.toUpstream = [];
            p.toClient = [];
            p.client.destroy();
            p.upstream.destroy();
          }
          pairs.clear();
        },
        release: () => {
          held = false;
          for (const p of pairs) {
            for (const d of p.toUpstream.splice(0)) p.upstream.write(d);
            for (const d of p.toClient.splice(0)) p.client.write(d);
          }
        },
        close: () =>
          new Promise<void>((res) => {
            for (const p of pairs) {
              p.client.destroy();
              p.upstream.destroy();
            }
            server.close(() => res());
          }),
      });
    });
  });
}
