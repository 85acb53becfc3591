import type { SiteUsage } from '../domain/panel/node-ops';
import type { Logger } from '../platform/logger';
import type { HostingNode } from './index';
import { isUnreachable, type PanelClient } from './panel-client';

// The node agent (`panel-host serve`): enrols with the panel, then pulls operations (long poll),
// applies each on the hosting node and reports its result until the panel accepts it, and sends a
// heartbeat (facts, metrics, usage) every few seconds. Any call that fails backs off; the first
// call that reaches the panel again after a failure counts as a reconnect.

export interface AgentOptions {
  node: string;
  client: PanelClient;
  hostingNode: HostingNode;
  logger: Logger;
  /** default: what the panel says at enrolment, else 10 s */
  heartbeatMs?: number;
  /** long-poll wait sent to the panel (default 25 s) */
  pollWaitSeconds?: number;
  /** backoff after a failure: from min, doubling, up to max (default 1 s to 30 s) */
  backoffMs?: { min: number; max: number };
  /** docroots are walked at most this often for the heartbeat's usage (default 60 s) */
  usageEveryMs?: number;
}

export interface Agent {
  agentStartedAt: string;
  reconnects(): number;
  /** resolves once enrolled */
  enrolled: Promise<void>;
  /** stops pulling after the operation in progress; does not stop the hosting node */
  stop(): Promise<void>;
}

export function startAgent(o: AgentOptions): Agent {
  const log = o.logger.child({ node: o.node });
  const agentStartedAt = new Date().toISOString();
  const ac = new AbortController();
  const { signal } = ac;
  const backoff = o.backoffMs ?? { min: 1000, max: 30_000 };
  let reconnects = 0;
  /** when the panel was last found unreachable; 0 while it is reachable */
  let lostAt = 0;
  let heartbeatMs = o.heartbeatMs ?? 10_000;

  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      if (signal.aborted) return resolve();
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        signal.removeEventListener('abort', done);
        resolve();
      }
      signal.addEventListener('abort', done);
    });
  /** a panel call; tracks reachability for the reconnect count */
  const call = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
    const started = performance.now();
    try {
      const r = await fn();
      // a call sent before the panel went away (a long poll) says nothing about it coming back
      if (lostAt && started >= lostAt) {
        lostAt = 0;
        reconnects++;
        log.info({ reconnects }, 'panel reachable again');
      }
      return r;
    } catch (err) {
      if (!signal.aborted && isUnreachable(err) && !lostAt) {
        lostAt = performance.now();
        log.warn({ err: (err as Error).message, call: what }, 'panel not reachable; retrying with backoff');
      }
      throw err;
    }
  };
  /** runs fn until it succeeds (or `giveUp` says the error is final, or the agent stops), backing off between tries */
  const retry = async <T>(what: string, fn: () => Promise<T>, giveUp: (err: unknown) => boolean = () => false): Promise<T | undefined> => {
    let delay = backoff.min;
    while (!signal.aborted) {
      try {
        return await call(what, fn);
      } catch (err) {
        if (signal.aborted) return undefined;
        if (giveUp(err)) throw err;
        if (!isUnreachable(err)) log.warn({ err: (err as Error).message, call: what }, 'panel refused a call; retrying');
        await pause(delay * (0.8 + Math.random() * 0.4));
        delay = Math.min(delay * 2, backoff.max);
      }
    }
    return undefined;
  };

  let usage: SiteUsage[] = [];
  let usageAt = 0;
  /** cron runs up to this seq reached the panel */
  let cronSeq = 0;
  const heartbeatLoop = async () => {
    while (!signal.aborted) {
      try {
        if (Date.now() - usageAt >= (o.usageEveryMs ?? 60_000)) {
          usage = await o.hostingNode.usage();
          usageAt = Date.now();
        }
        const metrics = await o.hostingNode.metrics();
        const cron = o.hostingNode.cronRunsSince(cronSeq);
        await call('heartbeat', () => o.client.heartbeat({ facts: o.hostingNode.facts(), metrics, usage, agentStartedAt, reconnects, cronRuns: cron.runs }, signal));
        cronSeq = cron.seq;
      } catch (err) {
        if (!signal.aborted && !isUnreachable(err)) log.warn({ err: (err as Error).message }, 'heartbeat failed');
      }
      await pause(heartbeatMs);
    }
  };

  const pollLoop = async () => {
    let delay = backoff.min;
    while (!signal.aborted) {
      const started = Date.now();
      let ops;
      try {
        ops = await call('operations', () => o.client.operations(o.pollWaitSeconds ?? 25, signal));
        delay = backoff.min;
      } catch (err) {
        if (signal.aborted) break;
        if (!isUnreachable(err)) log.warn({ err: (err as Error).message }, 'pulling operations failed');
        await pause(delay * (0.8 + Math.random() * 0.4));
        delay = Math.min(delay * 2, backoff.max);
        continue;
      }
      for (const op of ops) {
        if (typeof op?.id !== 'string' || !op.id) {
          log.warn({ kind: (op as { kind?: unknown } | null)?.kind }, 'operation without an id ignored');
          continue;
        }
        // applied even when stopping: the node records the result, so a re-sent op only reports it
        const result = await o.hostingNode.apply(op);
        // a 4xx other than 429 will never be accepted (the operation expired or is unknown): logged and dropped
        await retry(`result ${op.id}`, () => o.client.result(op.id, result, signal), (err) => !isUnreachable(err)).catch((err: Error) =>
          log.warn({ op: op.id, err: err.message }, 'the panel did not accept this result; dropped'),
        );
      }
      // a panel answering at once with nothing is not hammered
      if (ops.length === 0 && Date.now() - started < 500) await pause(1000);
    }
  };

  let loops: Promise<unknown> = Promise.resolve();
  const enrolled = (async () => {
    const r = await retry('enrol', () => o.client.enrol({ node: o.node, facts: o.hostingNode.facts(), agentStartedAt }, signal));
    if (!r) return;
    if (o.heartbeatMs === undefined && Number.isFinite(r.heartbeatSeconds) && r.heartbeatSeconds > 0) heartbeatMs = r.heartbeatSeconds * 1000;
    log.info({ heartbeatMs }, 'enrolled with the panel');
    loops = Promise.all([heartbeatLoop(), pollLoop()]);
  })();

  return {
    agentStartedAt,
    reconnects: () => reconnects,
    enrolled,
    async stop() {
      ac.abort();
      await enrolled;
      await loops;
    },
  };
}
