import { GatewayError } from '../../domain/shared/errors';
import { normalize, type Credits, type Tariff } from '../../domain/credits/pricing';
import type { RequestReport } from '../../domain/credits/reservation';
import type { Db } from '../../platform/db';
import type { Logger } from '../../platform/logger';
import { recordOutcome } from './outbox';

export interface HoldRequest {
  reservationId: string;
  accountId: string;
  keyId: string;
  model: string;
  provider: string;
  endpoint: string;
  tariff: Tariff;
  held: Credits;
  complimentary: boolean;
  /**
   * Also add the hold to the key's spend, conditional on its spend limit, in the same statement
   * (keyed variant, spec 3 A). Defaults to the Reservations option of the same name.
   */
  trackKeySpend?: boolean;
  /** text (default), image, audio or video */
  modality?: string;
  /**
   * The workflow that resolves this hold when it is not the reservation workflow (a video job's
   * own workflow): then no reservation workflow starts and `report` must not be used.
   */
  ownerWorkflowId?: string;
}

export interface Hold {
  reservationId: string;
  held: Credits;
  balanceBefore: Credits;
  tariff: Tariff;
  complimentary: boolean;
  /** Records the outcome; the settlement relay hands it to a workflow, which settles the hold. */
  report(r: RequestReport): Promise<void>;
}

// The hold: the balance check, the account update, the reservation row and the ledger row in
// one statement.
const HOLD = `WITH a AS (
   UPDATE accounts SET total_usage = total_usage + :held, reserved_credits = reserved_credits + :held,
     pending_requests = pending_requests + 1
   WHERE id = :account_id AND total_credits - total_usage >= :held
   RETURNING id, total_credits - total_usage + :held AS balance_before
 ), r AS (
   INSERT INTO reservations (id, account_id, key_id, model, provider, endpoint, held_credits, balance_before,
     input_multiplier, output_multiplier, cache_multiplier, cache_creation_multiplier, audio_input_multiplier, audio_output_multiplier,
     complimentary, owner_workflow_id, modality, api_process_id)
   SELECT :id, a.id, :key_id, :model, :provider, :endpoint, :held, a.balance_before,
     :im, :om, :cm, :ccm, :aim, :aom, :complimentary, :owner, :modality, :process FROM a
   RETURNING id
 ), l AS (
   INSERT INTO ledger (account_id, reservation_id, kind, amount) SELECT a.id, r.id, 'hold', :held FROM a, r
 )
 SELECT a.balance_before, (SELECT total_credits - total_usage FROM accounts WHERE id = :account_id) AS balance FROM (SELECT 1) one LEFT JOIN a ON true`;

// The same hold with the key's spend limit taking part (spec 3 A). k0 locks the key row and
// checks the limit against its latest committed spend (a row lock re-reads the row), and only
// then is the account updated; the key's spend is raised only if the account update happened.
// Lock order key → account, as in settlement, so the two never deadlock. A key whose spend has
// reached its limit refuses even a hold of 0.
const HOLD_WITH_KEY_SPEND = `WITH k0 AS (
   SELECT id FROM api_keys
   WHERE id = :key_id AND (spend_limit IS NULL OR (spend < spend_limit AND spend + :held <= spend_limit))
   FOR NO KEY UPDATE
 ), a AS (
   UPDATE accounts SET total_usage = total_usage + :held, reserved_credits = reserved_credits + :held,
     pending_requests = pending_requests + 1
   FROM k0
   WHERE accounts.id = :account_id AND total_credits - total_usage >= :held
   RETURNING accounts.id, total_credits - total_usage + :held AS balance_before
 ), k AS (
   UPDATE api_keys SET spend = spend + :held FROM a WHERE api_keys.id = :key_id RETURNING api_keys.id
 ), r AS (
   INSERT INTO reservations (id, account_id, key_id, model, provider, endpoint, held_credits, balance_before,
     input_multiplier, output_multiplier, cache_multiplier, cache_creation_multiplier, audio_input_multiplier, audio_output_multiplier,
     complimentary, key_spend_tracked, owner_workflow_id, modality, api_process_id)
   SELECT :id, a.id, :key_id, :model, :provider, :endpoint, :held, a.balance_before,
     :im, :om, :cm, :ccm, :aim, :aom, :complimentary, true, :owner, :modality, :process FROM a
   RETURNING id
 ), l AS (
   INSERT INTO ledger (account_id, reservation_id, kind, amount) SELECT a.id, r.id, 'hold', :held FROM a, r
 )
 SELECT a.balance_before, (SELECT total_credits - total_usage FROM accounts WHERE id = :account_id) AS balance,
   EXISTS (SELECT 1 FROM k0) AS key_ok,
   (SELECT spend_limit FROM api_keys WHERE id = :key_id) AS spend_limit,
   (SELECT GREATEST(spend_limit - spend, 0) FROM api_keys WHERE id = :key_id) AS key_remaining
 FROM (SELECT 1) one LEFT JOIN a ON true`;

