import { createHash } from 'node:crypto';
import type { Knex } from 'knex';
import { Client, type ClientConfig, type Notification } from 'pg';
import { PanelError } from '../../../domain/panel/errors';
import type { NodeOperation, OperationResult } from '../../../domain/panel/node-ops';
import type { Logger } from '../../../platform/logger';
import { isUuid } from '../shared/chain';

// The queue of operations each node's agent pulls (PANEL.md section 4): queued in the transaction
// of the change they carry, handed out to the agent (again after a lease while not reported), closed
// once by its result or by expiry, and announced on NOTIFY channels so long polls and waiting workflows wake at once.

type Q = Knex | Knex.Transaction;

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

/** The NOTIFY channel of a node's queue (an identifier of at most 63 bytes). */
export function nodeChannel(name: string): string {
  const channel = `panel_node_ops:${name}`;
  return channel.length <= 63 ? channel : `panel_node_ops:#${sha256(name).slice(0, 40)}`;
}

/** Where a node's operation result is announced (payload: the operation id). */
export const OPERATION_RESULT_CHANNEL = 'panel_node_op_results';

const siteOf = (op: NodeOperation): string | null => {
  const id = op.kind === 'site.apply' || op.kind === 'backup.restore' ? op.site.id : op.kind === 'site.delete' || op.kind === 'backup.create' || op.kind === 'backup.delete' ? op.siteId : null;
  return id && isUuid(id) ? id : null;
};

/**
 * Queues `op` for `node` in the caller's transaction and wakes that node's waiting long poll (the
 * NOTIFY is delivered when the transaction commits). Idempotent by op.id: a second call with the
 * same id queues nothing (returns false). 404 for an unknown node.
 */
export async function queueOperation(trx: Q, node: string, op: NodeOperation): Promise<boolean> {
  if (!isUuid(op.id)) throw new Error(`node operation ids are UUIDs (got "${op.id}")`);
  if (!(await trx('panel_nodes').where({ name: node }).first('name'))) throw new PanelError('not_found', { what: 'node', node });
  const inserted = await trx('panel_node_ops')
    .insert({ id: op.id, node_name: node, site_id: siteOf(op), kind: op.kind, payload: JSON.stringify(op), created_at: trx.raw('clock_timestamp()') })
    .onConflict('id')
    .ignore()
    .returning('id');
  await trx.raw('SELECT pg_notify(?, ?)', [nodeChannel(node), op.id]);
  return inserted.length > 0;
}

/**
 * Hands out up to `limit` operations of `node` (oldest first, in queue order): the queued ones, and
 * those sent more than `leaseMs` ago and neither reported nor expired since (the answer that carried
 * them may never have reached the node: a link cut after the hand-out). The node applies an id it
 * applied already only once (hosting-node/operation-queue.ts), so a second hand-out is safe.
 */
export async function claimOperations(db: Q, node: string, limit: number, leaseMs: number): Promise<NodeOperation[]> {
  const { rows } = await db.raw(
    `UPDATE panel_node_ops o SET status = 'sent', sent_at = now(), attempts = o.attempts + 1
     FROM (SELECT id FROM panel_node_ops
           WHERE node_name = ? AND (status = 'queued' OR (status = 'sent' AND sent_at <= now() - make_interval(secs => ?)))
           ORDER BY created_at, id LIMIT ? FOR UPDATE SKIP LOCKED) q
     WHERE o.id = q.id
     RETURNING o.payload, o.id, (extract(epoch FROM o.created_at) * 1000000)::bigint::float8 AS at_us`,
    [node, Math.max(0, leaseMs) / 1000, Math.max(1, Math.floor(limit))],
  );
  // RETURNING keeps no order: sorted again, in microseconds (a Date has milliseconds, and two
  // operations queued in the same millisecond came back in id order).
  rows.sort((a: { at_us: number; id: string }, b: { at_us: number; id: string }) => a.at_us - b.at_us || a.id.localeCompare(b.id));
  return rows.map((r: { payload: NodeOperation }) => r.payload);
}

// Secrets in an operation (a database user's new password, a certificate's key) leave the row once it is finished.
const STRIP_SECRETS = `CASE WHEN kind IN ('database.create', 'database.password') THEN payload - 'password' WHEN kind = 'backup.restore' THEN payload - 'databases' WHEN kind = 'site.apply' THEN payload #- '{site,tls,key}' ELSE payload END`;

/**
 * Records what `node` reports for operation `opId`: done or failed. A repeated result is a no-op
 * (`recorded: false`); an operation of another node, or none, is 404.
 */
export async function recordResult(db: Q, node: string, opId: string, result: OperationResult): Promise<{ recorded: boolean; status: string; kind?: string }> {
  if (!isUuid(opId)) throw new PanelError('not_found', { what: 'operation' });
  const status = result.ok ? 'done' : 'failed';
  const { rows } = await db.raw(
    `WITH done AS (
       UPDATE panel_node_ops SET status = ?, result = ?::jsonb, finished_at = now(), payload = ${STRIP_SECRETS}
       WHERE id = ? AND node_name = ? AND status IN ('queued', 'sent') RETURNING id, status, kind)
     SELECT id, status, kind, pg_notify(?, id::text) FROM done`,
    [status, JSON.stringify(result), opId, node, OPERATION_RESULT_CHANNEL],
  );
  if (rows.length) return { recorded: true, status, kind: rows[0].kind };
  const op = await db('panel_node_ops').where({ id: opId }).first('node_name', 'status');
  if (!op || op.node_name !== node) throw new PanelError('not_found', { what: 'operation' });
  return { recorded: false, status: op.status };
}

