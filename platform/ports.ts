import net from 'node:net';

// Ports are drawn below the kernel's ephemeral range (32768–60999 on Linux): a port the OS hands
// out for `listen(0)` or an outgoing connection can be taken again by any other process (the
// Temporal dev server's own listeners, a client socket) between our check and the real bind.
const LOW = 20_000;
const HIGH = 32_767;
const given = new Set<number>();

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    // 0.0.0.0: a port free there is free on every address (nginx and mariadbd bind the wildcard)
    srv.listen({ port, host: '0.0.0.0', exclusive: true }, () => srv.close(() => resolve(true)));
  });
}

/** A port nothing listens on right now, never one this process handed out before. */
export async function freePort(): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const port = LOW + Math.floor(Math.random() * (HIGH - LOW + 1));
    if (given.has(port) || !(await bindable(port))) continue;
    given.add(port);
    return port;
  }
  throw new Error(`no free port between ${LOW} and ${HIGH} after 200 tries`);
}
