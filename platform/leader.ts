import os from 'node:os';
import { randomBytes } from 'node:crypto';
import { Client, type ClientConfig } from 'pg';
import type { Logger } from './logger';

// The one rule for singletons (issue 35): a job that exactly one process of the whole system may do
// is done by the holder of a PostgreSQL session advisory lock, on a connection of its own. Every
// candidate tries to take the lock every `retryMs`; when the holder dies, PostgreSQL ends its session
// and frees the lock, and another candidate takes over within about `retryMs` (a vanished machine:
// TCP keepalives, ~25 s). The leader's work runs through the lock's own connection where it writes
// to the database, so a leader whose connection (and so whose lock) is gone can write nothing more.

/** Every singleton's lock (two int4 keys; pg_locks shows them as classid, objid, objsubid = 2). One list, so no two collide. */
export const SINGLETON_LOCKS = {
  /** the panel's node controller (services/panel/nodes/controller.ts): 'panl', 1 */
  panelController: [0x70616e6c, 1],
  /** knex migrations, so that roles starting together migrate one after another: 'migr', 1 */
  migrations: [0x6d696772, 1],
  /** the credits schedules (hold sweeper), kept by one credits worker: 'schd', 1 */
  creditsSchedules: [0x73636864, 1],
  /** the panel's alert-evaluation and reconciliation schedules, kept by one panel process with the hosting node: 'schd', 2 */
  panelSchedules: [0x73636864, 2],
  /** the panel billing meter schedule, kept by one billing worker: 'schd', 3 */
  billingSchedules: [0x73636864, 3],
} as const satisfies Record<string, readonly [number, number]>;

export type SingletonName = keyof typeof SINGLETON_LOCKS;

export interface LeaderBounds {
  /** how often the leader runs `tick` (ms) */
  tickMs: number;
  /** how often a process that does not lead tries to take the lock (ms) */
  retryMs: number;
}

export const LEADER_DEFAULTS: LeaderBounds = { tickMs: 5000, retryMs: 1000 };

export interface LeaderOptions extends Partial<LeaderBounds> {
  singleton: SingletonName;
  /** a connection string or pg settings: the lock is held on a connection of its own */
  databaseUrl: string | ClientConfig;
  logger: Logger;
  /**
   * The leader's work, run at once when the lock is taken (`gained` true) and then every tickMs,
   * through the lock's connection. A failure is logged and retried at the next tick; the lock is
   * kept unless the connection itself failed.
   */
  tick(client: Client, gained: boolean): Promise<void>;
  /** run when a leader stops cleanly, through the lock's connection, before the lock is freed */
  resign?(client: Client): Promise<unknown>;
}

export class Leader {
  /** this process's id as leader: host:pid:random */
  readonly id = `${os.hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  private readonly bounds: LeaderBounds;
  private client: Client | null = null;
  private leading = false;
  private gained = false;
  private stopped = false;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;

  constructor(private readonly o: LeaderOptions) {
    this.bounds = { tickMs: o.tickMs ?? LEADER_DEFAULTS.tickMs, retryMs: o.retryMs ?? LEADER_DEFAULTS.retryMs };
  }

  get isLeader(): boolean {
    return this.leading;
  }

  /** Makes the first attempt at the lock (and the first tick when it is taken), then keeps going until stop(). */
  async start(): Promise<void> {
    await this.step();
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.step(), this.leading ? this.bounds.tickMs : this.bounds.retryMs);
  }

  private step(): Promise<void> {
    this.timer = null;
    this.running = this.attempt().finally(() => {
      this.running = null;
      this.schedule();
    });
    return this.running;
  }

  private async attempt(): Promise<void> {
    if (this.stopped) return;
    let client: Client;
    try {
      client = this.client ?? (await this.connect());
      if (!this.leading) {
        const { rows } = await client.query('SELECT pg_try_advisory_lock($1, $2) AS ok', [...SINGLETON_LOCKS[this.o.singleton]]);
        if (!rows[0].ok) return;
        this.leading = true;
        this.gained = true;
        this.o.logger.info({ singleton: this.o.singleton, leader: this.id }, `leader: this process keeps ${this.o.singleton}`);
      }
    } catch (err) {
      if (this.stopped) return;
      this.o.logger.warn({ err, singleton: this.o.singleton, was_leader: this.leading }, 'leader: lock connection lost; reconnecting');
      this.drop();
      return;
    }
    try {
      await this.o.tick(client, this.gained);
      this.gained = false;
    } catch (err) {
      if (this.stopped) return;
      // The work failed: keep the lock if its connection still answers, else let another lead.
      const alive = await client.query('SELECT 1').then(() => true, () => false);
      this.o.logger.warn({ err, singleton: this.o.singleton, lock_kept: alive }, 'leader: work failed; retried at the next tick');
      if (!alive) this.drop();
    }
  }

  private async connect(): Promise<Client> {
    const settings = typeof this.o.databaseUrl === 'string' ? { connectionString: this.o.databaseUrl } : this.o.databaseUrl;
    const client = new Client({ ...settings, keepAlive: true, query_timeout: 15_000, application_name: `leader:${this.o.singleton}` });
    client.on('error', (err) => {
      if (this.client !== client) return;
      this.o.logger.warn({ err, singleton: this.o.singleton, was_leader: this.leading }, 'leader: lock connection failed');
      this.drop();
    });
    try {
      await client.connect();
      // Should this process's machine vanish without closing the connection, the server notices
      // within about 25 s (not the system's default of hours) and frees the lock for another.
      await client.query('SET tcp_keepalives_idle = 10; SET tcp_keepalives_interval = 5; SET tcp_keepalives_count = 3');
    } catch (err) {
      await client.end().catch(() => {});
      throw err;
    }
    this.client = client;
    return client;
  }

  /** Forgets the connection (and with it the lock, which PostgreSQL frees when the session ends). */
  private drop(): void {
    const client = this.client;
    this.client = null;
    this.leading = false;
    void client?.end().catch(() => {});
  }

  /** Stops: a leader resigns and frees the lock, so another takes over at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
    const client = this.client;
    this.client = null;
    if (!client) return;
    if (this.leading) {
      this.leading = false;
      await this.o.resign?.(client).catch(() => {});
      await client.query('SELECT pg_advisory_unlock($1, $2)', [...SINGLETON_LOCKS[this.o.singleton]]).catch(() => {});
    }
    await client.end().catch(() => {});
  }
}

/** Starts competing for a singleton; resolves after the first attempt (leading or not). */
export async function startLeader(o: LeaderOptions): Promise<Leader> {
  const leader = new Leader(o);
  await leader.start();
  return leader;
}

