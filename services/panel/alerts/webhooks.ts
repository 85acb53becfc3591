import { randomUUID } from 'node:crypto';
import type net from 'node:net';
import type { Client } from '@temporalio/client';
import type { Knex } from 'knex';
import { EVENT_TYPES } from '../../../domain/panel/alerts';
import { invalid, notFound } from '../../../domain/panel/errors';
import type { Db } from '../../../platform/db';
import { seal } from '../../../platform/secret-box';
import type { Actor } from '../shared/actor';
import { audit } from '../shared/audit';
import { findInScope, isUuid } from '../shared/chain';
import { startWebhookDelivery, type WebhookSettings } from './client';
import { eventPayload } from './events';
import { checkWebhookUrl, newWebhookSecret, type WebhookLog } from '../../shared/webhook-delivery';

// Webhook endpoints, deliveries and attempts (spec 2 section 6, issue 17 item 4). An endpoint is set
// on an org and receives the events of that org and everything below; its signing secret is shown
// once and kept sealed. Each delivery runs in a `webhook-<delivery_id>` workflow (the shared delivery
// loop and activities) until the receiver answers 2xx or 24 h have passed; every attempt (status
// code, latency, error) is a row of PANEL_WEBHOOK_LOG. The signature header is `Panel-Signature: t=<unix seconds>,v1=<hex>`,
// v1 = HMAC-SHA256(secret, "<t>.<body>").

type Q = Knex | Knex.Transaction;

export const SIGNATURE_HEADER = 'panel-signature';

export interface WebhookDeps {
  db: Db;
  sealingKey: Buffer;
  /** internal addresses the operator allows as targets */
  allowed: net.BlockList;
}

const checkUrl = (url: string, allowed: net.BlockList): Promise<URL> =>
  checkWebhookUrl(url, allowed, { sender: 'panel', allowSetting: 'PANEL_WEBHOOK_ALLOW_TARGETS', refused: (detail) => invalid('url', detail) });

function checkEvents(events: string[]): void {
  if (!events.length || events.some((t) => !(EVENT_TYPES as readonly string[]).includes(t))) throw invalid('events', `one or more of ${EVENT_TYPES.join(', ')}`);
}

const endpointView = (e: { id: string; org_id: string; url: string; events: string[]; enabled: boolean; description: string | null; created_at: Date }) => ({
  id: e.id,
  org_id: e.org_id,
  url: e.url,
  events: e.events,
  enabled: e.enabled,
  description: e.description,
  created_at: e.created_at,
});

/** Adds an endpoint on org `orgId`; the secret is in the answer only. */
export async function createEndpoint(d: WebhookDeps, actor: Actor, orgId: string, input: { url: string; events: string[]; description?: string }) {
  const org = await findInScope(d.db, actor, orgId);
  checkEvents(input.events);
  const url = (await checkUrl(input.url, d.allowed)).toString();
  const secret = newWebhookSecret();
  return d.db.transaction(async (trx) => {
    const [row] = await trx('panel_webhook_endpoints')
      .insert({ id: randomUUID(), org_id: org.id, url, events: [...new Set(input.events)], secret_sealed: seal(d.sealingKey, secret), description: input.description ?? null })
      .returning('*');
    await audit(trx, actor, { org, action: 'webhook.create', target: { type: 'webhook_endpoint', id: row.id }, after: { url, events: row.events } });
    return { ...endpointView(row), secret, message: 'the signing secret is shown once: keep it to verify the Panel-Signature header' };
  });
}

async function endpointInScope(q: Q, actor: Actor, id: string) {
  if (!isUuid(id)) throw notFound('webhook endpoint');
  const e = await q('panel_webhook_endpoints as e').join('panel_orgs as o', 'o.id', 'e.org_id').where('e.id', id).where('o.path', 'like', `${actor.orgPath}%`).first('e.*', 'o.path as org_path');
  if (!e) throw notFound('webhook endpoint');
  return e;
}

