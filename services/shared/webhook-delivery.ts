import { randomBytes } from 'node:crypto';
import type net from 'node:net';
import type { Dispatcher } from 'undici';
import type { AttemptOutcome } from '../../domain/shared/webhooks';
import type { Db } from '../../platform/db';
import { open } from '../../platform/secret-box';
import { postSigned } from './signed-post';
import { checkHost, TargetRefused } from './webhook-targets';

// What both products' webhooks share (the gateway's account webhooks, the panel's alert
// webhooks): the endpoint URL check, the signing secret, and one attempt of a delivery — a
// signed POST written to the product's delivery log. A product states its log as a WebhookLog.

/** A product's delivery log: the tables a delivery is read from and its attempts written to. */
export interface WebhookLog {
  /** the header that carries the signature */
  signatureHeader: string;
  /** the delivery with what to send; null when it or its endpoint is gone */
  load(db: Db, deliveryId: string): Promise<{ status: string; url: string; secretSealed: string; body: string; headers: Record<string, string> } | null>;
  /** records attempt number `attempt` (a retried activity overwrites its own record) and marks a delivered delivery */
  record(db: Db, deliveryId: string, attempt: number, result: { status: number | null; error: string | null; latencyMs: number; delivered: boolean }): Promise<void>;
  /** gives up on a pending delivery after its retries */
  fail(db: Db, deliveryId: string): Promise<void>;
}

export interface WebhookDeliveryDeps {
  db: Db;
  /** opens the endpoints' sealed signing secrets */
  sealingKey: Buffer;
}

/** One attempt of a delivery: a signed POST, written to the product's log. */
export async function attemptDelivery(log: WebhookLog, d: WebhookDeliveryDeps, dispatcher: Dispatcher, deliveryId: string, attempt: number): Promise<AttemptOutcome> {
  const row = await log.load(d.db, deliveryId);
  if (!row || row.status !== 'pending') return { done: true, delivered: row?.status === 'delivered', status: null, error: row ? null : 'the delivery or its endpoint is gone' };
  const { status, error, latencyMs } = await postSigned(dispatcher, {
    url: row.url,
    body: row.body,
    secret: open(d.sealingKey, row.secretSealed),
    signatureHeader: log.signatureHeader,
    headers: row.headers,
  });
  const delivered = error === null;
  await log.record(d.db, deliveryId, attempt, { status, error, latencyMs, delivered });
  return { done: delivered, delivered, status, error };
}

/** A new signing secret (shown once, kept sealed); the prefix tells receivers what it is. */
export const newWebhookSecret = (): string => 'whsec_' + randomBytes(24).toString('base64url');

/**
 * An endpoint URL both products accept: http(s), no credentials (the signature authenticates the
 * sender), a host that resolves to an allowed address. `refused` builds the product's own error.
 */
export async function checkWebhookUrl(url: string, allowed: net.BlockList, o: { sender: string; allowSetting: string; refused: (detail: string) => Error }): Promise<URL> {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw o.refused('not a URL');
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') throw o.refused('http:// or https:// only');
  if (u.username || u.password) throw o.refused(`credentials in the URL are not accepted: the signature authenticates the ${o.sender}`);
  try {
    await checkHost(u.hostname, allowed);
  } catch (err) {
    throw o.refused(err instanceof TargetRefused ? err.message.replace('PANEL_WEBHOOK_ALLOW_TARGETS', o.allowSetting) : `the host ${u.hostname} does not resolve`);
  }
  return u;
}
