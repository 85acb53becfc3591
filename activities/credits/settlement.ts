import type { RequestReport } from '../../domain/credits/reservation';
import type { Db } from '../../platform/db';
import { settleReservation } from '../../services/credits/settlement';

/** Settlement activities: the rule itself lives in services/credits/settlement.ts (exactly once by its guard). */
export function createSettlementActivities(db: Db) {
  return {
    settleReservation: (reservationId: string, report: RequestReport) => settleReservation(db, reservationId, report),
  };
}

export type SettlementActivities = ReturnType<typeof createSettlementActivities>;
