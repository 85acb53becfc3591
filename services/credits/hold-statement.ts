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
