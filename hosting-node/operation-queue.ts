import { validateOperation } from '../domain/panel/node-config';
import type { NodeOperation, OperationResult } from '../domain/panel/node-ops';
import type { Logger } from '../platform/logger';
import type { NodeState } from './node-state';

// The node's operation queue: operations, reconciliation rewrites and the slow backup calls run
// one at a time, in the order asked. An operation is applied idempotently by id: the result of an
// applied id is kept (node-state.ts) and a repeated id returns it without doing anything. Once the
// node stops, nothing new is applied; the step in progress finishes first.

/** An operation the node will not apply as sent (bad value, not capable): reported with refused: true. */
export class Refusal extends Error {}

export interface OperationQueue {
  /** applies one operation (queued behind any other); a repeated id returns the first result */
  apply(op: NodeOperation): Promise<OperationResult>;
  /** runs `fn` in the queue (after the step in progress), like an operation */
  inQueue<T>(fn: () => Promise<T> | T): Promise<T>;
  /** runs `fn` in the queue unless the node is stopping (then rejects) */
  whileRunning<T>(fn: () => Promise<T>): Promise<T>;
  /** refuses what comes next and waits for the queue to drain */
  stop(): Promise<void>;
}

export function createOperationQueue(o: { state: NodeState; applyOne: (op: NodeOperation) => Promise<OperationResult>; logger: Logger }): OperationQueue {
  const { state, logger: log } = o;
  let queue: Promise<unknown> = Promise.resolve();
  let stopped = false;
  const inQueue = <T>(fn: () => Promise<T> | T): Promise<T> => {
    const next = queue.then(fn);
    queue = next.catch(() => {});
    return next;
  };
  return {
    apply: (op) =>
      inQueue(async (): Promise<OperationResult> => {
        const id = typeof op?.id === 'string' ? op.id : '';
        const done = Object.hasOwn(state.ops, id) ? state.ops[id] : undefined;
        if (done) return done.result;
        const why = validateOperation(op);
        if (why) {
          const result: OperationResult = { ok: false, error: why, refused: true };
          if (/^[A-Za-z0-9_-]{1,64}$/.test(id)) state.record(id, String(op.kind), result);
          log.warn({ op: id, kind: op?.kind, why }, 'operation refused');
          return result;
        }
        if (stopped) return { ok: false, error: 'the node is stopping', refused: false };
        let result: OperationResult;
        try {
          result = await o.applyOne(op);
        } catch (err) {
          result = { ok: false, error: (err as Error).message, refused: err instanceof Refusal };
        }
        state.record(op.id, op.kind, result);
        log.info({ op: op.id, kind: op.kind, ok: result.ok, ...(result.ok ? {} : { error: result.error }) }, 'operation applied');
        return result;
      }),
    inQueue,
    whileRunning: (fn) =>
      inQueue(() => {
        if (stopped) throw new Error('the node is stopping');
        return fn();
      }),
    async stop() {
      stopped = true;
      await queue;
    },
  };
}
