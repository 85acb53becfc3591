import { z } from 'zod';
import { normalize } from '../../domain/credits/pricing';
import type { Db } from '../../platform/db';
import { findGeneration, keyUsageWindows } from '../credits/reads';
import { listKeys, type LoggedRow as KeyLoggedRow } from '../keys/keys';

// What the dashboard shows an account: its keys with their usage windows, its request log and
// one request with its generation record. Every query is scoped by the session's account.

/** The account's keys, each with its usage windows (spec 1 2.5) and status. */
export async function keysWithUsage(db: Db, accountId: string) {
  const keys = await listKeys(db, accountId);
  const lastLogged = await db('request_log')
    .whereIn('key_id', keys.map((k) => k.id))
    .groupBy('key_id')
    .select('key_id', db.raw('max(created_at) AS at'));
  const logged = new Map<string, Date>(lastLogged.map((r: { key_id: string; at: Date }) => [r.key_id, r.at]));
  return Promise.all(
    keys.map(async (k) => {
      const w = await keyUsageWindows(db, k.id);
      const last = [w.last_used_at as Date | null, logged.get(k.id) ?? null].filter((d): d is Date => d !== null).sort((a, b) => b.getTime() - a.getTime())[0] ?? null;
      const status = k.revoked_at ? 'revoked' : k.expires_at && Date.parse(k.expires_at) <= Date.now() ? 'expired' : k.limit_reached ? 'limit reached' : 'active';
      return {
        ...k,
        status,
        last_used_at: last?.toISOString() ?? null,
        usage: { daily: normalize(w.usage_daily), weekly: normalize(w.usage_weekly), monthly: normalize(w.usage_monthly), total: normalize(w.usage) },
        requests: { daily: w.requests_daily as number, weekly: w.requests_weekly as number, monthly: w.requests_monthly as number, total: w.requests as number },
      };
    }),
  );
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const blankAsUndefined = (v: unknown) => (typeof v === 'string' && v.trim() === '' ? undefined : v);
const day = z.preprocess(blankAsUndefined, z.string().regex(/^\d{4}-\d{2}-\d{2}$/, 'must be YYYY-MM-DD').refine((s) => !Number.isNaN(Date.parse(`${s}T00:00:00Z`)), 'must be a calendar day').optional());

export const requestFilters = z.object({
  /** a request id (x-request-id), exact */
  id: z.preprocess(blankAsUndefined, z.string().trim().regex(UUID, 'must be a request id (UUID)').optional()),
  key: z.preprocess(blankAsUndefined, z.string().regex(UUID, 'must be a key id').optional()),
  model: z.preprocess(blankAsUndefined, z.string().max(200).optional()),
  /** ok (below 400), error (400 and above) or one status code */
  status: z.preprocess(blankAsUndefined, z.union([z.enum(['ok', 'error']), z.coerce.number().int().min(100).max(599)]).optional()),
  /** UTC days, both included */
  from: day,
  to: day,
  /** the cursor: the last request id of the previous page */
  before: z.preprocess(blankAsUndefined, z.string().regex(UUID, 'must be a request id').optional()),
  limit: z.coerce.number().int().min(1).max(200).default(50),
});

export type RequestFilters = z.output<typeof requestFilters>;

/** A request log row with its reservation's billing and its key's label and prefix. */
interface LoggedRow extends Omit<KeyLoggedRow, 'ip'> {
  key_label: string;
  key_prefix: string;
}

function requestView({ billing, charge, held, cost, created_at, ...r }: LoggedRow) {
  const pending = billing === 'held';
  return {
    ...r,
    // The settled charge when the reservation has one; the held amount while it is pending.
    charge: pending ? (held === null ? null : normalize(held)) : charge !== null ? normalize(charge) : cost === null ? null : normalize(cost),
    pending,
    created_at: created_at.toISOString(),
  };
}

const logOfAccount = (db: Db, accountId: string) =>
  db('request_log as l')
    .join('api_keys as k', 'k.id', 'l.key_id')
    .leftJoin('reservations as r', 'r.id', 'l.id')
    .where('k.account_id', accountId)
    .select('l.*', 'k.label as key_label', 'k.key_prefix', 'r.status as billing', 'r.charge', 'r.held_credits as held');

/** The account's requests, newest first, filtered, one page after the cursor. */
export async function listRequests(db: Db, accountId: string, f: RequestFilters) {
  const rows: LoggedRow[] = await logOfAccount(db, accountId)
    .modify((b) => {
      if (f.id) b.where('l.id', f.id);
      if (f.key) b.where('l.key_id', f.key);
      if (f.model) b.where('l.model', f.model);
      if (f.status === 'ok') b.where('l.status', '<', 400);
      else if (f.status === 'error') b.where('l.status', '>=', 400);
      else if (f.status !== undefined) b.where('l.status', f.status);
      if (f.from) b.where('l.created_at', '>=', new Date(`${f.from}T00:00:00Z`));
      if (f.to) b.where('l.created_at', '<', new Date(Date.parse(`${f.to}T00:00:00Z`) + 86_400_000));
      if (f.before) b.whereRaw('(l.created_at, l.id) < (SELECT created_at, id FROM request_log WHERE id = ?)', [f.before]);
    })
    .orderBy([
      { column: 'l.created_at', order: 'desc' },
      { column: 'l.id', order: 'desc' },
    ])
    .limit(f.limit + 1);
  const page = rows.slice(0, f.limit).map(requestView);
  return { data: page, next_before: rows.length > f.limit ? page[page.length - 1].id : null };
}

/** One request of the account with its generation record (null for requests that reserved nothing). */
export async function requestDetail(db: Db, accountId: string, id: string) {
  if (!UUID.test(id)) return null;
  const row: LoggedRow | undefined = await logOfAccount(db, accountId).where('l.id', id).first();
  if (!row) return null;
  return { request: requestView(row), generation: (await findGeneration(db, accountId, id)) ?? null };
}

/** Models the account's users may choose for a key's allowed list: the active catalog. */
export async function catalogModelIds(db: Db): Promise<string[]> {
  const rows = await db('models').where({ active: true }).orderBy('id').select('id');
  return rows.map((r: { id: string }) => r.id);
}

/**
 * Settled credits per UTC day and model in [from, to), for the usage chart: the same rows and
 * day boundaries as usageBreakdown (services/credits/reads.ts), split by model as well.
 */
export async function usageByDayAndModel(db: Db, accountId: string, from: Date, to: Date): Promise<{ day: string; model: string; credits: string }[]> {
  return db('reservations')
    .where({ account_id: accountId })
    .whereIn('status', ['settled', 'cancelled'])
    .where('settled_at', '>=', from)
    .where('settled_at', '<', to)
    .groupByRaw(`1, 2`)
    .orderByRaw('1, 2')
    .select(db.raw(`to_char(settled_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day`), 'model', db.raw('COALESCE(sum(charge),0) AS credits'));
}
