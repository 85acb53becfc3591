import { Client } from 'pg';
import type { Logger } from './logger';

/**
 * Listens on the `cache_invalidation` channel (triggers in the gateway-core migration) and tells
 * subscribers which table row changed, so every API process drops stale keys, accounts and
 * models at once. If the listener connection breaks, everything is dropped and it reconnects.
 */
export class CacheInvalidation {
  private client: Client | null = null;
  private closed = false;
  private readonly subscribers: Array<(table: string, id: string | null) => void> = [];

  constructor(
    private readonly url: string,
    private readonly logger: Logger,
  ) {}

  subscribe(fn: (table: string, id: string | null) => void): void {
    this.subscribers.push(fn);
  }

  async start(): Promise<void> {
    const client = new Client({ connectionString: this.url });
    client.on('notification', (msg) => {
      const [table, id] = (msg.payload ?? '').split(':');
      this.emit(table, id ?? null);
    });
    client.on('error', (err) => {
      this.logger.warn({ err }, 'cache invalidation listener lost; flushing caches and reconnecting');
      this.emit('*', null);
      this.client = null;
      void client.end().catch(() => {});
      if (!this.closed) setTimeout(() => void this.start().catch(() => this.emit('*', null)), 500);
    });
    await client.connect();
    await client.query('LISTEN cache_invalidation');
    this.client = client;
    this.emit('*', null); // anything cached before LISTEN may be stale
  }

  private emit(table: string, id: string | null): void {
    for (const fn of this.subscribers) fn(table, id);
  }

  get healthy(): boolean {
    return this.client !== null;
  }

  async stop(): Promise<void> {
    this.closed = true;
    await this.client?.end().catch(() => {});
  }
}
