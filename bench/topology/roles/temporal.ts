import { createLogger } from '../../../platform/logger';
import { startTemporalDevServer } from '../../../platform/temporal-server';

// The Temporal host of `npm run topology`: the dev server's frontend on this host's address
// (TOPO_ADDRESS:7233), with the system's search attributes. Prints `ready <address>`.

async function main() {
  const dev = await startTemporalDevServer({ ip: process.env.TOPO_ADDRESS!, port: 7233, namespace: 'default', logger: createLogger('warn') });
  const stop = () => void dev.stop().finally(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.stdout.write(`ready ${dev.address}\n`);
}

main().catch((err) => {
  process.stderr.write(`temporal host failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
