import { createLogger } from '../../../platform/logger';
import { startTemporalDevServer } from '../../../platform/temporal-server';

// The Temporal host of `npm run topology`: the dev server, reached by the other hosts at this
// host's address (TOPO_ADDRESS:7233), with the system's search attributes. It listens on every
// address: bound to TOPO_ADDRESS alone, its own scheduler dials 127.0.0.1 and schedules fail
// ("Failed to create schedule … dial tcp 127.0.0.1:… connection refused"). Prints `ready <address>`.

async function main() {
  const dev = await startTemporalDevServer({ ip: '0.0.0.0', port: 7233, namespace: 'default', logger: createLogger('warn') });
  const stop = () => void dev.stop().finally(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.stdout.write(`ready ${process.env.TOPO_ADDRESS}:7233 (${dev.address})\n`);
}

main().catch((err) => {
  process.stderr.write(`temporal host failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
