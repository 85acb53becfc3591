import { prepared, runPrepared, type Db } from '../../platform/db';
import { GroupCommit } from '../credits/group-commit';
import type { Logger } from '../../platform/logger';
import type { TokenUsage } from '../../domain/credits/pricing';

// The response cache's table (migrations/202702010401_response_cache.ts): answers stored per
// account under the hash of their canonical request. A lookup is one primary-key read that ignores
// expired rows (lookups arriving together share one statement, and so do stores); a store replaces the entry; expired rows go in a periodic pass and, past the size
// bounds (rows and bytes), the oldest entries go within a second. Nothing here is on the money path: a failed
// store or eviction is logged and the request goes on.

export interface CachedAnswer {
  /** the answer as the client received it: a JSON body, or the event stream's text */
  body: string;
  stream: boolean;
  /** the usage the answer reported (shown by GET /v1/generation for the hit) */
  usage: TokenUsage | null;
}

export interface CacheBounds {
  maxRows: number;
  maxBytes: number;
}

/**
 * The hit path's one statement, for a batch of lookups (group commit, as the holds: one statement
 * for the lookups that arrived while the previous batch was in flight; a batch of one at c=1).
 * Prepared: no knex, no parse. Each lookup is a primary-key probe.
 */
const LOOKUP = prepared(
  'response_cache_lookup',
  `SELECT o.ord::int AS ord, c.body, c.stream, c.usage
     FROM unnest(?::uuid[], ?::text[]) WITH ORDINALITY AS o(account_id, key_hex, ord)
     JOIN response_cache c ON c.account_id = o.account_id AND c.key_hash = decode(o.key_hex, 'hex') AND c.expires_at > now()`,
);

/**
 * The stores that arrived while the previous batch was in flight, one statement (group commit, as the
 * lookups). A batch holds each key once (the last store of a key wins, as it would one after another):
 * ON CONFLICT cannot touch one row twice in a statement.
 */
const STORE = prepared(
  'response_cache_store',
  `INSERT INTO response_cache (account_id, key_hash, model, stream, body, usage, bytes, expires_at)
   SELECT s.account_id, decode(s.key_hex, 'hex'), s.model, s.stream, s.body, s.usage::jsonb, s.bytes, now() + make_interval(secs => s.ttl)
     FROM unnest(?::uuid[], ?::text[], ?::text[], ?::bool[], ?::text[], ?::text[], ?::int[], ?::float8[]) AS s(account_id, key_hex, model, stream, body, usage, bytes, ttl)
   ON CONFLICT (account_id, key_hash) DO UPDATE SET model = EXCLUDED.model, stream = EXCLUDED.stream, body = EXCLUDED.body,
     usage = EXCLUDED.usage, bytes = EXCLUDED.bytes, created_at = now(), expires_at = EXCLUDED.expires_at`,
);

interface Store {
  accountId: string;
  keyHex: string;
  model: string;
  answer: CachedAnswer;
  bytes: number;
  ttlSeconds: number;
}

/** Newest first, the running count and size; what lies past either bound goes (one statement). */
const EVICT_SQL = `DELETE FROM response_cache c USING (
    SELECT account_id, key_hash FROM (
      SELECT account_id, key_hash, row_number() OVER w AS n, sum(bytes) OVER w AS total
      FROM response_cache WINDOW w AS (ORDER BY created_at DESC, key_hash)
    ) x WHERE n > ? OR total > ?
  ) old WHERE c.account_id = old.account_id AND c.key_hash = old.key_hash`;

export const RESPONSE_CACHE_DEFAULTS: CacheBounds = { maxRows: 100_000, maxBytes: 256 * 1024 * 1024 };

/** At most one eviction a second per process: each reads the whole table (a window over created_at). */
const EVICT_EVERY_MS = 1000;
const PRUNE_BATCH = 5000;
const PRUNE_EVERY_MS = 60_000;

export class ResponseCache {
  private readonly lookups = new GroupCommit<{ accountId: string; keyHash: Buffer }, CachedAnswer | null>((batch) => this.lookupBatch(batch), { lanes: 2 });
  private readonly stores = new GroupCommit<Store, void>((batch) => this.storeBatch(batch));
  private evictTimer: NodeJS.Timeout | null = null;
  private lastEvict = 0;
  private pruner: NodeJS.Timeout | null = null;

