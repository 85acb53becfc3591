import type { Knex } from 'knex';

// The hold statement's PostgreSQL time (issue 31, the c=1 latency and the CPU per request): the
// same rule and the same rows as migrations/202612310201_credits_hold_batches.ts (where the rule is
// written out with a worked example), with two cuts measured on a batch of one (backend CPU per
// call, 2,000 calls a variant, interleaved: about 280 µs before, 240 µs after):
//  - the key rows are read and locked only when a hold of the batch tracks its key's spend (the
//    credits variant never does); the lock order, keys then accounts, is unchanged;
//  - the four writes (keys, accounts, reservation rows, 'hold' ledger rows) are one statement
//    with data-modifying CTEs instead of four: they touch different tables and none reads
//    another's result, so the snapshot they share changes nothing.

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`CREATE OR REPLACE FUNCTION credits_take_holds(batch jsonb, recreate boolean, durable boolean)
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
        reservation_rows AS (
          INSERT INTO reservations (id, account_id, key_id, model, provider, endpoint, held_credits, balance_before,
              input_multiplier, output_multiplier, cache_multiplier, cache_creation_multiplier, audio_input_multiplier, audio_output_multiplier,
              complimentary, key_spend_tracked, owner_workflow_id, modality, api_process_id,
              report, reported_at, body_id, hold_recreated_at)
            SELECT u.id, u.account_id, u.key_id, u.model, u.provider, u.endpoint, u.amount, u.balance_before,
              u.im, u.om, u.cm, u.ccm, u.aim, u.aom, u.complimentary, u.key_spend, u.owner, u.modality, u.process,
              u.report, CASE WHEN recreate THEN now() END, u.body_id, CASE WHEN recreate THEN now() END
            FROM unnest(holds) u WHERE u.amount IS NOT NULL ORDER BY u.ord)
      INSERT INTO ledger (account_id, reservation_id, kind, amount)
        SELECT u.account_id, u.id, 'hold', u.amount FROM unnest(holds) u WHERE u.amount IS NOT NULL ORDER BY u.ord;
      IF NOT durable THEN
        PERFORM set_config('synchronous_commit', 'off', true);
      END IF;
    END
    $fn$`);
}

/** Back to the body of 202612310201 (four write statements, the key rows always read). */
export async function down(knex: Knex): Promise<void> {
  await knex.raw(`CREATE OR REPLACE FUNCTION credits_take_holds(batch jsonb, recreate boolean, durable boolean)
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
      SELECT COALESCE(jsonb_object_agg(k.id, k.spend_limit - k.spend), '{}'), COALESCE(jsonb_object_agg(k.id, k.spend_limit), '{}')
        INTO key_left, key_limit
        FROM (SELECT id, spend, spend_limit FROM api_keys WHERE id IN (SELECT u.key_id FROM unnest(holds) u WHERE u.key_spend)
              ORDER BY id FOR NO KEY UPDATE) k;
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

      -- The writes, set-based: each account and key row once, then the rows of the admitted holds.
      UPDATE api_keys ky SET spend = ky.spend + d.s
        FROM (SELECT u.key_id, sum(u.amount) s FROM unnest(holds) u WHERE u.amount IS NOT NULL AND u.key_spend GROUP BY u.key_id) d
        WHERE ky.id = d.key_id;
      UPDATE accounts ac SET total_usage = ac.total_usage + d.s, reserved_credits = ac.reserved_credits + d.s, pending_requests = ac.pending_requests + d.n
        FROM (SELECT u.account_id, sum(u.amount) s, count(*) n FROM unnest(holds) u WHERE u.amount IS NOT NULL GROUP BY u.account_id) d
        WHERE ac.id = d.account_id;
      INSERT INTO reservations (id, account_id, key_id, model, provider, endpoint, held_credits, balance_before,
          input_multiplier, output_multiplier, cache_multiplier, cache_creation_multiplier, audio_input_multiplier, audio_output_multiplier,
          complimentary, key_spend_tracked, owner_workflow_id, modality, api_process_id,
          report, reported_at, body_id, hold_recreated_at)
        SELECT u.id, u.account_id, u.key_id, u.model, u.provider, u.endpoint, u.amount, u.balance_before,
          u.im, u.om, u.cm, u.ccm, u.aim, u.aom, u.complimentary, u.key_spend, u.owner, u.modality, u.process,
          u.report, CASE WHEN recreate THEN now() END, u.body_id, CASE WHEN recreate THEN now() END
        FROM unnest(holds) u WHERE u.amount IS NOT NULL ORDER BY u.ord;
      INSERT INTO ledger (account_id, reservation_id, kind, amount)
        SELECT u.account_id, u.id, 'hold', u.amount FROM unnest(holds) u WHERE u.amount IS NOT NULL ORDER BY u.ord;
      IF NOT durable THEN
        PERFORM set_config('synchronous_commit', 'off', true);
      END IF;
    END
    $fn$`);
}
