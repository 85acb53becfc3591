// The SQL by which settlement (services/credits/settlement.ts) records account events in its own
// statement (issue 23, feature 5), so an event is never lost nor recorded twice and settlement
// makes no extra round trip. Settlement updates each account and key once per batch from `d`,
// the batch's sums for that row: `d.usage_delta` (charges less holds), `d.spend_delta` and
// `d.request_id` (a request of the batch, named in the event). In an UPDATE's SET the columns are
// the row's values before it. A marker column set to statement_timestamp() tells the RETURNING
// clause that this very statement fired the event.

/** The balance after this settlement. */
const BALANCE = '(total_credits - (total_usage + d.usage_delta))';

/** balance.low fires once when the balance goes below the threshold; at or above it re-arms. */
export const LOW_BALANCE = `low_balance_crossed_at = CASE WHEN low_balance_armed AND low_balance_threshold IS NOT NULL AND ${BALANCE} < low_balance_threshold
           THEN statement_timestamp() ELSE low_balance_crossed_at END,
         low_balance_armed = low_balance_threshold IS NULL OR ${BALANCE} >= low_balance_threshold`;

/** key.spend_limit_reached fires once when the key's spend reaches its limit; below it re-arms. */
export const REACHED_AT = `CASE WHEN spend_limit IS NULL OR spend + d.spend_delta < spend_limit THEN NULL
           WHEN spend_limit_reached_at IS NULL THEN statement_timestamp() ELSE spend_limit_reached_at END`;

/** A delivery for every endpoint of the account per event fired (needs CTEs `a` and `k` as settlement has them, each with request_id). */
export const EVENT_DELIVERIES = `
       INSERT INTO account_webhook_deliveries (endpoint_id, event_type, payload)
       SELECT e.id, 'balance.low', jsonb_build_object('account_id', a.id, 'balance', trim_scale(a.balance)::text,
           'threshold', trim_scale(a.low_balance_threshold)::text, 'request_id', a.request_id)
         FROM a JOIN account_webhook_endpoints e ON e.account_id = a.id WHERE a.crossed
       UNION ALL
       SELECT e.id, 'key.spend_limit_reached', jsonb_build_object('account_id', k.account_id, 'key_id', k.id,
           'spend', trim_scale(k.spend)::text, 'spend_limit', trim_scale(k.spend_limit)::text, 'request_id', k.request_id)
         FROM k JOIN account_webhook_endpoints e ON e.account_id = k.account_id WHERE k.reached
       RETURNING id`;

/** NOTIFY channel of new deliveries (services/accounts/event-relay.ts listens). */
export const EVENTS_CHANNEL = 'account_webhook_deliveries';