export async function listEndpoints(db: Db, actor: Actor, orgId: string) {
  const org = await findInScope(db, actor, orgId);
  return { endpoints: (await db('panel_webhook_endpoints').where({ org_id: org.id }).orderBy('created_at')).map(endpointView) };
}

/** Changes an endpoint's URL, events, description or enabled flag (absent fields stay). */
export async function changeEndpoint(d: WebhookDeps, actor: Actor, id: string, change: { url?: string; events?: string[]; description?: string | null; enabled?: boolean }) {
  if (change.events !== undefined) checkEvents(change.events);
  const url = change.url === undefined ? undefined : (await checkUrl(change.url, d.allowed)).toString();
  return d.db.transaction(async (trx) => {
    const e = await endpointInScope(trx, actor, id);
    const after = { url, events: change.events && [...new Set(change.events)], description: change.description, enabled: change.enabled };
    const [row] = await trx('panel_webhook_endpoints').where({ id: e.id }).update(Object.fromEntries(Object.entries(after).filter(([, v]) => v !== undefined))).returning('*');
    await audit(trx, actor, { org: { id: e.org_id, path: e.org_path }, action: 'webhook.change', target: { type: 'webhook_endpoint', id: e.id }, before: endpointView(e), after: endpointView(row) });
    return endpointView(row);
  });
}

export async function deleteEndpoint(db: Db, actor: Actor, id: string): Promise<void> {
  await db.transaction(async (trx) => {
    const e = await endpointInScope(trx, actor, id);
    await trx('panel_webhook_endpoints').where({ id: e.id }).delete();
    await audit(trx, actor, { org: { id: e.org_id, path: e.org_path }, action: 'webhook.delete', target: { type: 'webhook_endpoint', id: e.id }, before: { url: e.url, events: e.events } });
  });
}

const DELIVERY_COLUMNS = ['d.id', 'd.endpoint_id', 'd.event_id', 'ev.type as event_type', 'd.status', 'd.attempts', 'd.redelivery_of', 'd.created_at', 'd.started_at', 'd.finished_at'];

/** An endpoint's deliveries, newest first. */
export async function listDeliveries(db: Db, actor: Actor, endpointId: string, limit: number) {
  const e = await endpointInScope(db, actor, endpointId);
  const rows = await db('panel_webhook_deliveries as d').join('panel_events as ev', 'ev.id', 'd.event_id').where('d.endpoint_id', e.id).orderBy('d.created_at', 'desc').limit(limit).select(DELIVERY_COLUMNS);
  return { deliveries: rows };
}

async function deliveryInScope(q: Q, actor: Actor, id: string) {
  if (!isUuid(id)) throw notFound('webhook delivery');
  const d = await q('panel_webhook_deliveries as d')
    .join('panel_webhook_endpoints as e', 'e.id', 'd.endpoint_id')
    .join('panel_orgs as o', 'o.id', 'e.org_id')
    .join('panel_events as ev', 'ev.id', 'd.event_id')
    .where('d.id', id)
    .where('o.path', 'like', `${actor.orgPath}%`)
    .first([...DELIVERY_COLUMNS, 'e.org_id', 'o.path as org_path']);
  if (!d) throw notFound('webhook delivery');
  return d;
}

/** One delivery with its attempts. */
export async function getDelivery(db: Db, actor: Actor, id: string) {
  const { org_id: _o, org_path: _p, ...d } = await deliveryInScope(db, actor, id);
  const attempts = await db('panel_webhook_attempts').where({ delivery_id: d.id }).orderBy('attempt').select('attempt', 'at', 'status_code', 'latency_ms', 'error');
  return { ...d, attempts };
}

