import type { Knex } from 'knex';

// The outcome outbox in a table of its own (issue 31, PostgreSQL's CPU and WAL per request). On
// the reservation row, recording an outcome and claiming it rewrote that wide row twice, each time
// with an entry in each of its indexes (none of the updates could be HOT: each touched an indexed
// column). Now the API inserts a narrow row per outcome here, the relay claims these rows, and the
// settlement statement deletes them as it settles their reservations, copying the claim's workflow
// id and the recording time to the reservation row (which workflow settled it, and the lag). A row
// here is an outcome recorded and not yet settled. The hold statement, given an outcome (a hold a
// PostgreSQL crash lost, written again with it), writes it here too.
// Expand only (docs/deploy.md, Upgrades): the reservation row's outbox columns and their indexes
// stay while API processes of the previous release may still record outcomes there; the relay
// moves such outcomes here (services/credits/outbox.ts, adoptLegacyOutcomes). A later release
// drops reservations.report and settlement_claimed_at, the indexes reservations_outbox and
// reservations_claimed, and that move.

/**
 * credits_take_holds, its rule and its writes as in migrations/202702010800_credits_hold_one_write.ts;
 * `rows` is the CTE that writes the reservation rows of the admitted holds (and, in this
 * migration's version, the outcome of a hold written again), so that up and down differ only there.
 */
const takeHolds = (rows: string) => `CREATE OR REPLACE FUNCTION credits_take_holds(batch jsonb, recreate boolean, durable boolean)
    RETURNS TABLE (ord int, verdict text, held numeric, balance_before numeric, balance numeric, spend_limit numeric, key_remaining numeric)
    LANGUAGE plpgsql AS $fn$
    #variable_conflict use_column
    DECLARE
      holds credits_hold[];
      h credits_hold;
      acct_left jsonb;  -- account id → credits left (total_credits - total_usage) as the batch goes
      key_left jsonb;   -- key id → spend left under its limit (JSON null: no limit)
      key_limit jsonb;  -- key id → its spend limit
      existing uuid[] := '{}';
      a_left numeric;
      k_left numeric;
      amount numeric;
    BEGIN
      holds := ARRAY(SELECT x FROM jsonb_populate_recordset(NULL::credits_hold, batch) x ORDER BY x.ord);
      -- Keys are read (and locked) only when a hold of the batch tracks its key's spend (keyed variant).
      IF batch @> '[{"key_spend": true}]' THEN
        SELECT COALESCE(jsonb_object_agg(k.id, k.spend_limit - k.spend), '{}'), COALESCE(jsonb_object_agg(k.id, k.spend_limit), '{}')
          INTO key_left, key_limit
          FROM (SELECT id, spend, spend_limit FROM api_keys WHERE id IN (SELECT u.key_id FROM unnest(holds) u WHERE u.key_spend)
                ORDER BY id FOR NO KEY UPDATE) k;
      ELSE
        key_left := '{}';
        key_limit := '{}';
      END IF;
      SELECT COALESCE(jsonb_object_agg(a.id, a.total_credits - a.total_usage), '{}') INTO acct_left
        FROM (SELECT id, total_credits, total_usage FROM accounts WHERE id IN (SELECT u.account_id FROM unnest(holds) u)
              ORDER BY id FOR NO KEY UPDATE) a;
      IF recreate THEN
        existing := ARRAY(SELECT r.id FROM reservations r WHERE r.id IN (SELECT u.id FROM unnest(holds) u));
      END IF;

      FOR i IN 1 .. COALESCE(array_length(holds, 1), 0) LOOP
        h := holds[i];
        a_left := (acct_left ->> h.account_id::text)::numeric;
        k_left := CASE WHEN h.key_spend THEN (key_left ->> h.key_id::text)::numeric END;
        ord := h.ord;
        held := NULL;
        balance_before := NULL;
        spend_limit := CASE WHEN h.key_spend THEN (key_limit ->> h.key_id::text)::numeric END;
        IF h.id = ANY(existing) THEN
          verdict := 'exists';
        ELSIF h.key_spend AND key_left -> h.key_id::text IS NULL THEN
          verdict := 'spend_limit'; -- no such key
        ELSE
          -- k_left null: no limit (or the key's spend not tracked), which bounds nothing.
          amount := CASE WHEN recreate THEN LEAST(h.held, GREATEST(a_left, 0), CASE WHEN k_left IS NULL THEN h.held ELSE GREATEST(k_left, 0) END) ELSE h.held END;
          IF k_left IS NOT NULL AND NOT recreate AND NOT (k_left > 0 AND amount <= k_left) THEN
            verdict := 'spend_limit';
          ELSIF a_left IS NULL OR a_left < amount THEN
            verdict := 'insufficient_quota';
          ELSE
            verdict := 'taken';
            held := amount;
            balance_before := a_left;
            a_left := a_left - amount;
            acct_left := jsonb_set(acct_left, ARRAY[h.account_id::text], to_jsonb(a_left));
            IF k_left IS NOT NULL THEN
              k_left := k_left - amount;
              key_left := jsonb_set(key_left, ARRAY[h.key_id::text], to_jsonb(k_left));
            END IF;
            h.amount := amount;
            h.balance_before := balance_before;
            holds[i] := h;
          END IF;
        END IF;
        balance := a_left;
        key_remaining := CASE WHEN k_left IS NOT NULL THEN GREATEST(k_left, 0) END;
        RETURN NEXT;
      END LOOP;

      -- The writes, set-based and in one statement (one executor run, not four): each account and key
      -- row once, then the rows of the admitted holds.
      WITH key_spend AS (
          UPDATE api_keys ky SET spend = ky.spend + d.s
          FROM (SELECT u.key_id, sum(u.amount) s FROM unnest(holds) u WHERE u.amount IS NOT NULL AND u.key_spend GROUP BY u.key_id) d
          WHERE ky.id = d.key_id),
        account_usage AS (
          UPDATE accounts ac SET total_usage = ac.total_usage + d.s, reserved_credits = ac.reserved_credits + d.s, pending_requests = ac.pending_requests + d.n
          FROM (SELECT u.account_id, sum(u.amount) s, count(*) n FROM unnest(holds) u WHERE u.amount IS NOT NULL GROUP BY u.account_id) d
          WHERE ac.id = d.account_id),
${rows}      INSERT INTO ledger (account_id, reservation_id, kind, amount)
        SELECT u.account_id, u.id, 'hold', u.amount FROM unnest(holds) u WHERE u.amount IS NOT NULL ORDER BY u.ord;
      IF NOT durable THEN
        PERFORM set_config('synchronous_commit', 'off', true);
      END IF;
    END
    $fn$`;

