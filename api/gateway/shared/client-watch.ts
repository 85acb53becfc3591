import type { Context } from 'koa';

// Watches the client's connection from the moment a request is accepted: a client that leaves
// before its answer ended aborts the upstream call (whether or not the provider answered yet)
// and is settled as `cancelled`, never as an answered request (docs/credits.md). A drain that
// outlived its grace cuts the request on the server's side: `cut`, never a client's cancel.

export interface ClientWatch {
  /** aborts the upstream call when the client leaves */
  abort: AbortController;
  /** true once the client closed the connection before the answer ended */
  gone(): boolean;
  /** true once the process's drain cut the request (its grace ran out) */
  cut(): boolean;
}

/** A process's drain (SIGTERM): not ready any more, then, once its grace ran out, every request still running is cut. */
export class Drain {
  private readonly cutting = new AbortController();
  draining = false;

  get signal(): AbortSignal {
    return this.cutting.signal;
  }

  cutAll(): void {
    this.cutting.abort();
  }
}

export function watchClient(ctx: Context): ClientWatch {
  const abort = new AbortController();
  let left = false;
  let cut = false;
  const res = ctx.res;
  const drain: Drain | undefined = ctx.state.drain;
  const onCut = () => {
    if (left || res.writableFinished) return;
    cut = true;
    abort.abort();
  };
  const onClose = () => {
    drain?.signal.removeEventListener('abort', onCut);
    if (res.writableFinished || cut) return;
    left = true;
    abort.abort();
  };
  if (res.destroyed) onClose();
  else res.once('close', onClose);
  if (drain?.signal.aborted) onCut();
  else drain?.signal.addEventListener('abort', onCut, { once: true });
  return { abort, gone: () => left, cut: () => cut };
}
