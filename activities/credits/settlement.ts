import { add } from '../../domain/credits/pricing';
import type { BatchSettlement, RequestReport } from '../../domain/credits/reservation';
import type { Db } from '../../platform/db';
import { recordedOutcomes } from '../../services/credits/outbox';
import { settleReservation } from '../../services/credits/settlement';

/** Settlement activities: the rule itself lives in services/credits/settlement.ts (exactly once by its guard). */
export function createSettlementActivities(db: Db) {
  return {
    settleReservation: (reservationId: string, report: RequestReport) => settleReservation(db, reservationId, report),

    /** Settles each held reservation of a batch from its recorded outcome; resolved ones are skipped. */
    async settleBatch(reservationIds: string[]): Promise<BatchSettlement> {
      let settled = 0;
      let charged = '0';
      for (const row of await recordedOutcomes(db, reservationIds)) {
        if (row.status !== 'held' || !row.report) continue;
        const r = await settleReservation(db, row.id, row.report);
        if (r.applied) {
          settled++;
          charged = add(charged, r.charge);
        }
      }
      return { settled, charged };
    },
  };
}

export type SettlementActivities = ReturnType<typeof createSettlementActivities>;
