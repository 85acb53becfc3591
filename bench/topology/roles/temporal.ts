import fs from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import { createLogger } from '../../../platform/logger';
import { startTemporalDevServer } from '../../../platform/temporal-server';

// The Temporal host of `npm run topology`: the dev server, reached by the other hosts at this
// host's address (TOPO_ADDRESS:7233), with the system's search attributes. It listens on every
// address: bound to TOPO_ADDRESS alone, its own scheduler dials 127.0.0.1 and schedules fail
// ("Failed to create schedule … dial tcp 127.0.0.1:… connection refused"). The dev server has no
// TLS: with TOPO_TLS_CERT, TOPO_TLS_KEY and TOPO_TLS_CA, a TLS front on TOPO_ADDRESS:7233 that
// requires a client certificate signed by that CA (mTLS) forwards to the dev server on port 7234.
// Prints `ready <address>`.

async function main() {
  const address = process.env.TOPO_ADDRESS!;
  const [cert, key, ca] = [process.env.TOPO_TLS_CERT, process.env.TOPO_TLS_KEY, process.env.TOPO_TLS_CA];
  const port = cert ? 7234 : 7233;
  const dev = await startTemporalDevServer({ ip: '0.0.0.0', port, namespace: 'default', logger: createLogger('warn') });
  let front: tls.Server | null = null;
  if (cert && key && ca) {
    front = tls.createServer({ cert: fs.readFileSync(cert), key: fs.readFileSync(key), ca: fs.readFileSync(ca), requestCert: true, rejectUnauthorized: true, ALPNProtocols: ['h2'] }, (socket) => {
      const upstream = net.connect(port, '127.0.0.1');
      socket.pipe(upstream).pipe(socket);
      const close = () => (socket.destroy(), upstream.destroy());
      socket.on('error', close);
      upstream.on('error', close);
    });
    front.on('tlsClientError', (err) => process.stderr.write(`refused a TLS client: ${err.message}\n`));
    await new Promise<void>((r) => front!.listen(7233, address, r));
  }
  const stop = () => void (front?.close(), dev.stop().finally(() => process.exit(0)));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.stdout.write(`ready ${address}:7233 (${front ? `TLS front, mTLS, to the dev server on ${dev.address}` : dev.address})\n`);
}

main().catch((err) => {
  process.stderr.write(`temporal host failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
