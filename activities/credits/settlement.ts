import { add } from '../../domain/credits/pricing';
import type { BatchSettlement, RequestReport } from '../../domain/credits/reservation';
import type { Db } from '../../platform/db';
import { settleReservation, settleReservations } from '../../services/credits/settlement';

/** Settlement activities: the rule itself lives in services/credits/settlement.ts (exactly once by its guard). */
export function createSettlementActivities(db: Db) {
  return {
    settleReservation: (reservationId: string, report: RequestReport) => settleReservation(db, reservationId, report),

    /** Settles the held reservations of a batch from their recorded outcomes, set-based; resolved ones are skipped. */
    async settleBatch(reservationIds: string[]): Promise<BatchSettlement> {
      const applied = (await settleReservations(db, reservationIds.map((id) => ({ id })))).filter((r) => r.applied);
      return { settled: applied.length, charged: applied.reduce((sum, r) => add(sum, r.charge), '0') };
    },
  };
}

export type SettlementActivities = ReturnType<typeof createSettlementActivities>;
