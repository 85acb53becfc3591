import type { CacheInvalidation } from '../../platform/cache-invalidation';
import type { Db } from '../../platform/db';
import { KEY_ACK } from './auth-store';

/**
 * Runs a change of a key and returns once every API process has dropped the key from its cache:
 * each one acknowledges the NOTIFY (`key_ack:<id>`, see AuthStore) and this waits for as many
 * acknowledgements as there are listening processes (or at most `timeoutMs`). So a revoked key
 * is refused by the very next request, on any process.
 */
export class KeyChangeAcks {
  private readonly waiters = new Map<string, Set<() => void>>();

  constructor(
    private readonly db: Db,
    invalidation: CacheInvalidation,
  ) {
    invalidation.subscribe((table, id) => {
      if (table === KEY_ACK && id !== null) this.waiters.get(id)?.forEach((f) => f());
    });
  }

  /** API processes listening for cache changes on this database (their listener connections). */
  private async listeners(): Promise<number> {
    const r = await this.db.raw(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN cache_invalidation'`,
    );
    return r.rows[0].n;
  }

  async change<T>(id: string, run: () => Promise<T>, timeoutMs = 2000): Promise<T> {
    const keyId = id.toLowerCase();
    const expected = Math.max(1, await this.listeners());
    let acks = 0;
    let done!: () => void;
    const all = new Promise<void>((resolve) => (done = resolve));
    const onAck = () => {
      if (++acks >= expected) done();
    };
    const set = this.waiters.get(keyId) ?? new Set();
    set.add(onAck);
    this.waiters.set(keyId, set);
    let timer: NodeJS.Timeout | undefined;
    try {
      const out = await run();
      timer = setTimeout(done, timeoutMs);
      await all;
      return out;
    } finally {
      clearTimeout(timer);
      set.delete(onAck);
      if (set.size === 0) this.waiters.delete(keyId);
    }
  }
}
