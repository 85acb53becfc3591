import type { Context } from 'koa';

// Watches the client's connection from the moment a request is accepted: a client that leaves
// before its answer ended aborts the upstream call (whether or not the provider answered yet)
// and is settled as `cancelled`, never as an answered request (docs/credits.md).

export interface ClientWatch {
  /** aborts the upstream call when the client leaves */
  abort: AbortController;
  /** true once the client closed the connection before the answer ended */
  gone(): boolean;
}

export function watchClient(ctx: Context): ClientWatch {
  const abort = new AbortController();
  let left = false;
  const res = ctx.res;
  const onClose = () => {
    if (res.writableFinished) return;
    left = true;
    abort.abort();
  };
  if (res.destroyed) onClose();
  else res.once('close', onClose);
  return { abort, gone: () => left };
}
