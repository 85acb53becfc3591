import type { RequestReport } from '../../domain/credits/reservation';
import { prepared, runPrepared, type Db } from '../../platform/db';
import { HOLD_BATCH_CALL, holdElement, type HoldTerms } from './hold-statement';
import type { OutcomeLine } from './outcome-line';

// The outcome outbox: a narrow row per recorded outcome in settlement_outbox (its own table, so that
// recording and claiming do not rewrite the wide reservation row and its indexes; the settlement
// statement deletes the row). The API records an outcome once (durable, after the client has its
// answer), a batch of them per statement (group commit, services/credits/group-commit.ts); the
// relay claims recorded outcomes for a workflow, at most `limit` a time, skipping rows another
// relay holds (FOR UPDATE SKIP LOCKED).

export const OUTBOX_CHANNEL = 'settlement_outbox';

export type Recorded = 'recorded' | 'recreated';

/** One outcome to record; given the hold's terms, a hold a PostgreSQL crash lost is written again with it. */
export interface OutcomeWrite {
  reservationId: string;
  report: RequestReport;
  lost?: HoldTerms;
}

/** Records each outcome of a held reservation, one durable commit and one NOTIFY for the batch (payload: how many); the ids recorded. */
const RECORD_SQL = `WITH o AS (SELECT * FROM jsonb_to_recordset(?::jsonb) AS o(id uuid, report jsonb, body_id text)),
  u AS (
    INSERT INTO settlement_outbox (reservation_id, report, body_id)
    SELECT o.id, o.report, o.body_id FROM o JOIN reservations r ON r.id = o.id AND r.status = 'held'
    ON CONFLICT (reservation_id) DO NOTHING
    RETURNING reservation_id AS id
  )
  SELECT COALESCE(array_agg(id::text), '{}') AS ids, CASE WHEN count(*) > 0 THEN pg_notify(?, count(*)::text) END AS notified FROM u`;
const RECORD = prepared('credits_record_outcomes', RECORD_SQL);

/**
 * Records a batch of outcomes and wakes the relay: a durable commit. Per outcome: null when it was
 * recorded (or resolved) already. Given the hold's terms, a reservation row that is absent (a
 * PostgreSQL crash lost the hold's commit, which does not wait for the disk) is written again
 * together with its outcome, its 'hold' ledger row and the account's (and key's) columns, by the
 * hold statement itself: 'recreated'. The row is written at most once (its id is the primary key).
 * Given an outcome line, the statement is written to the database before this returns its promise
 * (services/credits/outcome-line.ts); else through the pool.
 */
export async function recordOutcomes(db: Db, writes: OutcomeWrite[], line?: OutcomeLine): Promise<Array<Recorded | null>> {
  const batch = writes.map((w) => ({ id: w.reservationId, report: w.report, body_id: w.report.bodyId ?? null }));
  const values = [JSON.stringify(batch), OUTBOX_CHANNEL];
  // On the outcome line the statement leaves this process before this function first yields.
  const sent = line?.send(RECORD, values) ?? null;
  const recorded = new Set<string>(((await (sent ?? runPrepared(db, RECORD, values))).rows[0] as { ids: string[] }).ids);
  const out: Array<Recorded | null> = writes.map((w) => (recorded.has(w.reservationId) ? 'recorded' : null));
  const lost = writes.map((w, i) => ({ w, i })).filter(({ w }) => !recorded.has(w.reservationId) && w.lost);
  if (lost.length === 0) return out;
  // The rare path (a PostgreSQL crash lost holds): one statement writes them again with their outcomes.
  const elements = lost.map(({ w }, ord) => {
    if (w.lost!.reservationId !== w.reservationId) throw new Error(`the terms of ${w.lost!.reservationId} given for ${w.reservationId}`);
    return holdElement(w.lost!, ord, { report: w.report, bodyId: w.report.bodyId ?? null });
  });
  const again = await db.raw(
    `WITH t AS (SELECT * FROM ${HOLD_BATCH_CALL})
     SELECT t.ord, t.verdict, (SELECT count(pg_notify(?, '')) FROM (SELECT 1 FROM t WHERE verdict = 'taken' LIMIT 1) x)::int AS notified FROM t ORDER BY t.ord`,
    [JSON.stringify(elements), true, true, OUTBOX_CHANNEL],
  );
  for (const row of again.rows as Array<{ ord: number; verdict: string }>) {
    const { w, i } = lost[row.ord];
    // exists: recorded or resolved meanwhile. Anything else: the account is gone; retried.
    if (row.verdict === 'taken') out[i] = 'recreated';
    else if (row.verdict !== 'exists') throw new Error(`the lost hold ${w.reservationId} could not be written again (${row.verdict}); retried`);
  }
  return out;
}

