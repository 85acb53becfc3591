import type { Credits, Tariff } from '../../domain/credits/pricing';
import { prepared } from '../../platform/db';

// The hold statement: one call of credits_take_holds (migrations/202612310201_credits_hold_batches.ts,
// where the rule is written out with a worked example; its current body, the same rule with fewer
// statements: migrations/202702010800_credits_hold_one_write.ts) decides and writes a batch of holds: the
// balance check and the key's spend limit per hold in arrival order, each account and key row
// updated once, the reservation rows and their 'hold' ledger rows. The same function serves both
// of its uses, so they cannot drift apart:
//  - take: a batch of holds before their requests are forwarded (services/credits/holds.ts); a
//    batch of holds settled from a report commits without waiting for the disk;
//  - one: a batch of one hold that does not take part in its key's spend (most holds below
//    saturation; at c=1, every credits-variant hold) is the rule's simplest case, a conditional
//    update: HOLD_ONE below, one plain statement where the function runs four and its loop
//    (PostgreSQL CPU per hold about 90 µs instead of 215 µs, measured);
//  - recreate: by the outcome write (services/credits/outbox.ts), when a PostgreSQL crash lost
//    that commit: the same rows again, with the outcome, only if the row is absent. The amount is
//    the hold, or what the balance and the key's limit still allow if that is less (the charge
//    never exceeds the hold, so the account and the key stay within their limits). Durable.

/** Everything the hold statement writes: fixed when the hold is taken (invariant 5). */
export interface HoldTerms {
  reservationId: string;
  accountId: string;
  keyId: string;
  model: string;
  provider: string;
  endpoint: string;
  tariff: Tariff;
  held: Credits;
  complimentary: boolean;
  /** text, image, audio or video */
  modality: string;
  /** the workflow that resolves the hold when it is not settled from a report (video jobs) */
  ownerWorkflowId: string | null;
  /** the API process that took it (api_processes) */
  processId: string | null;
  /** the hold also takes part in its key's spend limit (keyed variant) */
  trackKeySpend: boolean;
}

/** The verdict on one hold of a batch (null amounts when nothing was written). */
export interface HoldVerdict {
  verdict: 'taken' | 'insufficient_quota' | 'spend_limit' | 'exists';
  held: Credits | null;
  balance_before: Credits | null;
  /** the account's credits left when the hold was decided (after it, if taken) */
  balance: Credits | null;
  spend_limit: Credits | null;
  key_remaining: Credits | null;
}

/** The call for a batch: binding 1 the batch (JSON array of holdElement), 2 recreate, 3 durable. */
export const HOLD_BATCH_CALL = 'credits_take_holds(?::jsonb, ?, ?)';

/** The statement for a batch: one verdict row per hold, in the batch's order. */
export const HOLD_BATCH_SQL = `SELECT ord, verdict, held, balance_before, balance, spend_limit, key_remaining FROM ${HOLD_BATCH_CALL} ORDER BY ord`;

/** The same, as the prepared statement each API process runs per batch (platform/db.ts runPrepared). */
export const HOLD_BATCH = prepared('credits_take_holds', HOLD_BATCH_SQL);

/** One hold of a batch as the function reads it (type credits_hold); numbers stay exact strings. */
export function holdElement(t: HoldTerms, ord: number, outcome?: { report: unknown; bodyId: string | null }): Record<string, unknown> {
  return {
    ord,
    id: t.reservationId,
    account_id: t.accountId,
    key_id: t.keyId,
    key_spend: t.trackKeySpend,
    held: t.held,
    model: t.model,
    provider: t.provider,
    endpoint: t.endpoint,
    im: t.tariff.input_multiplier,
    om: t.tariff.output_multiplier,
    cm: t.tariff.cache_multiplier,
    ccm: t.tariff.cache_creation_multiplier,
    aim: t.tariff.audio_input_multiplier ?? null,
    aom: t.tariff.audio_output_multiplier ?? null,
    complimentary: t.complimentary,
    owner: t.ownerWorkflowId,
    modality: t.modality,
    process: t.processId,
    report: outcome?.report ?? null,
    body_id: outcome?.bodyId ?? null,
  };
}

