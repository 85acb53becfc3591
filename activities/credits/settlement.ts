import type { RequestReport } from '../../domain/credits/reservation';
import type { Db } from '../../platform/db';
import { settleReservation } from '../../services/credits/settlement';

/** Ledger activities: settlement itself lives in services/credits/settlement.ts (exactly once by its guard). */
export function createLedgerActivities(db: Db) {
  return {
    settleReservation: (reservationId: string, report: RequestReport) => settleReservation(db, reservationId, report),
  };
}

export type LedgerActivities = ReturnType<typeof createLedgerActivities>;
