import { startSimulator } from '../simulator/server';

// The provider simulator in a process of its own (benchmarks): the gateway and the bare proxy
// then both call it over loopback without sharing their event loop with it.
//   SIMULATOR_PORT=8199 npx tsx bench/simulator.ts

async function main(): Promise<void> {
  const sim = await startSimulator({ port: Number(process.env.SIMULATOR_PORT ?? 8199) });
  process.stdout.write(`simulator on ${sim.url}\n`);
  const stop = () => void sim.close().finally(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((err) => {
  process.stderr.write(`simulator failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
