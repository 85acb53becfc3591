import type { Db } from '../../platform/db';
import { EVENTS_CHANNEL } from './event-sql';

// key.spend_limit_reached at the first refusal (issue 33 item 8): a key whose remainder is below
// any hold it could take refuses every request although its spend never lands on the limit, which
// is when settlement fires the event. Once per limit value (api_keys.spend_limit_refused), and
// not when settlement already told of this limit being reached.

/** Records a request refused for the key's spend limit; true when this refusal fired the event. */
export async function noteSpendLimitRefusal(db: Db, keyId: string, requestId: string): Promise<boolean> {
  const res = await db.raw(
    `WITH k AS (
       UPDATE api_keys SET spend_limit_refused = spend_limit
        WHERE id = :key_id AND spend_limit IS NOT NULL AND spend_limit_refused IS DISTINCT FROM spend_limit
       RETURNING id, account_id, spend, spend_limit, NOT (spend >= spend_limit AND spend_limit_reached_at IS NOT NULL) AS fire
     ), w AS (
       INSERT INTO account_webhook_deliveries (endpoint_id, event_type, payload)
       SELECT e.id, 'key.spend_limit_reached', jsonb_build_object('account_id', k.account_id, 'key_id', k.id,
           'spend', trim_scale(k.spend)::text, 'spend_limit', trim_scale(k.spend_limit)::text, 'request_id', :request_id::text, 'refused', true)
         FROM k JOIN account_webhook_endpoints e ON e.account_id = k.account_id WHERE k.fire
       RETURNING id
     )
     SELECT (SELECT count(*) FROM k WHERE fire)::int AS fired, (SELECT count(pg_notify('${EVENTS_CHANNEL}', '')) FROM (SELECT 1 FROM w LIMIT 1) x)::int AS events`,
    { key_id: keyId, request_id: requestId },
  );
  return res.rows[0].fired > 0;
}
