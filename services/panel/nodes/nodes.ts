import { createHash, randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { invalid, notFound, PanelError } from '../../../domain/panel/errors';
import { HOSTING_NODE, isNodeName, type EnrolRequest, type Heartbeat } from '../../../domain/panel/node-ops';
import type { Db } from '../../../platform/db';
import type { Actor } from '../shared/actor';
import { audit } from '../shared/audit';
import { currentLeader, type LeaderInfo } from './controller';
import { recordGroupUsage } from '../sites/resource-usage';

// The panel's side of the cluster (spec 2 section 2.6, PANEL.md sections 1, 2, 4): node records,
// what agents report (enrolment, heartbeats), and the operator's edits (labels, draining). The
// queue of operations each node's agent pulls is ./queue.ts; the controller's state writes are in
// ./controller.ts.

type Q = Knex | Knex.Transaction;

export type NodeState = 'alive' | 'suspect' | 'dead';

export interface NodeRow {
  name: string;
  kind: 'hosting' | 'agent';
  token_hash: string | null;
  draining: boolean;
  logical_region: string | null;
  physical_region: string | null;
  zone: string | null;
  cell: string | null;
  /** labelled roles; null: those the facts say */
  roles: string[] | null;
  facts: Heartbeat['facts'] | null;
  facts_at: Date | null;
  metrics: Heartbeat['metrics'] | null;
  metrics_at: Date | null;
  boot_id: string | null;
  last_heartbeat_at: Date | null;
  last_pull_at: Date | null;
  agent_started_at: Date | null;
  agent_restarts: number;
  agent_reconnects: number;
  agent_reconnects_seen: number;
  site_usage: Heartbeat['usage'] | null;
  site_usage_at: Date | null;
  state: NodeState;
  state_at: Date;
  created_at: Date;
}

export const NODE_TOKEN_PREFIX = 'pnd_';
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

/** The roles a node serves: the labelled ones, else those its facts say it can serve. */
export const nodeRoles = (n: Pick<NodeRow, 'roles' | 'facts'>): string[] => n.roles ?? n.facts?.roles ?? [];

// ---------------------------------------------------------------------------------------------
// Records

/** The panel's own hosting node record (`hosting`), created at panel start when missing. */
export async function ensureHostingNode(db: Q): Promise<void> {
  await db('panel_nodes').insert({ name: HOSTING_NODE, kind: 'hosting', state: 'alive' }).onConflict('name').ignore();
}

export async function getNode(q: Q, name: string): Promise<NodeRow | null> {
  if (typeof name !== 'string' || !isNodeName(name)) return null;
  return (await q('panel_nodes').where({ name }).first()) ?? null;
}

/** Every node record: the hosting node first, then by name. */
export async function listNodes(q: Q): Promise<NodeRow[]> {
  return q('panel_nodes').orderByRaw(`kind = 'hosting' DESC, name`);
}

async function nodeForUpdate(trx: Knex.Transaction, name: string): Promise<NodeRow> {
  const row = isNodeName(name) ? await trx('panel_nodes').where({ name }).forUpdate().first() : undefined;
  if (!row) throw new PanelError('not_found', { what: 'node', node: name });
  return row;
}

/** The platform org, where cluster changes are audited. */
async function platformOrg(q: Q): Promise<{ id: string; path: string }> {
  const org = await q('panel_orgs').where({ type: 'platform' }).first('id', 'path');
  if (!org) throw new Error('the platform organisation does not exist yet: start panel-api once');
  return org;
}

function requireClusterAdmin(actor: Actor | null): void {
  // null: the operator's command line (panel-controller)
  if (actor && !(actor.orgType === 'platform' && actor.role === 'platform_admin')) {
    throw new PanelError('forbidden', { detail: 'only a platform_admin manages cluster nodes' });
  }
}

/**
 * Adds an agent node (`POST /v1/cluster/nodes {name}`): returns its node token, shown once; only
 * its SHA-256 is stored. The agent runs with it in its -token-file.
 */
export async function addNode(db: Db, actor: Actor | null, name: unknown): Promise<{ name: string; kind: 'agent'; token: string; created_at: Date }> {
  requireClusterAdmin(actor);
  if (typeof name !== 'string' || !isNodeName(name)) throw invalid('name', 'a node name is a DNS label: lower-case letters, digits and dashes, 1 to 63 characters');
  const token = NODE_TOKEN_PREFIX + randomBytes(32).toString('base64url');
  return db.transaction(async (trx) => {
    // Never heard from yet: dead until its first heartbeat (the controller keeps it so).
    const [row] = await trx('panel_nodes').insert({ name, kind: 'agent', token_hash: sha256(token), state: 'dead' }).onConflict('name').ignore().returning(['name', 'created_at']);
    if (!row) throw new PanelError('conflict', { detail: `a node named "${name}" exists already`, field: 'name' });
    await audit(trx, actor, { org: await platformOrg(trx), action: 'node.add', target: { type: 'node', id: name }, after: { name, kind: 'agent' } });
    return { name, kind: 'agent' as const, token, created_at: row.created_at };
  });
}

/** Where a node has sites (the sites table and its node column come with sites): 0 while there is none. */
async function siteCount(trx: Knex.Transaction, name: string): Promise<number> {
  const { rows } = await trx.raw(
    `SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'panel_sites' AND column_name IN ('node_name', 'node') ORDER BY column_name DESC LIMIT 1`,
  );
  if (!rows.length) return 0;
  const row = await trx('panel_sites').where(rows[0].column_name, name).first(trx.raw('count(*)::int AS n'));
  return row.n;
}

/** Deletes an agent node without sites, with its operation history (`DELETE /v1/cluster/nodes/{name}`). */
export async function deleteNode(db: Db, actor: Actor | null, name: string): Promise<void> {
  requireClusterAdmin(actor);
  await db.transaction(async (trx) => {
    const node = await nodeForUpdate(trx, name);
    if (node.kind === 'hosting') throw new PanelError('conflict', { detail: "the panel's own hosting node cannot be deleted" });
    const sites = await siteCount(trx, name);
    if (sites > 0) throw new PanelError('conflict', { detail: `node "${name}" still has ${sites} site(s): delete or move them first`, sites });
    await trx('panel_node_ops').where({ node_name: name }).delete();
    try {
      await trx('panel_nodes').where({ name }).delete();
    } catch (err) {
      if ((err as { code?: string }).code === '23503') throw new PanelError('conflict', { detail: `node "${name}" is still referenced (its sites): delete or move them first` });
      throw err;
    }
    await audit(trx, actor, { org: await platformOrg(trx), action: 'node.delete', target: { type: 'node', id: name }, before: labelsOf(node) });
  });
}

export interface NodeLabels {
  logical_region?: string | null;
  physical_region?: string | null;
  zone?: string | null;
  cell?: string | null;
  /** null: back to the roles the node's facts say */
  roles?: string[] | null;
}

const LABEL = /^[a-z0-9][a-z0-9-]{0,63}$/;
const labelsOf = (n: NodeRow) => ({ logical_region: n.logical_region, physical_region: n.physical_region, zone: n.zone, cell: n.cell, roles: n.roles, draining: n.draining });

/** Sets a node's location labels and roles (`panel-controller label`); absent fields stay, null clears. */
export async function labelNode(db: Db, actor: Actor | null, name: string, labels: NodeLabels) {
  requireClusterAdmin(actor);
  const change: Record<string, unknown> = {};
  for (const k of ['logical_region', 'physical_region', 'zone', 'cell'] as const) {
    const v = labels[k];
    if (v === undefined) continue;
    if (v !== null && !LABEL.test(v)) throw invalid(k, 'lower-case letters, digits and dashes, 1 to 64 characters');
    change[k] = v;
  }
  if (labels.roles !== undefined) {
    if (labels.roles !== null && !labels.roles.every((r) => LABEL.test(r))) throw invalid('roles', 'roles are lower-case words such as web or db');
    change.roles = labels.roles === null ? null : [...new Set(labels.roles)].sort();
  }
  if (!Object.keys(change).length) throw invalid('labels', 'nothing to change');
  return db.transaction(async (trx) => {
    const node = await nodeForUpdate(trx, name);
    const before = labelsOf(node);
    const [after] = await trx('panel_nodes').where({ name: node.name }).update(change).returning('*');
    const changed = JSON.stringify(before) !== JSON.stringify(labelsOf(after));
    if (changed) await audit(trx, actor, { org: await platformOrg(trx), action: 'node.label', target: { type: 'node', id: name }, before, after: labelsOf(after) });
    return { node: name, changed, ...labelsOf(after), roles: nodeRoles(after), roles_source: after.roles ? 'label' : 'facts' };
  });
}

/** Drains a node (it gets no new sites) or ends draining (`panel-controller drain` / `undrain`). */
export async function setDraining(db: Db, actor: Actor | null, name: string, draining: boolean) {
  requireClusterAdmin(actor);
  return db.transaction(async (trx) => {
    const node = await nodeForUpdate(trx, name);
    const changed = node.draining !== draining;
    if (changed) {
      await trx('panel_nodes').where({ name: node.name }).update({ draining });
      await audit(trx, actor, { org: await platformOrg(trx), action: draining ? 'node.drain' : 'node.undrain', target: { type: 'node', id: name }, before: { draining: node.draining }, after: { draining } });
    }
    return { node: name, draining, changed };
  });
}

// ---------------------------------------------------------------------------------------------
// Node selection (site placement, "Add website": only nodes alive, not draining, with the role)

export interface SelectionOptions {
  /** the role the node must serve; default `web` */
  role?: string;
  /** agent nodes must have pulled operations this recently (ms), e.g. 120_000 for scheduled placement */
  pulledWithinMs?: number;
  now?: Date;
}

/** Why a node cannot take a new site, in words; null when it can. */
export function nodeRefusal(n: NodeRow, o: SelectionOptions = {}): string | null {
  const role = o.role ?? 'web';
  if (n.state !== 'alive') return `node is ${n.state}`;
  if (n.draining) return 'node is draining';
  if (!nodeRoles(n).includes(role)) return `node does not have the ${role} role`;
  if (n.kind === 'agent' && o.pulledWithinMs !== undefined) {
    const now = (o.now ?? new Date()).getTime();
    if (!n.last_pull_at || now - new Date(n.last_pull_at).getTime() > o.pulledWithinMs) return `its agent has not pulled operations within the last ${Math.round(o.pulledWithinMs / 1000)} s`;
  }
  return null;
}

/** Nodes that can take a new site now (alive, not draining, with the role), the hosting node first. */
export async function selectableNodes(q: Q, o: SelectionOptions = {}): Promise<NodeRow[]> {
  return (await listNodes(q)).filter((n) => nodeRefusal(n, o) === null);
}

/** The latest per-site disk and inode use a node reported (SiteUsage of its last heartbeat). */
export async function nodeSiteUsage(q: Q, name: string): Promise<{ usage: Heartbeat['usage']; at: Date | null }> {
  const row = await q('panel_nodes').where({ name }).first('site_usage', 'site_usage_at');
  return { usage: row?.site_usage ?? [], at: row?.site_usage_at ?? null };
}

// ---------------------------------------------------------------------------------------------
// What agents report (the node API)

/** The node of a node token (`Authorization: Bearer pnd_…`); null for anything else. */
export async function nodeByToken(q: Q, token: string): Promise<NodeRow | null> {
  if (!token.startsWith(NODE_TOKEN_PREFIX) || token.length > 200) return null;
  return (await q('panel_nodes').where({ token_hash: sha256(token), kind: 'agent' }).first()) ?? null;
}

// A later start time than the recorded one is a new agent process: a restart (the first start is
// not); a process counts its reconnects from 0, so the node's total adds what the process reports
// beyond what it reported before.
const AGENT_SQL = `
  agent_restarts = agent_restarts + CASE WHEN agent_started_at IS NOT NULL AND ?::timestamptz > agent_started_at THEN 1 ELSE 0 END,
  agent_reconnects = agent_reconnects + CASE WHEN agent_started_at IS NULL OR ?::timestamptz > agent_started_at THEN ?::int ELSE greatest(?::int - agent_reconnects_seen, 0) END,
  agent_reconnects_seen = ?::int,
  agent_started_at = greatest(agent_started_at, ?::timestamptz)`;
const agentBindings = (startedAt: string, reconnects: number) => [startedAt, startedAt, reconnects, reconnects, reconnects, startedAt];

/**
 * An agent enrols (at every start): its facts, its start time (a new one counts a restart), and a
 * sign of life. Operations sent to an earlier agent process and never reported are queued again
 * (a node applies them idempotently, keyed by operation id).
 */
export async function enrolNode(db: Db, name: string, req: Pick<EnrolRequest, 'facts' | 'agentStartedAt'>): Promise<void> {
  await db.transaction(async (trx) => {
    const updated = await trx.raw(
      `UPDATE panel_nodes SET facts = ?::jsonb, facts_at = now(), last_heartbeat_at = now(),
         agent_restarts = agent_restarts + CASE WHEN agent_started_at IS NOT NULL AND ?::timestamptz > agent_started_at THEN 1 ELSE 0 END,
         agent_reconnects_seen = CASE WHEN agent_started_at IS NULL OR ?::timestamptz > agent_started_at THEN 0 ELSE agent_reconnects_seen END,
         agent_started_at = greatest(agent_started_at, ?::timestamptz)
       WHERE name = ? RETURNING name`,
      [JSON.stringify(req.facts), req.agentStartedAt, req.agentStartedAt, req.agentStartedAt, name],
    );
    if (!updated.rows.length) throw new PanelError('not_found', { what: 'node', node: name });
    await trx('panel_node_ops').where({ node_name: name, status: 'sent' }).update({ status: 'queued' });
  });
}

/**
 * A heartbeat: facts, metrics (and boot id), per-site usage, restarts and reconnects of its agent.
 * `usageSince` (epoch ms): when the usage walk began. A site measured after that (the file manager
 * records its site's use as it checks an upload, with `at`) keeps its newer entry: a slow walk must
 * not put back a use from before an upload the quota check has already counted.
 */
export async function recordHeartbeat(db: Q, name: string, hb: Heartbeat, usageSince: number | null = null): Promise<void> {
  const { rows } = await db.raw(
    `UPDATE panel_nodes SET facts = ?::jsonb, facts_at = now(), metrics = ?::jsonb, metrics_at = now(), boot_id = ?,
       site_usage = (SELECT coalesce(jsonb_agg(CASE WHEN (o.e->>'at')::bigint > ?::bigint THEN o.e ELSE n.e END), '[]'::jsonb)
         FROM jsonb_array_elements(?::jsonb) n(e)
         LEFT JOIN jsonb_array_elements(CASE WHEN jsonb_typeof(panel_nodes.site_usage) = 'array' THEN panel_nodes.site_usage ELSE '[]'::jsonb END) o(e)
           ON o.e->>'siteId' = n.e->>'siteId'),
       site_usage_at = now(), last_heartbeat_at = now(), ${AGENT_SQL}
     WHERE name = ? RETURNING name`,
    [JSON.stringify(hb.facts), JSON.stringify(hb.metrics), hb.metrics.bootId, usageSince, JSON.stringify(hb.usage), ...agentBindings(hb.agentStartedAt, hb.reconnects), name],
  );
  if (!rows.length) throw new PanelError('not_found', { what: 'node', node: name });
  // the growth of each site's group counters feeds metering and the usage page (issue 34)
  await recordGroupUsage(db, name, hb.usage);
}

/** An agent pulled operations (placement wants agents that pulled within the last 2 minutes). */
export async function touchPull(db: Q, name: string): Promise<void> {
  await db('panel_nodes').where({ name }).update({ last_pull_at: db.fn.now() });
}

// ---------------------------------------------------------------------------------------------
// Cluster pages (platform logins)

const snake = (k: string) => k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** A reported object with snake_case keys, as the rest of the panel API spells fields. */
function snakeKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(snakeKeys);
  if (v && typeof v === 'object' && !(v instanceof Date)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [snake(k), snakeKeys(x)]));
  return v;
}

