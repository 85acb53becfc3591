import type { ServerResponse } from 'node:http';
import type { Context } from 'koa';
import type { ClientWatch } from './client-watch';

export interface EventStream {
  res: ServerResponse;
  /** true once the client closed the connection before the stream ended */
  clientGone(): boolean;
}

/**
 * Takes the response out of Koa's hands and opens a server-sent-events stream, flushing the
 * headers at once. The client is watched since the request was accepted (client-watch.ts).
 */
export function openEventStream(ctx: Context, requestId: string, client: ClientWatch): EventStream {
  ctx.respond = false;
  const res = ctx.res;
  if (!res.destroyed) {
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
      'x-gateway-request-id': requestId,
    });
    res.flushHeaders();
  }
  return { res, clientGone: client.gone };
}
