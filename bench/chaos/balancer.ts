import net from 'node:net';

// A TCP load balancer the chaos run puts in front of two gateway API processes for the rolling
// restart, doing what a proxy in front of them does: each new connection goes to the next
// backend in turn, and one whose backend refuses it (a draining or restarting process) is tried
// on the other before any byte is forwarded. A connection that is open stays on its backend.

export interface Balancer {
  port: number;
  /** connections the balancer sent to another backend because the first refused */
  retried(): number;
  close(): Promise<void>;
}

export function startBalancer(backends: number[]): Promise<Balancer> {
  let next = 0;
  let retried = 0;
  const open = new Set<net.Socket>();
  const server = net.createServer((client) => {
    open.add(client);
    const waiting: Buffer[] = [];
    const buffer = (d: Buffer) => waiting.push(d);
    client.on('data', buffer);
    client.on('error', () => client.destroy());
    client.on('close', () => open.delete(client));
    const connect = (tries: number) => {
      const port = backends[next++ % backends.length];
      const upstream = net.connect({ host: '127.0.0.1', port });
      upstream.once('error', (err: NodeJS.ErrnoException) => {
        if (err.code === 'ECONNREFUSED' && tries + 1 < backends.length && !client.destroyed) {
          retried++;
          return connect(tries + 1);
        }
        client.destroy();
      });
      upstream.once('connect', () => {
        if (client.destroyed) return void upstream.destroy();
        open.add(upstream);
        upstream.on('close', () => open.delete(upstream));
        upstream.on('error', () => client.destroy());
        client.off('data', buffer);
        for (const d of waiting.splice(0)) upstream.write(d);
        client.pipe(upstream);
        upstream.pipe(client);
        client.on('close', () => upstream.destroy());
        upstream.on('close', () => client.destroy());
      });
    };
    connect(0);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () =>
      resolve({
        port: (server.address() as net.AddressInfo).port,
        retried: () => retried,
        close: () =>
          new Promise<void>((res) => {
            for (const s of open) s.destroy();
            server.close(() => res());
          }),
      }),
    );
  });
}
