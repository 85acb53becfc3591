import type { Knex } from 'knex';
import type { ClientConfig } from 'pg';
import { Leader, SINGLETON_LOCKS } from '../../../platform/leader';
import type { Logger } from '../../../platform/logger';

// The controller (PANEL.md section 1, spec 2 section 2.6): inside every `panel-api serve
// -controller-state`, one leader among the processes, the holder of the singleton's PostgreSQL
// advisory lock (platform/leader.ts, the rule for every singleton). The leader records itself in
// panel_controller and writes every node's state from the age of its last heartbeat every few
// seconds (alive, suspect, dead) through the lock's own connection. The others try to take the lock
// every second: when the leader's process dies, one of them takes over.

/** The advisory lock key (two int4 keys: 'panl', 1); pg_locks shows it as classid, objid, objsubid = 2. */
export const CONTROLLER_LOCK = SINGLETON_LOCKS.panelController;

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
  private readonly bounds: ControllerBounds;
  private readonly leader: Leader;

  constructor(o: ControllerOptions) {
    this.bounds = { ...CONTROLLER_DEFAULTS, ...Object.fromEntries(Object.entries(o).filter(([k, v]) => k in CONTROLLER_DEFAULTS && v !== undefined)) };
    if (this.bounds.suspectMs < this.bounds.aliveMs) throw new Error('controller: suspectMs must be at least aliveMs');
    this.leader = new Leader({
      singleton: 'panelController',
      databaseUrl: o.databaseUrl,
      logger: o.logger,
      tickMs: this.bounds.tickMs,
      retryMs: this.bounds.retryMs,
      tick: async (client) => {
        await client.query(CLAIM_ROW, [this.id]);
        const { rows } = await client.query(WRITE_STATES, [this.bounds.aliveMs / 1000, this.bounds.suspectMs / 1000]);
        for (const r of rows) if (r.before !== r.state) o.logger.info({ node: r.name, from: r.before, to: r.state }, 'controller: node state changed');
      },
      // a leader that stops removes its row, so the console shows no leader until another takes over
      resign: (client) => client.query('DELETE FROM panel_controller WHERE id = 1 AND leader = $1', [this.id]),
    });
  }

  /** this process's id as leader: host:pid:random */
  get id(): string {
    return this.leader.id;
  }

  get isLeader(): boolean {
    return this.leader.isLeader;
  }

  /** Makes the first attempt at the lock, then keeps going in the background until stop(). */
  start(): Promise<void> {
    return this.leader.start();
  }

  /** Stops: a leader removes its panel_controller row and frees the lock, so another takes over at once. */
  stop(): Promise<void> {
    return this.leader.stop();
  }
}

/** Starts the controller of one panel-api process (it becomes the leader when no other process is). */
export async function startController(o: ControllerOptions): Promise<NodeController> {
  const c = new NodeController(o);
  await c.start();
  return c;
}
