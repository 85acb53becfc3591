import http from 'node:http';
import Koa from 'koa';
import getRawBody from 'raw-body';
import { Agent, request } from 'undici';

// The throughput reference of DESIGN.md section 6: a bare Koa proxy that forwards
// POST /v1/chat/completions to the simulator with the same keep-alive undici Agent settings as
// the gateway, and nothing else (no auth, no validation, no hold, no workflow).
//   BARE_PORT=… UPSTREAM_URL=http://127.0.0.1:8199 npx tsx bench/bare-proxy.ts

const port = Number(process.env.BARE_PORT ?? 8098);
const upstream = new URL('/v1/chat/completions', process.env.UPSTREAM_URL ?? 'http://127.0.0.1:8199');
const agent = new Agent({ keepAliveTimeout: 30_000, connections: 256, pipelining: 1 });

const app = new Koa();
app.use(async (ctx) => {
  if (ctx.method === 'GET' && ctx.path === '/healthz') {
    ctx.body = { ok: true };
    return;
  }
  if (ctx.method !== 'POST' || ctx.path !== '/v1/chat/completions') {
    ctx.status = 404;
    return;
  }
  const body = await getRawBody(ctx.req, { limit: 4 * 1024 * 1024 });
  const res = await request(upstream, { method: 'POST', dispatcher: agent, headers: { 'content-type': 'application/json' }, body });
  ctx.status = res.statusCode;
  const type = res.headers['content-type'];
  if (typeof type === 'string' && type.startsWith('text/event-stream')) {
    ctx.type = type;
    ctx.body = res.body; // streamed through
    return;
  }
  if (typeof type === 'string') ctx.type = type;
  ctx.body = Buffer.from(await res.body.arrayBuffer());
});

const server = http.createServer(app.callback());
server.keepAliveTimeout = 65_000;
server.listen(port, '127.0.0.1', () => process.stdout.write(`bare proxy on http://127.0.0.1:${port} -> ${upstream.origin}\n`));

const stop = () => {
  server.close(() => {
    void agent.close().finally(() => process.exit(0));
  });
  server.closeAllConnections();
  setTimeout(() => process.exit(0), 2000).unref();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
