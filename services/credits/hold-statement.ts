import type { Credits, Tariff } from '../../domain/credits/pricing';

// The hold statement: the balance check (and the key's spend limit), the account update, the
// reservation row and its 'hold' ledger row, in one statement. One template serves both of its
// uses, so they cannot drift apart:
//  - take: before a request is forwarded (services/credits/holds.ts); a hold settled from a
//    report commits without waiting for the disk (synchronous_commit off for its transaction);
//  - recreate: by the outcome write (services/credits/outbox.ts), when a PostgreSQL crash lost
//    that commit: the same rows again, the outcome on the reservation row, only if the row is
//    absent. The amount is the hold, or what the balance and the key's limit still allow if
//    that is less (the charge never exceeds the hold, so the account and the key stay within
//    their limits). Durable like every outcome write.
// Lock order key → account (k0 before a), as in settlement, so the two never deadlock.

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

export type HoldUse = 'take' | 'recreate';

/**
 * The statement's text. Result columns: balance_before and held (null when nothing was written),
 * balance, and with the key's spend: key_ok, spend_limit, key_remaining.
 */
export function holdStatement(use: HoldUse, keySpend: boolean): string {
  const recreate = use === 'recreate';
  // The amount: the hold as asked, or (re-created) at most what still fits, only if the row is absent.
  const h = recreate
    ? `SELECT LEAST(:held::numeric, GREATEST(ac.total_credits - ac.total_usage, 0)${keySpend ? ', CASE WHEN ky.spend_limit IS NULL THEN :held::numeric ELSE GREATEST(ky.spend_limit - ky.spend, 0) END' : ''}) AS held
       FROM accounts ac${keySpend ? ' JOIN api_keys ky ON ky.id = :key_id' : ''}
       WHERE ac.id = :account_id AND NOT EXISTS (SELECT 1 FROM reservations WHERE id = :id)`
    : 'SELECT :held::numeric AS held';
  // k0 locks the key row and checks the limit against its latest committed spend (a row lock re-reads the row);
  // only then is the account updated. A key whose spend has reached its limit refuses even a hold of 0.
  const k0 = `, k0 AS (
   SELECT api_keys.id FROM api_keys, h
   WHERE api_keys.id = :key_id AND (spend_limit IS NULL OR (${recreate ? '' : 'spend < spend_limit AND '}spend + h.held <= spend_limit))
   FOR NO KEY UPDATE OF api_keys
 )`;
  const k = `, k AS (
   UPDATE api_keys SET spend = spend + a.held FROM a WHERE api_keys.id = :key_id RETURNING api_keys.id
 )`;
  const outcomeColumns = recreate ? ', report, reported_at, body_id, hold_recreated_at' : '';
  const outcomeValues = recreate ? ', :report::jsonb, now(), :body_id, now()' : '';
  const keyColumns = keySpend
    ? `, EXISTS (SELECT 1 FROM k0) AS key_ok,
   (SELECT spend_limit FROM api_keys WHERE id = :key_id) AS spend_limit,
   (SELECT GREATEST(spend_limit - spend, 0) FROM api_keys WHERE id = :key_id) AS key_remaining`
    : '';
  // take: no fsync for a hold the outcome write can re-create; recreate: wake the settlement relay.
  const last = recreate
    ? `, CASE WHEN a.id IS NULL THEN NULL ELSE pg_notify(:channel, '') END AS notified`
    : `, CASE WHEN :durable THEN NULL ELSE set_config('synchronous_commit', 'off', true) END AS commit_mode`;
  return `WITH h AS (
   ${h}
 )${keySpend ? k0 : ''}, a AS (
   UPDATE accounts SET total_usage = total_usage + h.held, reserved_credits = reserved_credits + h.held,
     pending_requests = pending_requests + 1
   FROM h${keySpend ? ', k0' : ''}
   WHERE accounts.id = :account_id AND total_credits - total_usage >= h.held
   RETURNING accounts.id, h.held, total_credits - total_usage + h.held AS balance_before
 )${keySpend ? k : ''}, r AS (
   INSERT INTO reservations (id, account_id, key_id, model, provider, endpoint, held_credits, balance_before,
     input_multiplier, output_multiplier, cache_multiplier, cache_creation_multiplier, audio_input_multiplier, audio_output_multiplier,
     complimentary, key_spend_tracked, owner_workflow_id, modality, api_process_id${outcomeColumns})
   SELECT :id, a.id, :key_id, :model, :provider, :endpoint, a.held, a.balance_before,
     :im, :om, :cm, :ccm, :aim, :aom, :complimentary, ${keySpend ? 'true' : 'false'}, :owner, :modality, :process${outcomeValues} FROM a
   RETURNING id
 ), l AS (
   INSERT INTO ledger (account_id, reservation_id, kind, amount) SELECT a.id, r.id, 'hold', a.held FROM a, r
 )
 SELECT a.balance_before, a.held, (SELECT total_credits - total_usage FROM accounts WHERE id = :account_id) AS balance${keyColumns}${last}
 FROM (SELECT 1) one LEFT JOIN a ON true`;
}

/** The statement's bindings for a hold's terms (a re-created one adds :report, :body_id and :channel). */
export function holdBindings(t: HoldTerms): Record<string, string | boolean | null> {
  return {
    id: t.reservationId,
    account_id: t.accountId,
    key_id: t.keyId,
    model: t.model,
    provider: t.provider,
    endpoint: t.endpoint,
    held: t.held,
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
  };
}
