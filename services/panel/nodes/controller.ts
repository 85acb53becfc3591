import { randomBytes } from 'node:crypto';
import os from 'node:os';
import type { Knex } from 'knex';
import { Client, type ClientConfig } from 'pg';
import type { Logger } from '../../../platform/logger';

// The controller (PANEL.md section 1, spec 2 section 2.6): inside every `panel-api serve
// -controller-state`, one leader among the processes, the holder of a PostgreSQL advisory lock on a
// dedicated connection. The leader records itself in panel_controller and writes every node's state
// from the age of its last heartbeat every few seconds: alive, suspect, dead. It writes through the
// lock's own connection, so a leader whose connection is gone (and so whose lock is released) can
// write nothing more. The others try to take the lock every second: when the leader's process dies
// PostgreSQL ends its session and frees the lock, and one of them takes over.

/** The advisory lock key (two int4 keys: 'panl', 1); pg_locks shows it as classid, objid, objsubid = 2. */
export const CONTROLLER_LOCK = [0x70616e6c, 1] as const;

export interface ControllerBounds {
  /** how often the leader writes node state (ms) */
  tickMs: number;
  /** a node whose last heartbeat is at most this old is alive (ms) */
  aliveMs: number;
  /** …at most this old suspect; older (or never heard from) dead (ms) */
  suspectMs: number;
  /** how often a process that is not the leader tries to take the lock (ms) */
  retryMs: number;
}

export const CONTROLLER_DEFAULTS: ControllerBounds = { tickMs: 5000, aliveMs: 30_000, suspectMs: 90_000, retryMs: 1000 };

export interface ControllerOptions extends Partial<ControllerBounds> {
  /** a connection string or pg settings: the lock is held on a connection of its own */
  databaseUrl: string | ClientConfig;
  logger: Logger;
}

export interface LeaderInfo {
  /** host:pid:random of the leading panel-api process */
  leader: string;
  leader_since: Date;
  heartbeat_at: Date;
}

/** The current leader: the panel_controller row while the advisory lock is held; null without a leader. */
export async function currentLeader(q: Knex | Knex.Transaction): Promise<LeaderInfo | null> {
  const { rows } = await q.raw(
    `SELECT c.leader, c.leader_since, c.heartbeat_at FROM panel_controller c
     WHERE c.id = 1 AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.classid = ? AND l.objid = ? AND l.objsubid = 2 AND l.granted)`,
    [...CONTROLLER_LOCK],
  );
  return rows[0] ?? null;
}

// One statement: every node's state from its heartbeat age (the hosting node is alive while the
// panel runs: its heartbeat is the leader's), with the state before, to log the changes.
const WRITE_STATES = `
  UPDATE panel_nodes n SET
    state = CASE WHEN n.kind = 'hosting' THEN 'alive'
                 WHEN n.last_heartbeat_at IS NULL THEN 'dead'
                 WHEN n.last_heartbeat_at >= now() - make_interval(secs => $1) THEN 'alive'
                 WHEN n.last_heartbeat_at >= now() - make_interval(secs => $2) THEN 'suspect'
                 ELSE 'dead' END,
    state_at = now(),
    last_heartbeat_at = CASE WHEN n.kind = 'hosting' THEN now() ELSE n.last_heartbeat_at END
  FROM panel_nodes o WHERE o.name = n.name
  RETURNING n.name, o.state AS before, n.state`;

const CLAIM_ROW = `
  INSERT INTO panel_controller (id, leader, leader_since, heartbeat_at) VALUES (1, $1, now(), now())
  ON CONFLICT (id) DO UPDATE SET leader = EXCLUDED.leader, heartbeat_at = now(),
    leader_since = CASE WHEN panel_controller.leader = EXCLUDED.leader THEN panel_controller.leader_since ELSE now() END`;

export class NodeController {
  /** this process's id as leader: host:pid:random */
  readonly id = `${os.hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  private readonly bounds: ControllerBounds;
  private client: Client | null = null;
  private leading = false;
  private stopped = false;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;

  constructor(private readonly o: ControllerOptions) {
    this.bounds = { ...CONTROLLER_DEFAULTS, ...Object.fromEntries(Object.entries(o).filter(([k, v]) => k in CONTROLLER_DEFAULTS && v !== undefined)) };
    if (this.bounds.suspectMs < this.bounds.aliveMs) throw new Error('controller: suspectMs must be at least aliveMs');
  }

  get isLeader(): boolean {
    return this.leading;
  }

  /** Makes the first attempt at the lock, then keeps going in the background until stop(). */
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
    try {
      const client = this.client ?? (await this.connect());
      if (!this.leading) {
        const { rows } = await client.query('SELECT pg_try_advisory_lock($1, $2) AS ok', [...CONTROLLER_LOCK]);
        if (!rows[0].ok) return;
        this.leading = true;
        this.o.logger.info({ leader: this.id }, 'controller: this process is the leader');
      }
      await client.query(CLAIM_ROW, [this.id]);
      const { rows } = await client.query(WRITE_STATES, [this.bounds.aliveMs / 1000, this.bounds.suspectMs / 1000]);
      for (const r of rows) if (r.before !== r.state) this.o.logger.info({ node: r.name, from: r.before, to: r.state }, 'controller: node state changed');
    } catch (err) {
      if (this.stopped) return;
      this.o.logger.warn({ err, was_leader: this.leading }, 'controller: database connection lost; reconnecting');
      this.drop();
    }
  }

  private async connect(): Promise<Client> {
    const settings = typeof this.o.databaseUrl === 'string' ? { connectionString: this.o.databaseUrl } : this.o.databaseUrl;
    const client = new Client({ ...settings, keepAlive: true, query_timeout: 15_000, application_name: 'panel-controller' });
    client.on('error', (err) => {
      if (this.client !== client) return;
      this.o.logger.warn({ err, was_leader: this.leading }, 'controller: lock connection failed');
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

  /** Stops: a leader removes its panel_controller row and frees the lock, so another takes over at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
    const client = this.client;
    this.client = null;
    if (!client) return;
    if (this.leading) {
      this.leading = false;
      await client.query('DELETE FROM panel_controller WHERE id = 1 AND leader = $1', [this.id]).catch(() => {});
      await client.query('SELECT pg_advisory_unlock($1, $2)', [...CONTROLLER_LOCK]).catch(() => {});
    }
    await client.end().catch(() => {});
  }
}

/** Starts the controller of one panel-api process (it becomes the leader when no other process is). */
export async function startController(o: ControllerOptions): Promise<NodeController> {
  const c = new NodeController(o);
  await c.start();
  return c;
}
