import { ActivityFailure, patched, proxyActivities, proxyLocalActivities, upsertMemo, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import type { BatchOutcome, ReconcileActivities } from '../../../activities/panel/reconcile/reconcile';
import { HOSTING_NODE } from '../../../domain/panel/node-ops';
import { SA } from '../../../domain/shared/search-attributes';
import type { ReconcileInput } from '../../../domain/panel/workflows';

// One per reconciliation pass (`reconcile-<pass_id>`, PANEL.md section 4): opens the pass (or ends
// at once when another pass runs), walks the hosting node's sites a batch per activity in id order,
// checks its customer databases, lists orphan files, and stores the report. Progress lives in PostgreSQL (each site's verdict in
// this pass), so a batch retried after its worker died skips what was finished and a site is
// never rewritten twice. Started by the schedule (`reconcile-scheduled-<time>`) or by
// `POST /v1/reconcile/run` (`reconcile-<uuid>`).

export interface ReconcileResult {
  passId: string;
  /** false: another pass was running (its id in `running`), this one did nothing */
  ran: boolean;
  running?: string;
  sites: number;
  remediated: number;
  counts: Record<string, number> | null;
}

const local = proxyLocalActivities<ReconcileActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '500 milliseconds', backoffCoefficient: 2, maximumInterval: '10 seconds' },
});

export async function reconcileWorkflow(input: ReconcileInput): Promise<ReconcileResult> {
  const passId = input.passId ?? workflowInfo().workflowId.replace(/^reconcile-/, '');
  // the pass id is the workflow id's tail (no PassId attribute: the dev server's Keyword slots are taken)
  upsertSearchAttributes([{ key: SA.NodeName, value: HOSTING_NODE }]);
  const opened = await local.openPass({ passId, mode: input.mode, trigger: input.trigger });
  if (!opened.opened) {
    upsertSearchAttributes([{ key: SA.Status, value: 'skipped' }]);
    upsertMemo({ pass_id: passId, outcome: `did nothing: pass ${opened.running} was running` });
    return { passId, ran: false, running: opened.running, sites: 0, remediated: 0, counts: null };
  }
  // A batch reads and may rewrite up to batchSize sites and reload nginx once; retried until it
  // succeeds (it resumes where it stopped), on another worker if this one dies.
  const node = proxyActivities<ReconcileActivities>({
    startToCloseTimeout: '10 minutes',
    heartbeatTimeout: input.heartbeatTimeoutMs,
    retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 10 },
  });
  try {
    let after: string | null = null;
    for (;;) {
      const b: BatchOutcome = await node.reconcileBatch({ passId, mode: input.mode, after, limit: input.batchSize });
      if (b.last === null) break;
      after = b.last;
    }
    // the hosting node's customer databases (issue 32 item 3), after its sites
    if (patched('reconcile-databases')) await node.reconcileDatabases({ passId, mode: input.mode });
    const orphans = await node.findOrphans();
    const done = await local.finishPass({ passId, orphans });
    upsertSearchAttributes([{ key: SA.Status, value: 'done' }]);
    const counts = Object.entries(done.counts ?? {}).map(([status, n]) => `${n} ${status.replace('_', ' ')}`);
    upsertMemo({ pass_id: passId, outcome: `${done.sites} sites checked (${counts.join(', ')}); ${done.remediated} rewritten; report: GET /v1/reconcile/passes/${passId}` });
    return { passId, ran: true, sites: done.sites, remediated: done.remediated, counts: done.counts };
  } catch (err) {
    const why = err instanceof ActivityFailure && err.cause ? err.cause.message : String(err);
    await local.failPass({ passId, error: why });
    upsertSearchAttributes([{ key: SA.Status, value: 'failed' }]);
    throw err;
  }
}