/**
 * Gives up on an operation not finished yet (a workflow's timeout): `expired`, its secrets removed.
 * Returns false when it had finished (or expired) already. A late result is then a no-op.
 */
export async function expireOperation(db: Q, opId: string, reason: string): Promise<boolean> {
  if (!isUuid(opId)) return false;
  const n = await db('panel_node_ops')
    .where({ id: opId })
    .whereIn('status', ['queued', 'sent'])
    .update({ status: 'expired', finished_at: db.fn.now(), result: JSON.stringify({ ok: false, error: reason, refused: false }), payload: db.raw(STRIP_SECRETS) });
  return n > 0;
}

export interface OperationStatus {
  id: string;
  node: string;
  kind: NodeOperation['kind'];
  siteId: string | null;
  status: 'queued' | 'sent' | 'done' | 'failed' | 'expired';
  /** what the node reported (or the reason it expired); null until then */
  result: OperationResult | null;
  attempts: number;
  createdAt: Date;
  sentAt: Date | null;
  finishedAt: Date | null;
}

/** Where an operation stands (workflows poll this through an activity); null for an unknown id. */
export async function operationStatus(db: Q, opId: string): Promise<OperationStatus | null> {
  if (!isUuid(opId)) return null;
  const r = await db('panel_node_ops').where({ id: opId }).first();
  if (!r) return null;
  return { id: r.id, node: r.node_name, kind: r.kind, siteId: r.site_id, status: r.status, result: r.result, attempts: r.attempts, createdAt: r.created_at, sentAt: r.sent_at, finishedAt: r.finished_at };
}

/**
 * Wake-ups for long polls: one LISTEN connection per process, listening on the channel of each node
 * that has a waiting poll. If the connection breaks every waiter is woken (it re-reads the queue and
 * falls back to polling) and it reconnects.
 */
export class OperationWakeups {
  private client: Client | null = null;
  private closed = false;
  private readonly channels = new Map<string, { subs: Set<Subscription>; listening: Promise<void> | null }>();

  constructor(
    private readonly url: string | ClientConfig,
    private readonly logger: Logger,
  ) {}

  get healthy(): boolean {
    return this.client !== null;
  }

  async start(): Promise<void> {
    const settings = typeof this.url === 'string' ? { connectionString: this.url } : this.url;
    const client = new Client({ ...settings, keepAlive: true, application_name: 'panel-node-ops' });
    client.on('notification', (msg: Notification) => {
      for (const s of this.channels.get(msg.channel)?.subs ?? []) s.wake();
    });
    client.on('error', (err) => {
      if (this.client !== client) return;
      this.logger.warn({ err }, 'node operation listener lost; polling until it reconnects');
      this.client = null;
      for (const entry of this.channels.values()) {
        entry.listening = null;
        for (const s of entry.subs) s.wake();
      }
      void client.end().catch(() => {});
      this.retry();
    });
    await client.connect();
    if (this.closed) return void (await client.end());
    this.client = client;
    for (const [channel, entry] of this.channels) entry.listening = this.listen(client, channel);
  }

  private retry(): void {
    if (this.closed) return;
    setTimeout(() => void this.start().catch(() => this.retry()), 1000).unref();
  }

  private listen(client: Client, channel: string): Promise<void> {
    return client.query(`LISTEN "${channel}"`).then(
      () => undefined,
      (err) => this.logger.warn({ err, channel }, 'LISTEN failed'),
    );
  }

  /** Listens for `node`'s queue (resolves once LISTEN is in effect, or at once while disconnected). */
  async subscribe(node: string): Promise<Subscription> {
    const channel = nodeChannel(node);
    let entry = this.channels.get(channel);
    if (!entry) this.channels.set(channel, (entry = { subs: new Set(), listening: null }));
    const sub = new Subscription(() => this.release(channel, sub));
    entry.subs.add(sub);
    if (!entry.listening && this.client) entry.listening = this.listen(this.client, channel);
    await entry.listening;
    return sub;
  }

  private release(channel: string, sub: Subscription): void {
    const entry = this.channels.get(channel);
    if (!entry?.subs.delete(sub) || entry.subs.size) return;
    this.channels.delete(channel);
    // Queued behind any LISTEN on the same connection, so a new subscriber's LISTEN comes after it.
    if (entry.listening && this.client) void this.client.query(`UNLISTEN "${channel}"`).catch(() => {});
  }

  async stop(): Promise<void> {
    this.closed = true;
    for (const entry of this.channels.values()) for (const s of entry.subs) s.wake();
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => {});
  }
}

/** One waiting long poll: next() resolves on a NOTIFY for its node (or a wake-up) or after `ms`. */
export class Subscription {
  private pending = false;
  private resolve: (() => void) | null = null;

  constructor(private readonly onClose: () => void) {}

  wake(): void {
    if (this.resolve) this.resolve();
    else this.pending = true;
  }

  /** true: woken; false: the time ran out. */
  next(ms: number): Promise<boolean> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.resolve = null;
        resolve(false);
      }, ms);
      this.resolve = () => {
        clearTimeout(timer);
        this.resolve = null;
        resolve(true);
      };
    });
  }

  close(): void {
    this.onClose();
  }
}

