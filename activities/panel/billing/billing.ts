import type { Db } from '../../../platform/db';
import { heartbeating } from '../shared/heartbeating';
import { dueHours, recordHour } from '../../../services/panel/billing/metering';
import type { Clock } from '../../../services/panel/billing/plans';
import { closeStatement } from '../../../services/panel/billing/statements';

// The billing workflows' side effects (metering, month close), built from their dependencies; the
// clock is injected so tests drive the hours instead of waiting for them.

export interface BillingActivityDeps {
  db: Db;
  clock: Clock;
}

export function createBillingActivities(d: BillingActivityDeps) {
  return {
    /** The hours to meter now, oldest first (YYYY-MM-DDTHH). */
    async dueMeterHours(): Promise<string[]> {
      return dueHours(d.db, d.clock());
    },
    /** Records one hour's metered facts once; a repeat writes nothing. */
    async recordMeterHour(hour: string) {
      return heartbeating(() => recordHour(d.db, hour));
    },
    /** Writes an org's closed statement of a month once; returns its id and totals. */
    async closeMonthStatement(input: { orgId: string; period: string }) {
      const st = await heartbeating(() => closeStatement(d.db, input.orgId, input.period));
      return { orgId: st.org_id, period: st.period, meteredHours: st.metered_hours, totals: st.totals, closedAt: String(st.closed_at) };
    },
  };
}

export type BillingActivities = ReturnType<typeof createBillingActivities>;
