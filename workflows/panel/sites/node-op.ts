import { ActivityFailure, condition, patched, proxyActivities, proxyLocalActivities, setHandler, sleep, upsertSearchAttributes } from '@temporalio/workflow';
import type { NodeOpActivities, SiteOpOutcome } from '../../../activities/panel/sites/node-ops';
import { HOSTING_NODE, nodeOpReportedSignal, type OperationResult } from '../../../domain/panel/node-ops';
import { SA } from '../../../domain/shared/search-attributes';
import type { NodeOpInput } from '../../../domain/panel/workflows';

// One per node operation (`node-op-<op_id>`, PANEL.md section 4): applies a site change on the
// panel's own hosting node directly, or waits for the node's agent to pull the queued operation
// and report its result, with durable timers and a deadline after which the operation expires.
// Either way it ends by recording the outcome on the site (active, suspended, failed, or gone),
// so a site is never left between states.

/** The hosting node's apply: a few file writes and an nginx reload, retried a few times; heartbeating, so a dead worker is noticed within seconds. */
const { applyOnHostingNode } = proxyActivities<NodeOpActivities>({
  startToCloseTimeout: '2 minutes',
  heartbeatTimeout: '20 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '10 seconds', maximumAttempts: 4 },
});

// Reads and conditional updates of our own rows: short, idempotent, so local activities (a marker
// in the history instead of three events per check). They retry until the database answers.
const { readNodeOp, expireNodeOp, finishSiteOp } = proxyLocalActivities<NodeOpActivities>({
  startToCloseTimeout: '15 seconds',
  retry: { initialInterval: '500 milliseconds', backoffCoefficient: 2, maximumInterval: '10 seconds' },
});

export interface NodeOpResult {
  opId: string;
  result: OperationResult;
  site: SiteOpOutcome;
}

export async function nodeOpWorkflow(input: NodeOpInput): Promise<NodeOpResult> {
  const result = input.node === HOSTING_NODE ? await applyDirectly(input) : await waitForAgent(input);
  const site = await finishSiteOp({ siteId: input.siteId, opId: input.opId, generation: input.generation, kind: input.kind, result });
  upsertSearchAttributes([{ key: SA.Status, value: result.ok ? 'done' : 'failed' }]);
  return { opId: input.opId, result, site };
}

async function applyDirectly(input: NodeOpInput): Promise<OperationResult> {
  try {
    return await applyOnHostingNode(input.opId, input.generation);
  } catch (err) {
    const cause = err instanceof ActivityFailure && err.cause ? err.cause.message : String(err);
    return { ok: false, refused: false, error: `the hosting node failed to apply the operation: ${cause}` };
  }
}

/**
 * Polls the queued operation until the agent reports, or expires it at the deadline (database
 * operations wait the same way). The node API signals when a result is recorded, which ends the
 * wait at once; the poll stays as the fallback for a lost signal.
 */
export async function waitForAgent(input: Pick<NodeOpInput, 'opId' | 'node' | 'timeoutMs' | 'pollMs'>): Promise<OperationResult> {
  const started = Date.now(); // workflow time: deterministic
  let reported = false;
  setHandler(nodeOpReportedSignal, () => {
    reported = true;
  });
  for (;;) {
    const op = await readNodeOp(input.opId);
    if (op.result) return op.result;
    const left = input.timeoutMs - (Date.now() - started);
    if (left <= 0) {
      const seconds = Math.round(input.timeoutMs / 100) / 10;
      const expired = await expireNodeOp(input.opId, `node ${input.node} did not report the operation within ${seconds} s`);
      if (expired) return expired;
      continue; // the agent reported just now: read its result
    }
    if (patched('node-op-reported-signal')) {
      await condition(() => reported, Math.min(input.pollMs, left));
      reported = false;
    } else await sleep(Math.min(input.pollMs, left));
  }
}