/** Redelivers a delivery's event to its endpoint: a new delivery (and workflow), whatever became of the first. */
export async function redeliver(db: Db, temporal: Client, settings: WebhookSettings, actor: Actor, id: string) {
  const d = await deliveryInScope(db, actor, id);
  const newId = randomUUID();
  await db.transaction(async (trx) => {
    await trx('panel_webhook_deliveries').insert({ id: newId, endpoint_id: d.endpoint_id, event_id: d.event_id, redelivery_of: d.id });
    await audit(trx, actor, { org: { id: d.org_id, path: d.org_path }, action: 'webhook.redeliver', target: { type: 'webhook_delivery', id: d.id }, after: { delivery_id: newId } });
  });
  await startPendingDeliveries(db, temporal, settings);
  const { org_id: _o, org_path: _p, ...view } = await deliveryInScope(db, actor, newId);
  return view;
}

/** A delivery handed to Temporal whose first attempt has not been made this long after is handed over again. */
const START_LEASE = '5 minutes';

/**
 * Starts the workflow of every delivery not handed to Temporal yet (events recorded by emitEvent
 * anywhere), and again of any whose start was lost (a crash between the claim and the start; a
 * second start of a running one is a no-op). A start that fails gives the rest back, so the next
 * call retries them. Returns how many started.
 */
export async function startPendingDeliveries(db: Db, temporal: Client, settings: WebhookSettings): Promise<number> {
  const { rows } = await db.raw(
    `UPDATE panel_webhook_deliveries d SET started_at = now()
     FROM (SELECT id FROM panel_webhook_deliveries
           WHERE started_at IS NULL OR (status = 'pending' AND attempts = 0 AND started_at < now() - interval '${START_LEASE}')
           ORDER BY created_at LIMIT 500 FOR UPDATE SKIP LOCKED) p, panel_webhook_endpoints e
     WHERE d.id = p.id AND e.id = d.endpoint_id RETURNING d.id, e.org_id`,
  );
  const claimed = rows as Array<{ id: string; org_id: string }>;
  for (let i = 0; i < claimed.length; i++) {
    try {
      await startWebhookDelivery(temporal, settings, claimed[i].id, claimed[i].org_id);
    } catch (err) {
      await db('panel_webhook_deliveries').whereIn('id', claimed.slice(i).map((r) => r.id)).update({ started_at: null });
      throw err;
    }
  }
  return claimed.length;
}

/** The panel's delivery log: one row per attempt, the delivery row keeps the count and the outcome. */
export const PANEL_WEBHOOK_LOG: WebhookLog = {
  signatureHeader: SIGNATURE_HEADER,
  async load(db, deliveryId) {
    const row = await db('panel_webhook_deliveries as d')
      .join('panel_webhook_endpoints as e', 'e.id', 'd.endpoint_id')
      .join('panel_events as ev', 'ev.id', 'd.event_id')
      .where('d.id', deliveryId)
      .first('d.status', 'e.url', 'e.secret_sealed', 'ev.id', 'ev.type', 'ev.created_at', 'ev.org_id', 'ev.data');
    if (!row) return null;
    return {
      status: row.status,
      url: row.url,
      secretSealed: row.secret_sealed,
      body: JSON.stringify(eventPayload(row)),
      headers: { 'user-agent': 'hosting-panel-webhooks', 'panel-delivery': deliveryId, 'panel-event': row.type },
    };
  },
  async record(db, deliveryId, attempt, r) {
    await db.transaction(async (trx) => {
      await trx('panel_webhook_attempts').insert({ delivery_id: deliveryId, attempt, status_code: r.status, latency_ms: r.latencyMs, error: r.error }).onConflict(['delivery_id', 'attempt']).merge();
      await trx('panel_webhook_deliveries').where({ id: deliveryId, status: 'pending' }).update({ attempts: trx.raw('greatest(attempts, ?)', [attempt]), ...(r.delivered ? { status: 'delivered', finished_at: trx.fn.now() } : {}) });
    });
  },
  async fail(db, deliveryId) {
    await db('panel_webhook_deliveries').where({ id: deliveryId, status: 'pending' }).update({ status: 'failed', finished_at: db.fn.now() });
  },
};