/** This migration's: a hold written again with its outcome puts the outcome in the outbox. */
const ROWS_WITH_OUTBOX = `        reservation_rows AS (
          INSERT INTO reservations (id, account_id, key_id, model, provider, endpoint, held_credits, balance_before,
              input_multiplier, output_multiplier, cache_multiplier, cache_creation_multiplier, audio_input_multiplier, audio_output_multiplier,
              complimentary, key_spend_tracked, owner_workflow_id, modality, api_process_id, hold_recreated_at)
            SELECT u.id, u.account_id, u.key_id, u.model, u.provider, u.endpoint, u.amount, u.balance_before,
              u.im, u.om, u.cm, u.ccm, u.aim, u.aom, u.complimentary, u.key_spend, u.owner, u.modality, u.process,
              CASE WHEN recreate THEN now() END
            FROM unnest(holds) u WHERE u.amount IS NOT NULL ORDER BY u.ord),
        outcome_rows AS (
          INSERT INTO settlement_outbox (reservation_id, report, body_id)
            SELECT u.id, u.report, u.body_id FROM unnest(holds) u WHERE u.amount IS NOT NULL AND u.report IS NOT NULL)
`;

/** Before it (202702010800): the outcome on the reservation row. */
const ROWS_WITH_REPORT = `        reservation_rows AS (
          INSERT INTO reservations (id, account_id, key_id, model, provider, endpoint, held_credits, balance_before,
              input_multiplier, output_multiplier, cache_multiplier, cache_creation_multiplier, audio_input_multiplier, audio_output_multiplier,
              complimentary, key_spend_tracked, owner_workflow_id, modality, api_process_id,
              report, reported_at, body_id, hold_recreated_at)
            SELECT u.id, u.account_id, u.key_id, u.model, u.provider, u.endpoint, u.amount, u.balance_before,
              u.im, u.om, u.cm, u.ccm, u.aim, u.aom, u.complimentary, u.key_spend, u.owner, u.modality, u.process,
              u.report, CASE WHEN recreate THEN now() END, u.body_id, CASE WHEN recreate THEN now() END
            FROM unnest(holds) u WHERE u.amount IS NOT NULL ORDER BY u.ord)
`;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`CREATE TABLE settlement_outbox (
    reservation_id uuid PRIMARY KEY,
    report jsonb NOT NULL,
    body_id text,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    workflow_id text,
    claimed_at timestamptz)`);
  await knex.raw('CREATE INDEX settlement_outbox_waiting ON settlement_outbox (recorded_at, reservation_id) WHERE workflow_id IS NULL');
  await knex.raw('CREATE INDEX settlement_outbox_claimed ON settlement_outbox (claimed_at) WHERE workflow_id IS NOT NULL');
  await knex.raw('CREATE INDEX settlement_outbox_body_id ON settlement_outbox (body_id) WHERE body_id IS NOT NULL');
  // The hold statement: a hold written again with its outcome puts the outcome in the outbox.
  await knex.raw(takeHolds(ROWS_WITH_OUTBOX));
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`UPDATE reservations r SET report = o.report, body_id = COALESCE(r.body_id, o.body_id), reported_at = o.recorded_at,
    settlement_workflow_id = o.workflow_id, settlement_claimed_at = o.claimed_at FROM settlement_outbox o WHERE r.id = o.reservation_id AND r.status = 'held'`);
  await knex.raw('DROP TABLE settlement_outbox');
  // The hold statement of migrations/202702010800_credits_hold_one_write.ts again.
  await knex.raw(takeHolds(ROWS_WITH_REPORT));
}