  constructor(
    private readonly db: Db,
    private readonly logger: Logger,
    readonly bounds: CacheBounds,
  ) {}

  /** The live entry of this account's request, or null. */
  lookup(accountId: string, keyHash: Buffer): Promise<CachedAnswer | null> {
    return this.lookups.submit({ accountId, keyHash });
  }

  private async lookupBatch(batch: Array<{ accountId: string; keyHash: Buffer }>): Promise<Array<CachedAnswer | null>> {
    const r = await runPrepared(this.db, LOOKUP, [batch.map((b) => b.accountId), batch.map((b) => b.keyHash.toString('hex'))]);
    const out: Array<CachedAnswer | null> = batch.map(() => null);
    for (const row of r.rows as unknown as Array<CachedAnswer & { ord: number }>) out[row.ord - 1] = { body: row.body, stream: row.stream, usage: row.usage };
    return out;
  }

  /**
   * Stores (or replaces) an answer for `ttlSeconds`; resolves once it is stored (a repeat right after
   * the answer hits). The eviction that keeps the table within its bounds follows within a second.
   */
  async store(accountId: string, keyHash: Buffer, model: string, a: CachedAnswer, ttlSeconds: number): Promise<void> {
    const bytes = Buffer.byteLength(a.body);
    if (bytes > this.bounds.maxBytes) return; // it would evict everything and then itself
    try {
      await this.stores.submit({ accountId, keyHex: keyHash.toString('hex'), model, answer: a, bytes, ttlSeconds });
    } catch (err) {
      return this.logger.warn({ err }, 'could not store a response in the cache');
    }
    this.scheduleEviction();
  }

  private async storeBatch(batch: Store[]): Promise<void[]> {
    const last = [...new Map(batch.map((b) => [`${b.accountId}:${b.keyHex}`, b])).values()];
    const column = <T>(f: (b: Store) => T) => last.map(f);
    await runPrepared(this.db, STORE, [
      column((b) => b.accountId),
      column((b) => b.keyHex),
      column((b) => b.model),
      column((b) => b.answer.stream),
      column((b) => b.answer.body),
      column((b) => JSON.stringify(b.answer.usage)),
      column((b) => b.bytes),
      column((b) => b.ttlSeconds),
    ]);
    return batch.map(() => undefined);
  }

  /** One eviction at most every EVICT_EVERY_MS, after the stores that asked for it. */
  private scheduleEviction(): void {
    if (this.evictTimer) return;
    const wait = Math.max(0, this.lastEvict + EVICT_EVERY_MS - Date.now());
    this.evictTimer = setTimeout(() => {
      this.lastEvict = Date.now();
      this.evict()
        .catch((err) => this.logger.warn({ err }, 'could not evict from the response cache'))
        .finally(() => (this.evictTimer = null));
    }, wait);
    this.evictTimer.unref();
  }

  /** Evicts the oldest entries past the bounds (rows, then bytes, newest kept). */
  async evict(): Promise<void> {
    await this.db.raw(EVICT_SQL, [this.bounds.maxRows, this.bounds.maxBytes]);
  }

  /** Deletes expired entries in batches; returns how many went. */
  async prune(): Promise<number> {
    let deleted = 0;
    for (;;) {
      const r = await this.db.raw(
        `DELETE FROM response_cache c USING (SELECT account_id, key_hash FROM response_cache WHERE expires_at <= now() LIMIT ?) x
         WHERE c.account_id = x.account_id AND c.key_hash = x.key_hash`,
        [PRUNE_BATCH],
      );
      deleted += r.rowCount ?? 0;
      if ((r.rowCount ?? 0) < PRUNE_BATCH) return deleted;
    }
  }

  /** Prunes now and then every minute; every API process does it, the deletes do not conflict. */
  startPruning(): void {
    const run = () => void this.prune().catch((err) => this.logger.warn({ err }, 'could not prune the response cache'));
    run();
    this.pruner = setInterval(run, PRUNE_EVERY_MS).unref();
  }

  close(): void {
    if (this.pruner) clearInterval(this.pruner);
    if (this.evictTimer) clearTimeout(this.evictTimer);
    this.pruner = null;
  }
}
