import type { ServerResponse } from 'node:http';
import type { Context } from 'koa';

export interface EventStream {
  res: ServerResponse;
  /** true once the client closed the connection before the stream ended */
  clientGone(): boolean;
}

/**
 * Takes the response out of Koa's hands and opens a server-sent-events stream, flushing the
 * headers at once. A client that leaves aborts the upstream call through `abort`.
 */
export function openEventStream(ctx: Context, requestId: string, abort: AbortController): EventStream {
  ctx.respond = false;
  const res = ctx.res;
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
    'x-gateway-request-id': requestId,
  });
  res.flushHeaders();
  let gone = false;
  res.once('close', () => {
    if (!res.writableFinished) {
      gone = true;
      abort.abort();
    }
  });
  return { res, clientGone: () => gone };
}
