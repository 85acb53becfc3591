import type { RequestReport } from '../../domain/credits/reservation';
import type { Db } from '../../platform/db';
import { holdBindings, holdStatement, type HoldTerms } from './hold-statement';
import type { OutcomeLine } from './outcome-line';

// The outcome outbox on the reservation row. The API records an outcome once (durable, after the
// client has its answer); the relay claims recorded outcomes for a workflow, at most `limit` a
// time, skipping rows another relay holds (FOR UPDATE SKIP LOCKED).

export const OUTBOX_CHANNEL = 'settlement_outbox';

export type Recorded = 'recorded' | 'recreated';

/**
 * Records the outcome of a held reservation and wakes the relay: a durable commit. Null when it
 * was recorded (or resolved) already. Given the hold's terms, a reservation row that is absent (a
 * PostgreSQL crash lost the hold's commit, which does not wait for the disk) is written again
 * together with its outcome, its 'hold' ledger row and the account's (and key's) columns, by the
 * hold statement itself: 'recreated'. The row is written at most once (its id is the primary key).
 * Given an outcome line, the statement is written to the database before this returns its promise
 * (services/credits/outcome-line.ts); else through the pool.
 */
export async function recordOutcome(db: Db, reservationId: string, report: RequestReport, lost?: HoldTerms, line?: OutcomeLine): Promise<Recorded | null> {
  const statement = db.raw(
    `WITH u AS (
       UPDATE reservations SET report = :report::jsonb, reported_at = now(), body_id = COALESCE(body_id, :body_id)
       WHERE id = :id AND status = 'held' AND report IS NULL
       RETURNING id
     )
     SELECT count(*)::int AS n, pg_notify(:channel, '') FROM u`,
    { id: reservationId, report: JSON.stringify(report), body_id: report.bodyId ?? null, channel: OUTBOX_CHANNEL },
  );
  // On the outcome line the statement leaves this process before this function first yields.
  const native = line ? statement.toSQL().toNative() : null;
  const sent = native ? line!.send(native.sql, native.bindings) : null;
  const r = await (sent ?? statement);
  if (r.rows[0].n === 1) return 'recorded';
  if (!lost) return null;
  if (lost.reservationId !== reservationId) throw new Error(`the terms of ${lost.reservationId} given for ${reservationId}`);
  const again = await db.raw(holdStatement('recreate', lost.trackKeySpend), {
    ...holdBindings(lost),
    report: JSON.stringify(report),
    body_id: report.bodyId ?? null,
    channel: OUTBOX_CHANNEL,
  });
  if (again.rows[0].balance_before !== null) return 'recreated';
  // Not written: the row exists (recorded or resolved already), or a concurrent change took the room it read.
  if (await db('reservations').where({ id: reservationId }).first('id')) return null;
  throw new Error(`the lost hold ${reservationId} could not be written again (its account or key changed meanwhile); retried`);
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
