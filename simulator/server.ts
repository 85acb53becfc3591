// Provider simulator: a plain node:http server speaking OpenAI's chat-completions format,
// with fault injection and request stats for tests. No framework and no per-request logging,
// so benchmarks measure the gateway rather than the simulator.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseDefaultsUpdate } from './behaviour';
import { SIMULATOR_MODELS } from './catalog';
import { serveChat } from './chat';
import { readBody, sendError, sendJson } from './http';
import { BehaviourDefaults, Stats, type SimState } from './state';

export interface SimulatorOptions {
  port: number;
  host?: string;
}

export interface SimulatorHandle {
  url: string;
  port: number;
  close(): Promise<void>;
}

const MODELS_LIST = {
  object: 'list',
  data: SIMULATOR_MODELS.map((m) => ({ id: m.upstream_model, object: 'model', created: 0, owned_by: 'simulator' })),
};

function methodNotAllowed(res: ServerResponse, allowed: string): void {
  sendError(res, 405, 'Method not allowed.', { headers: { allow: allowed } });
}

async function updateDefaults(req: IncomingMessage, res: ServerResponse, state: SimState): Promise<void> {
  const read = await readBody(req);
  if (!read.ok) return sendError(res, 413, 'Request body too large.', { headers: { connection: 'close' } });
  let body: unknown;
  try {
    body = JSON.parse(read.body.toString('utf8'));
  } catch {
    return sendError(res, 400, 'Body must be JSON.', { param: 'body' });
  }
  const update = parseDefaultsUpdate(body);
  if (!update.ok) return sendError(res, 400, update.error, { code: 'invalid_sim_control' });
  state.defaults.update(update.model, update.set, update.unset);
  sendJson(res, 200, state.defaults);
}

async function route(req: IncomingMessage, res: ServerResponse, state: SimState): Promise<void> {
  const url = req.url ?? '/';
  const query = url.indexOf('?');
  const path = query === -1 ? url : url.slice(0, query);
  const method = req.method ?? 'GET';

  switch (path) {
    case '/v1/chat/completions':
      return method === 'POST' ? serveChat(req, res, state) : methodNotAllowed(res, 'POST');
    case '/v1/models':
      return method === 'GET' ? sendJson(res, 200, MODELS_LIST) : methodNotAllowed(res, 'GET');
    case '/healthz':
      return method === 'GET' ? sendJson(res, 200, { ok: true }) : methodNotAllowed(res, 'GET');
    case '/_sim/behaviour':
      if (method === 'GET') return sendJson(res, 200, state.defaults);
      if (method === 'POST') return updateDefaults(req, res, state);
      if (method === 'DELETE') {
        state.defaults.reset();
        return sendJson(res, 200, state.defaults);
      }
      return methodNotAllowed(res, 'GET, POST, DELETE');
    case '/_sim/stats':
      if (method === 'GET') return sendJson(res, 200, state.stats);
      if (method === 'DELETE') {
        state.stats.reset();
        return sendJson(res, 200, state.stats);
      }
      return methodNotAllowed(res, 'GET, DELETE');
    default:
      return sendError(res, 404, `Unknown path: ${method} ${path}`, { code: 'unknown_url' });
  }
}

export async function startSimulator(opts: SimulatorOptions): Promise<SimulatorHandle> {
  const host = opts.host ?? '127.0.0.1';
  const state: SimState = { stats: new Stats(), defaults: new BehaviourDefaults() };

  const server = createServer((req, res) => {
    // Whatever a client sends or does, the process must survive it.
    route(req, res, state).catch(() => {
      if (!res.headersSent) sendError(res, 500, 'Simulator internal error.');
      else res.destroy();
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });

  const port = (server.address() as AddressInfo).port;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    port,
    close() {
      closing ??= new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        // Hanging and keep-alive sockets would otherwise hold close() open forever.
        server.closeAllConnections();
      });
      return closing;
    },
  };
}

if (require.main === module) {
  const port = Number(process.env.SIMULATOR_PORT ?? 8199);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error(`SIMULATOR_PORT must be a port number, got '${process.env.SIMULATOR_PORT}'`);
    process.exit(1);
  }
  startSimulator({ port, host: process.env.SIMULATOR_HOST ?? '127.0.0.1' })
    .then((sim) => {
      console.log(`provider simulator listening on ${sim.url}`);
      const stop = (): void => void sim.close().then(() => process.exit(0));
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    })
    .catch((err: unknown) => {
      console.error('provider simulator failed to start:', err);
      process.exit(1);
    });
}
