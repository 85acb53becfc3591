import { LRUCache } from 'lru-cache';
import type { Db } from '../../platform/db';
import type { CacheInvalidation } from '../../platform/cache-invalidation';

export interface AuthRecord {
  keyId: string;
  label: string;
  keyPrefix: string;
  keyCreatedAt: Date;
  revoked: boolean;
  accountId: string;
  accountActive: boolean;
  tier: string;
  planExpiresAt: Date | null;
  format: string;
  /** Per-key settings of the keyed variant (spec 3 A); null when not set. */
  keyExpiresAt: Date | null;
  allowedModels: string[] | null;
  rpm: number | null;
  spendLimit: string | null;
  /** the key's response-cache opt-in (seconds an answer is kept); null: off unless the request opts in */
  cacheTtlSeconds: number | null;
  /**
   * Set on a per-request copy of the record (keyed variant): told which model the request asked
   * for, so that the request log can show it even when the request is refused before a hold.
   */
  noteModel?: (model: string) => void;
}

/** Channel table name of the acknowledgement an API process sends after dropping a changed key. */
export const KEY_ACK = 'key_ack';

/**
 * Key lookups by hash, cached per process so a warm request costs no database round trip.
 * Revocations and account changes arrive by NOTIFY and evict at once; while the listener is
 * down the cache is bypassed.
 */
export class AuthStore {
  private readonly cache: LRUCache<string, AuthRecord | 'missing'>;

  constructor(
    private readonly db: Db,
    private readonly invalidation: CacheInvalidation,
    ttlMs: number,
  ) {
    this.cache = new LRUCache({ max: 100_000, ttl: ttlMs });
    invalidation.subscribe((table, id) => {
      if (table === 'api_keys' || table === 'accounts' || table === '*') this.evict(table, id);
      if (table === 'api_keys' && id !== null) this.acknowledge(id);
    });
  }

  /**
   * Tells whoever changed the key that this process has dropped it (`key_ack:<id>` on the same
   * channel): the admin API waits for every listening process before it answers.
   */
  private acknowledge(keyId: string): void {
    this.db.raw(`SELECT pg_notify('cache_invalidation', ?)`, [`${KEY_ACK}:${keyId}`]).then(
      () => undefined,
      () => undefined, // the admin API then waits out its timeout; nothing else depends on it
    );
  }

  private evict(table: string, id: string | null): void {
    if (table === '*' || id === null) return this.cache.clear();
    for (const [hash, rec] of this.cache.entries()) {
      if (rec === 'missing') {
        if (table === 'api_keys') this.cache.delete(hash);
      } else if ((table === 'api_keys' && rec.keyId === id) || (table === 'accounts' && rec.accountId === id)) {
        this.cache.delete(hash);
      }
    }
  }

  async byHash(hash: string): Promise<AuthRecord | null> {
    if (this.invalidation.healthy) {
      const hit = this.cache.get(hash);
      if (hit !== undefined) return hit === 'missing' ? null : hit;
    }
    const row = await this.db('api_keys as k')
      .join('accounts as a', 'a.id', 'k.account_id')
      .where('k.key_hash', hash)
      .first(
        'k.id',
        'k.label',
        'k.key_prefix',
        'k.created_at',
        'k.revoked_at',
        'k.format',
        'k.expires_at',
        'k.allowed_models',
        'k.rpm',
        'k.spend_limit',
        'k.cache_ttl_seconds',
        'a.id as account_id',
        'a.active',
        'a.tier',
        'a.plan_expires_at',
      );
    const rec: AuthRecord | null = row
      ? {
          keyId: row.id,
          label: row.label,
          keyPrefix: row.key_prefix,
          keyCreatedAt: row.created_at,
          revoked: row.revoked_at !== null,
          accountId: row.account_id,
          accountActive: row.active,
          tier: row.tier,
          planExpiresAt: row.plan_expires_at,
          format: row.format,
          keyExpiresAt: row.expires_at,
          allowedModels: row.allowed_models,
          rpm: row.rpm,
          spendLimit: row.spend_limit,
          cacheTtlSeconds: row.cache_ttl_seconds,
        }
      : null;
    this.cache.set(hash, rec ?? 'missing');
    return rec;
  }
}
