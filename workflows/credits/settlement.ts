import { proxyLocalActivities, upsertMemo } from '@temporalio/workflow';
import type { SettlementActivities } from '../../activities/credits/settlement';
import type { BatchSettlement, SettlementInput } from '../../domain/credits/reservation';

// Settled inside the workflow task (a local activity): one task settles the whole batch.
const { settleBatch } = proxyLocalActivities<SettlementActivities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});

/**
 * One per batch of recorded outcomes (`settlement-<first request id>`; 1–50, or more where the
 * server takes a longer RequestIds: services/credits/relay.ts): settles every
 * reservation of the batch exactly once (each guarded by status = 'held') from the outcome
 * recorded on its row, and states in its memo what it charged.
 */
export async function settlementWorkflow(input: SettlementInput): Promise<BatchSettlement> {
  const result = await settleBatch(input.reservationIds);
  upsertMemo({ requests: input.reservationIds.length, settled: result.settled, charged: result.charged });
  return result;
}
