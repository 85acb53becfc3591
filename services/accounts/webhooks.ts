import type net from 'node:net';
import { z } from 'zod';
import type { Db } from '../../platform/db';
import { seal } from '../../platform/secret-box';
import { InvalidInput, NotFound } from '../shared/errors';
import { checkWebhookUrl, newWebhookSecret, type WebhookLog } from '../shared/webhook-delivery';
import { credits } from './accounts';

// Account webhooks (issue 23, feature 5): endpoints an operator sets on an account, and the
// deliveries of its events (`balance.low`, `key.spend_limit_reached`) that settlement records
// (services/accounts/event-sql.ts). Signed, checked and delivered as the panel's webhooks are
// (services/shared/webhook-delivery.ts): `Gateway-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "t.body")>`;
// never to private or loopback addresses unless GATEWAY_WEBHOOK_ALLOW_TARGETS allows them.

export const SIGNATURE_HEADER = 'gateway-signature';
export const EVENT_TYPES = ['balance.low', 'key.spend_limit_reached'] as const;

export interface AccountWebhookDeps {
  db: Db;
  sealingKey: Buffer;
  /** internal addresses the operator allows as targets */
  allowed: net.BlockList;
}

const uuid = z.string().uuid('must be a UUID');

async function accountExists(db: Db, id: string): Promise<void> {
  uuid.parse(id);
  if (!(await db('accounts').where({ id }).first('id'))) throw new NotFound(`account ${id} not found`);
}

const checkUrl = async (url: string, allowed: net.BlockList): Promise<string> =>
  (await checkWebhookUrl(url, allowed, { sender: 'gateway', allowSetting: 'GATEWAY_WEBHOOK_ALLOW_TARGETS', refused: (detail) => new InvalidInput('url', detail) })).toString();

const VIEW = ['id', 'account_id', 'url', 'created_at'];

/** Adds an endpoint to an account; its signing secret is in this answer only. */
export async function createEndpoint(d: AccountWebhookDeps, accountId: string, url: string) {
  await accountExists(d.db, accountId);
  const checked = await checkUrl(url, d.allowed);
  const secret = newWebhookSecret();
  const [row] = await d.db('account_webhook_endpoints').insert({ account_id: accountId, url: checked, secret_sealed: seal(d.sealingKey, secret) }).returning(VIEW);
  return { ...row, events: EVENT_TYPES, secret, message: `the signing secret is shown once: keep it to verify the ${SIGNATURE_HEADER} header` };
}

export async function listEndpoints(db: Db, accountId: string) {
  await accountExists(db, accountId);
  return { endpoints: await db('account_webhook_endpoints').where({ account_id: accountId }).orderBy('created_at').select(VIEW) };
}

export async function deleteEndpoint(db: Db, id: string) {
  uuid.parse(id);
  const n = await db('account_webhook_endpoints').where({ id }).delete();
  if (!n) throw new NotFound(`webhook endpoint ${id} not found`);
  return { id, deleted: true };
}

/** An endpoint's deliveries, newest first. */
export async function listDeliveries(db: Db, endpointId: string, limit = 50) {
  uuid.parse(endpointId);
  if (!(await db('account_webhook_endpoints').where({ id: endpointId }).first('id'))) throw new NotFound(`webhook endpoint ${endpointId} not found`);
  const rows = await db('account_webhook_deliveries').where({ endpoint_id: endpointId }).orderBy('created_at', 'desc').limit(limit).select('id', 'event_type', 'payload', 'status', 'attempts', 'last_status_code', 'last_error', 'created_at', 'finished_at');
  return { deliveries: rows };
}

/** balance.low fires when a settlement takes the balance below the threshold (none: never); set at or below the balance it is armed. */
export async function setLowBalanceThreshold(db: Db, accountId: string, threshold: string | null) {
  await accountExists(db, accountId);
  if (threshold !== null) credits.parse(threshold);
  const [row] = await db('accounts')
    .where({ id: accountId })
    .update({ low_balance_threshold: threshold, low_balance_armed: threshold === null ? true : db.raw('total_credits - total_usage >= ?::numeric', [threshold]) })
    .returning(['id', 'low_balance_threshold', 'low_balance_armed']);
  return row;
}

/**
 * Claims deliveries not handed to Temporal yet (settlement records them), oldest first; a
 * start that fails gives them back (started_at null) for the next pass.
 */
export async function claimUnstarted(db: Db, limit = 100): Promise<Array<{ id: string; account_id: string }>> {
  const { rows } = await db.raw(
    `UPDATE account_webhook_deliveries d SET started_at = now()
     FROM (SELECT id FROM account_webhook_deliveries WHERE started_at IS NULL ORDER BY created_at LIMIT ? FOR UPDATE SKIP LOCKED) p,
          account_webhook_endpoints e
     WHERE d.id = p.id AND e.id = d.endpoint_id RETURNING d.id, e.account_id`,
    [limit],
  );
  return rows;
}

export const unclaim = (db: Db, ids: string[]) => db('account_webhook_deliveries').whereIn('id', ids).update({ started_at: null });

/** The account webhook log: the delivery row keeps the count and the last result. */
export const ACCOUNT_WEBHOOK_LOG: WebhookLog = {
  signatureHeader: SIGNATURE_HEADER,
  async load(db, deliveryId) {
    const row = await db('account_webhook_deliveries as d')
      .join('account_webhook_endpoints as e', 'e.id', 'd.endpoint_id')
      .where('d.id', deliveryId)
      .first('d.id', 'd.status', 'd.event_type', 'd.payload', 'd.created_at', 'e.url', 'e.secret_sealed', 'e.account_id');
    if (!row) return null;
    return {
      status: row.status,
      url: row.url,
      secretSealed: row.secret_sealed,
      body: JSON.stringify({ id: row.id, type: row.event_type, created_at: row.created_at.toISOString(), account_id: row.account_id, data: row.payload }),
      headers: { 'user-agent': 'gateway-webhooks', 'gateway-event': row.event_type, 'gateway-delivery': row.id },
    };
  },
  async record(db, deliveryId, attempt, r) {
    await db('account_webhook_deliveries')
      .where({ id: deliveryId, status: 'pending' })
      .update({ attempts: db.raw('greatest(attempts, ?)', [attempt]), last_status_code: r.status, last_error: r.error, ...(r.delivered ? { status: 'delivered', finished_at: db.fn.now() } : {}) });
  },
  async fail(db, deliveryId) {
    await db('account_webhook_deliveries').where({ id: deliveryId, status: 'pending' }).update({ status: 'failed', finished_at: db.fn.now() });
  },
};
