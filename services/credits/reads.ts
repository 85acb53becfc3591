import type { Db } from '../../platform/db';

// What an account may read of its credits and reservations (spec 1 sections 2.4–2.6, 4.6).
// Every query is scoped by the caller's account or key: nothing of another account is read.

/** Settled reads count settled and cancelled (charged) requests; released ones charged nothing. */
const SETTLED = "status IN ('settled','cancelled')";
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export async function accountRow(db: Db, accountId: string) {
  return db('accounts').where({ id: accountId }).first();
}

export async function keySpend(db: Db, keyId: string): Promise<{ spend: string; spend_limit: string | null } | undefined> {
  return db('api_keys').where({ id: keyId }).first('spend', 'spend_limit');
}

/** A key's charges and request counts in all, this UTC day, ISO week and month. */
export async function keyUsageWindows(db: Db, keyId: string) {
  const r = await db.raw(
    `SELECT
       COALESCE(sum(charge), 0) AS usage, count(*)::int AS requests,
       COALESCE(sum(charge) FILTER (WHERE settled_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'), 0) AS usage_daily,
       COALESCE(sum(charge) FILTER (WHERE settled_at >= date_trunc('week', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'), 0) AS usage_weekly,
       COALESCE(sum(charge) FILTER (WHERE settled_at >= date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'), 0) AS usage_monthly,
       count(*) FILTER (WHERE settled_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')::int AS requests_daily,
       count(*) FILTER (WHERE settled_at >= date_trunc('week', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')::int AS requests_weekly,
       count(*) FILTER (WHERE settled_at >= date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')::int AS requests_monthly,
       max(settled_at) AS last_used_at
     FROM reservations WHERE key_id = ? AND ${SETTLED}`,
    [keyId],
  );
  return r.rows[0];
}

/**
 * A reservation of this account by request id, or by the body id of its answer, with its recorded
 * outcome while it waits in the outbox (the body id is there until settlement copies it).
 */
export async function findGeneration(db: Db, accountId: string, id: string) {
  const q = () => db('reservations as r').leftJoin('settlement_outbox as o', 'o.reservation_id', 'r.id').where('r.account_id', accountId).select('r.*', db.raw('COALESCE(o.report, r.report) AS report'), db.raw('COALESCE(r.body_id, o.body_id) AS body_id'));
  if (UUID.test(id)) return q().where('r.id', id).first();
  return (await q().where('r.body_id', id).first()) ?? q().whereIn('r.id', db('settlement_outbox').where({ body_id: id }).select('reservation_id')).first();
}

export async function keyOfAccount(db: Db, accountId: string, keyId: string): Promise<boolean> {
  return Boolean(await db('api_keys').where({ id: keyId, account_id: accountId }).first('id'));
}

export interface UsageFilter {
  accountId: string;
  from: Date;
  to: Date;
  model?: string;
  provider?: string;
  keyId?: string;
}

export interface UsageRow {
  key: string | null;
  requests: number;
  credits: string;
  prompt_tokens: string;
  completion_tokens: string;
}

/** Settled usage in [from, to): the total and the breakdowns by model, provider, UTC day and key. */
export async function usageBreakdown(db: Db, f: UsageFilter) {
  const base = db('reservations')
    .where({ account_id: f.accountId })
    .whereRaw(SETTLED)
    .where('settled_at', '>=', f.from)
    .where('settled_at', '<', f.to)
    .modify((b) => {
      if (f.model) b.where({ model: f.model });
      if (f.provider) b.where({ provider: f.provider });
      if (f.keyId) b.where({ key_id: f.keyId });
    });
  const agg = (col: string | null): Promise<UsageRow[]> =>
    base
      .clone()
      .select(col ? db.raw(`${col} AS key`) : db.raw('NULL AS key'))
      .select(db.raw('count(*)::int AS requests'), db.raw('COALESCE(sum(charge),0) AS credits'))
      .select(db.raw('COALESCE(sum(prompt_tokens),0)::bigint AS prompt_tokens'), db.raw('COALESCE(sum(completion_tokens),0)::bigint AS completion_tokens'))
      .modify((b) => {
        if (col) b.groupByRaw(col).orderByRaw(col);
      });
  const [total, byModel, byProvider, byDay, byKey] = await Promise.all([
    agg(null),
    agg('model'),
    agg('provider'),
    agg(`to_char(settled_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')`),
    agg('key_id'),
  ]);
  return { total: total[0], byModel, byProvider, byDay, byKey };
}
