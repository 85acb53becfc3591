import { createHash } from 'node:crypto';
import type { Db } from '../../platform/db';

export type Claim = { status: 'new' } | { status: 'replay'; resultId: string | null } | { status: 'reused' };

export interface IdempotencyScope {
  accountId: string;
  scope: 'images' | 'audio' | 'video';
  key: string;
  /** hash of what makes two requests "the same content" */
  bodyHash: string;
}

/** JSON with sorted keys: key order does not make two bodies different content. */
export function stableJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stableJson).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stableJson((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

export const contentHash = (...parts: Array<string | Buffer>): string => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p).update('\0');
  return h.digest('hex');
};

/**
 * Claims a key atomically: the first request gets `new`; a repeat with the same content gets
 * `replay` (with the result id once recorded); other content under the same key gets `reused`.
 * With `staleAfterMs`, a claim that never recorded a result within that time belonged to a process
 * that died mid-request: the next request takes it over instead of waiting on it forever.
 */
export async function claimIdempotencyKey(db: Db, s: IdempotencyScope & { staleAfterMs?: number }): Promise<Claim> {
  const { rows } = await db.raw(
    `INSERT INTO idempotency_keys (account_id, scope, key, body_hash) VALUES (:accountId, :scope, :key, :bodyHash)
     ON CONFLICT (account_id, scope, key) DO UPDATE SET body_hash = EXCLUDED.body_hash, created_at = now()
       WHERE idempotency_keys.result_id IS NULL AND :stale::float8 IS NOT NULL
         AND idempotency_keys.created_at < now() - make_interval(secs => :stale::float8 / 1000)
     RETURNING key`,
    { accountId: s.accountId, scope: s.scope, key: s.key, bodyHash: s.bodyHash, stale: s.staleAfterMs ?? null },
  );
  if (rows.length) return { status: 'new' };
  const row = await db('idempotency_keys').where({ account_id: s.accountId, scope: s.scope, key: s.key }).first('body_hash', 'result_id');
  return row.body_hash === s.bodyHash ? { status: 'replay', resultId: row.result_id } : { status: 'reused' };
}

/** Records what the first request produced (a video job id), for later replays. */
export async function recordIdempotentResult(db: Db, s: Omit<IdempotencyScope, 'bodyHash'>, resultId: string): Promise<void> {
  await db('idempotency_keys').where({ account_id: s.accountId, scope: s.scope, key: s.key }).update({ result_id: resultId });
}

/** Lets a key be used again when the first request failed before anything was produced. */
export async function releaseIdempotencyKey(db: Db, s: Omit<IdempotencyScope, 'bodyHash'>): Promise<void> {
  await db('idempotency_keys').where({ account_id: s.accountId, scope: s.scope, key: s.key }).whereNull('result_id').delete();
}