/** Whether a batch goes out as HOLD_ONE: one hold, not counted against its key's spend limit. */
export function holdAlone(batch: HoldTerms[]): boolean {
  return batch.length === 1 && !batch[0].trackKeySpend;
}

/**
 * One hold, the rule of credits_take_holds for a batch of one: taken when the account's credits
 * left cover it, in the account update itself (PostgreSQL re-checks the condition on the newest
 * row once it holds the lock, so concurrent holds cannot overdraw). The reservation row and its
 * 'hold' ledger row are written only when the update took the hold. Refused: the balance read
 * after. The same verdict row as the function; not durable: see takeHolds.
 */
export const HOLD_ONE = prepared(
  'credits_take_hold',
  // named in the text too, for pg_stat_activity and pg_stat_statements
  `/* credits_take_hold */ WITH a AS (
     UPDATE accounts SET total_usage = total_usage + ?::numeric, reserved_credits = reserved_credits + ?::numeric, pending_requests = pending_requests + 1
     WHERE id = ?::uuid AND total_credits - total_usage >= ?::numeric
     RETURNING total_credits - total_usage AS left_after),
   r AS (
     INSERT INTO reservations (id, account_id, key_id, model, provider, endpoint, held_credits, balance_before,
         input_multiplier, output_multiplier, cache_multiplier, cache_creation_multiplier, audio_input_multiplier, audio_output_multiplier,
         complimentary, key_spend_tracked, owner_workflow_id, modality, api_process_id)
       SELECT h.id, h.account_id, h.key_id, h.model, h.provider, h.endpoint, h.held, a.left_after + h.held,
         h.im, h.om, h.cm, h.ccm, h.aim, h.aom, h.complimentary, false, h.owner, h.modality, h.process
       FROM a, (SELECT ?::uuid AS id, ?::uuid AS account_id, ?::uuid AS key_id, ?::text AS model, ?::text AS provider, ?::text AS endpoint,
         ?::numeric AS held, ?::numeric AS im, ?::numeric AS om, ?::numeric AS cm, ?::numeric AS ccm, ?::numeric AS aim, ?::numeric AS aom,
         ?::boolean AS complimentary, ?::text AS owner, ?::text AS modality, ?::uuid AS process) h
     RETURNING id, account_id, held_credits),
   l AS (INSERT INTO ledger (account_id, reservation_id, kind, amount) SELECT account_id, id, 'hold', held_credits FROM r)
   SELECT 0 AS ord, CASE WHEN a.left_after IS NULL THEN 'insufficient_quota' ELSE 'taken' END AS verdict,
     CASE WHEN a.left_after IS NOT NULL THEN ?::numeric END AS held, a.left_after + ?::numeric AS balance_before,
     COALESCE(a.left_after, (SELECT total_credits - total_usage FROM accounts WHERE id = ?::uuid)) AS balance,
     NULL::numeric AS spend_limit, NULL::numeric AS key_remaining,
     CASE WHEN NOT ?::boolean THEN set_config('synchronous_commit', 'off', true) END AS commit_mode
   FROM (SELECT 1) one LEFT JOIN a ON true`,
);

/** HOLD_ONE's values for one hold; durable: its commit waits for the disk. */
export function holdOneValues(t: HoldTerms, durable: boolean): Array<string | boolean | null> {
  const tr = t.tariff;
  return [
    t.held, t.held, t.accountId, t.held,
    t.reservationId, t.accountId, t.keyId, t.model, t.provider, t.endpoint,
    t.held, tr.input_multiplier, tr.output_multiplier, tr.cache_multiplier, tr.cache_creation_multiplier, tr.audio_input_multiplier ?? null, tr.audio_output_multiplier ?? null,
    t.complimentary, t.ownerWorkflowId, t.modality, t.processId,
    t.held, t.held, t.accountId, durable,
  ];
}