/** Records one outcome (recordOutcomes with a batch of one). */
export async function recordOutcome(db: Db, reservationId: string, report: RequestReport, lost?: HoldTerms, line?: OutcomeLine): Promise<Recorded | null> {
  return (await recordOutcomes(db, [{ reservationId, report, lost }], line))[0];
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
 * each uncertain or late-cost one for `reservation-<id>`. One statement (its own transaction):
 * the batch's rows first, in claim order.
 */
export async function claimOutcomes(db: Db, limit: number): Promise<ClaimedOutcome[]> {
  const res = await db.raw(
    `WITH c AS (
       SELECT reservation_id AS id, recorded_at, ${OWN_WORKFLOW} AS own FROM settlement_outbox
       WHERE workflow_id IS NULL
       ORDER BY recorded_at, reservation_id LIMIT ? FOR UPDATE SKIP LOCKED
     ), first AS (SELECT id FROM c WHERE NOT own ORDER BY recorded_at, id LIMIT 1),
     u AS (
       UPDATE settlement_outbox o SET workflow_id = CASE WHEN c.own THEN 'reservation-' || c.id::text ELSE 'settlement-' || (SELECT id::text FROM first) END,
         claimed_at = now()
       FROM c WHERE o.reservation_id = c.id
       RETURNING o.reservation_id AS id, o.report, o.workflow_id, c.own, c.recorded_at
     )
     SELECT u.id, r.account_id, r.key_id, r.model, r.endpoint, r.held_credits, u.report, u.workflow_id AS settlement_workflow_id
     FROM u JOIN reservations r ON r.id = u.id ORDER BY u.own, u.recorded_at, u.id`,
    [limit],
  );
  return res.rows;
}

/** Claims older than `olderThanMs` still waiting for their settlement: their workflow may not have started (a relay died between claim and start). */
export async function staleClaims(db: Db, olderThanMs: number, limit = 500): Promise<ClaimedOutcome[]> {
  const r = await db.raw(
    `SELECT r.id, r.account_id, r.key_id, r.model, r.endpoint, r.held_credits, o.report, o.workflow_id AS settlement_workflow_id
     FROM settlement_outbox o JOIN reservations r ON r.id = o.reservation_id
     WHERE o.workflow_id IS NOT NULL AND o.claimed_at < now() - make_interval(secs => ?::float8 / 1000)
     ORDER BY o.claimed_at LIMIT ?`,
    [olderThanMs, limit],
  );
  return r.rows;
}

/**
 * Moves outcomes that API processes of the previous release recorded on the reservation row (its
 * `report`, claimed or not) here, at most `limit` a pass: the relay's stale pass runs it, so during
 * a rolling upgrade they settle too (migrations/202702020100_credits_settlement_outbox.ts). Each
 * half reads one of the row's two outbox indexes (reservations_outbox, reservations_claimed),
 * empty otherwise. The number moved.
 */
export async function adoptLegacyOutcomes(db: Db, limit = 500): Promise<number> {
  const r = await db.raw(
    `WITH recorded AS (
       SELECT id, report, body_id, reported_at, settlement_workflow_id, settlement_claimed_at FROM reservations
       WHERE status = 'held' AND reported_at IS NOT NULL AND settlement_workflow_id IS NULL AND report IS NOT NULL
       LIMIT ? FOR UPDATE SKIP LOCKED
     ), claimed AS (
       SELECT id, report, body_id, reported_at, settlement_workflow_id, settlement_claimed_at FROM reservations
       WHERE status = 'held' AND settlement_workflow_id IS NOT NULL AND report IS NOT NULL
       LIMIT ? FOR UPDATE SKIP LOCKED
     ), l AS (SELECT * FROM recorded UNION ALL SELECT * FROM claimed),
     moved AS (
       INSERT INTO settlement_outbox (reservation_id, report, body_id, recorded_at, workflow_id, claimed_at)
       SELECT id, report, body_id, COALESCE(reported_at, now()), settlement_workflow_id, settlement_claimed_at FROM l
       ON CONFLICT (reservation_id) DO NOTHING
     )
     UPDATE reservations r SET report = NULL, reported_at = NULL, settlement_workflow_id = NULL, settlement_claimed_at = NULL FROM l WHERE r.id = l.id`,
    [limit, limit],
  );
  return r.rowCount ?? 0;
}

/** Marks claims as looked at again (so the next stale pass waits another interval). */
export async function touchClaims(db: Db, ids: string[]): Promise<void> {
  await db('settlement_outbox').whereIn('reservation_id', ids).update({ claimed_at: db.fn.now() });
}