/** A node record of spec 2.6 for the API; `leader`: the controller's leader, when there is one. */
export function nodeView(n: NodeRow, leader: LeaderInfo | null) {
  const isLeader = n.kind === 'hosting' && leader !== null;
  return {
    name: n.name,
    kind: n.kind,
    state: n.state,
    state_at: n.state_at,
    draining: n.draining,
    last_heartbeat_at: n.last_heartbeat_at,
    last_pull_at: n.last_pull_at,
    agent_started_at: n.agent_started_at,
    agent_restarts: n.agent_restarts,
    agent_reconnects: n.agent_reconnects,
    location: { logical_region: n.logical_region, physical_region: n.physical_region, zone: n.zone, cell: n.cell },
    roles: nodeRoles(n),
    roles_source: n.roles ? 'label' : 'facts',
    boot_id: n.boot_id,
    // The controller runs inside panel-api, on the panel's own hosting node.
    controller_role: isLeader ? 'leader' : 'none',
    leader: isLeader,
    metrics: snakeKeys(n.metrics),
    metrics_at: n.metrics_at,
    facts: snakeKeys(n.facts),
    facts_at: n.facts_at,
    created_at: n.created_at,
  };
}

const controllerView = (leader: LeaderInfo | null) => ({ leader: leader?.leader ?? null, leader_since: leader?.leader_since ?? null, heartbeat_at: leader?.heartbeat_at ?? null });

/** `GET /v1/cluster/nodes`: every node record and the controller's leader. */
export async function clusterNodes(db: Db) {
  const [nodes, leader] = await Promise.all([listNodes(db), currentLeader(db)]);
  return { state_available: true, controller: controllerView(leader), nodes: nodes.map((n) => nodeView(n, leader)) };
}

/** `GET /v1/cluster/nodes/{name}`: one node record; 404 for an unknown name. */
export async function clusterNode(db: Db, name: string) {
  const [node, leader] = await Promise.all([getNode(db, name), currentLeader(db)]);
  if (!node) throw notFound('node');
  return { state_available: true, controller: controllerView(leader), node: nodeView(node, leader) };
}

export const STATE_UNAVAILABLE = { state_available: false, message: 'node state is unavailable: panel-api runs without -controller-state' } as const;
