import type { RequestReport } from '../../domain/credits/reservation';
import type { Db } from '../../platform/db';

// The outcome outbox on the reservation row. The API records an outcome once (durable, after the
// client has its answer); the relay claims recorded outcomes for a workflow, at most `limit` a
// time, skipping rows another relay holds (FOR UPDATE SKIP LOCKED).

export const OUTBOX_CHANNEL = 'settlement_outbox';

/** Records the outcome of a held reservation and wakes the relay; false when it was recorded (or resolved) already. */
export async function recordOutcome(db: Db, reservationId: string, report: RequestReport): Promise<boolean> {
  const r = await db.raw(
    `WITH u AS (
       UPDATE reservations SET report = :report::jsonb, reported_at = now(), body_id = COALESCE(body_id, :body_id)
       WHERE id = :id AND status = 'held' AND report IS NULL
       RETURNING id
     )
     SELECT count(*)::int AS n, pg_notify(:channel, '') FROM u`,
    { id: reservationId, report: JSON.stringify(report), body_id: report.bodyId ?? null, channel: OUTBOX_CHANNEL },
  );
  return r.rows[0].n === 1;
}

export interface ClaimedOutcome {
  id: string;
  account_id: string;
  key_id: string;
  model: string;
  endpoint: string;
  held_credits: string;
  report: RequestReport;
  settlement_workflow_id: string;
}

/** Outcomes that need a reservation workflow of their own (provider may still be working, or a late cost). */
const OWN_WORKFLOW = `(report->>'uncertain')::boolean IS TRUE OR report->'lateCost' IS NOT NULL`;

/**
 * Claims up to `limit` recorded outcomes, oldest first: a batch for `settlement-<first id>`, and
 * each uncertain or late-cost one for `reservation-<id>`.
 */
export async function claimOutcomes(db: Db, limit: number): Promise<ClaimedOutcome[]> {
  return db.transaction(async (trx) => {
    const rows: Array<{ id: string; own: boolean }> = (
      await trx.raw(
        `SELECT id, ${OWN_WORKFLOW} AS own FROM reservations
         WHERE status = 'held' AND reported_at IS NOT NULL AND settlement_workflow_id IS NULL
         ORDER BY reported_at LIMIT ? FOR UPDATE SKIP LOCKED`,
        [limit],
      )
    ).rows;
    if (rows.length === 0) return [];
    const batch = rows.filter((r) => !r.own).map((r) => r.id);
    const own = rows.filter((r) => r.own).map((r) => r.id);
    const claimed: ClaimedOutcome[] = [];
    const claim = async (ids: string[], workflowId: string | null) => {
      const res = await trx.raw(
        `UPDATE reservations SET settlement_workflow_id = COALESCE(?, 'reservation-' || id::text), settlement_claimed_at = now()
         WHERE id = ANY(?::uuid[])
         RETURNING id, account_id, key_id, model, endpoint, held_credits, report, settlement_workflow_id`,
        [workflowId, ids],
      );
      claimed.push(...res.rows);
    };
    if (batch.length) await claim(batch, `settlement-${batch[0]}`);
    if (own.length) await claim(own, null);
    return claimed;
  });
}

/** Claims older than `olderThanMs` still held: their workflow may not have started (a relay died between claim and start). */
export async function staleClaims(db: Db, olderThanMs: number, limit = 500): Promise<ClaimedOutcome[]> {
  const r = await db.raw(
    `SELECT id, account_id, key_id, model, endpoint, held_credits, report, settlement_workflow_id FROM reservations
     WHERE status = 'held' AND settlement_workflow_id IS NOT NULL AND settlement_claimed_at < now() - make_interval(secs => ?::float8 / 1000)
     ORDER BY settlement_claimed_at LIMIT ?`,
    [olderThanMs, limit],
  );
  return r.rows;
}

/** Marks claims as looked at again (so the next stale pass waits another interval). */
export async function touchClaims(db: Db, ids: string[]): Promise<void> {
  await db('reservations').whereIn('id', ids).update({ settlement_claimed_at: db.fn.now() });
}

/** The recorded outcomes of a batch, for its settlement workflow. */
export async function recordedOutcomes(db: Db, ids: string[]): Promise<Array<{ id: string; status: string; report: RequestReport | null }>> {
  return db('reservations').whereIn('id', ids).select('id', 'status', 'report');
}