/**
 * Takes holds (one conditional statement: the balance check, the account update, the
 * reservation row and the ledger row together) and records each outcome for settlement.
 */
export class Reservations {
  constructor(
    private readonly db: Db,
    private readonly opts: {
      logger: Logger;
      trackKeySpend?: boolean;
      /** this API process (api_processes): its holds are released only once it is dead */
      processId?: string;
    },
  ) {}

  async hold(h: HoldRequest): Promise<Hold> {
    const trackKeySpend = h.trackKeySpend ?? this.opts.trackKeySpend ?? false;
    const res = await this.db.raw(trackKeySpend ? HOLD_WITH_KEY_SPEND : HOLD, {
      id: h.reservationId,
      account_id: h.accountId,
      key_id: h.keyId,
      model: h.model,
      provider: h.provider,
      endpoint: h.endpoint,
      held: h.held,
      im: h.tariff.input_multiplier,
      om: h.tariff.output_multiplier,
      cm: h.tariff.cache_multiplier,
      ccm: h.tariff.cache_creation_multiplier,
      aim: h.tariff.audio_input_multiplier ?? null,
      aom: h.tariff.audio_output_multiplier ?? null,
      complimentary: h.complimentary,
      owner: h.ownerWorkflowId ?? null,
      modality: h.modality ?? 'text',
      process: this.opts.processId ?? null,
    });
    const row = res.rows[0];
    if (row.balance_before === null) {
      if (trackKeySpend && !row.key_ok) {
        throw new GatewayError('key_spend_limit_exceeded', { limit: normalize(row.spend_limit ?? '0'), needed: h.held, remaining: normalize(row.key_remaining ?? '0') });
      }
      throw new GatewayError('insufficient_quota', { needed: h.held, balance: row.balance });
    }
    return {
      reservationId: h.reservationId,
      held: h.held,
      balanceBefore: row.balance_before,
      tariff: h.tariff,
      complimentary: h.complimentary,
      report: (r) => this.report(h, r),
    };
  }

  /**
   * Records the outcome on the reservation row (the outbox, services/credits/outbox.ts): durable
   * before anything depends on Temporal. The body id is readable by /v1/generation from then on.
   * A database that is down is retried for up to a minute; this process's heartbeat keeps the
   * hold from the sweeper meanwhile.
   */
  private async report(h: HoldRequest, r: RequestReport): Promise<void> {
    if (h.ownerWorkflowId) throw new Error(`hold ${h.reservationId} is resolved by ${h.ownerWorkflowId}, not by a report`);
    for (let attempt = 0; ; attempt++) {
      try {
        await recordOutcome(this.db, h.reservationId, r);
        return;
      } catch (err) {
        if (attempt >= 10) {
          this.opts.logger.error({ err, reservation: h.reservationId }, 'could not record the outcome; the hold is released once this process is gone');
          return;
        }
        await new Promise((res) => setTimeout(res, Math.min(100 * 2 ** attempt, 10_000)));
      }
    }
  }
}
