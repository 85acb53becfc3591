import type { Context } from 'koa';
import { GatewayError } from '../../../domain/shared/errors';
import type { RequestReport } from '../../../domain/credits/reservation';
import type { Hold, HoldRequest, Reservations } from '../../../services/credits/holds';
import { claimIdempotencyKey, recordIdempotentResult, releaseIdempotencyKey, type IdempotencyScope } from '../../../services/idempotency/claims';
import type { AuthRecord } from '../../../services/keys/auth-store';
import type { Db } from '../../../platform/db';

// The head of every billable request (text, images, audio, video): claim the Idempotency-Key
// when one is sent, take the hold, and bind the outcome report to it. A refused hold frees the
// key again, so nothing is left claimed by a request that was never billed.

export type Report = (r: Omit<RequestReport, 'latencyMs'>) => void;

/** The Idempotency-Key header, validated; null when absent. */
export function idempotencyKey(ctx: Context): string | null {
  const k = ctx.get('idempotency-key');
  if (!k) return null;
  if (k.length > 255 || !/^[\x21-\x7e]+$/.test(k)) throw new GatewayError('invalid_parameter', { param: 'Idempotency-Key', detail: 'at most 255 visible ASCII characters' });
  return k;
}

/** A claimed Idempotency-Key; without a key both are no-ops. */
export interface ClaimedKey {
  /** frees the key for reuse (a request that ended without output) */
  release(): Promise<void>;
  /** records what the key's request produced, for replays */
  recordResult(resultId: string): Promise<void>;
}

const NO_KEY: ClaimedKey = { release: async () => {}, recordResult: async () => {} };

export type KeyClaim = { replay: false; key: ClaimedKey } | { replay: true; resultId: string | null };

export interface KeyScope {
  scope: IdempotencyScope['scope'];
  /** hash of what makes two requests "the same content" */
  bodyHash: string;
  /** a claim without a result older than this was left by a dead process: taken over */
  staleAfterMs?: number;
}

/**
 * Claims the request's Idempotency-Key (spec 4.9) before anything is held: the first request
 * goes on; a repeat with the same content is a replay; other content under the key is 409.
 */
export async function claimRequestKey(db: Db, ctx: Context, o: KeyScope): Promise<KeyClaim> {
  const key = idempotencyKey(ctx);
  if (!key) return { replay: false, key: NO_KEY };
  const auth: AuthRecord = ctx.state.auth;
  const scope = { accountId: auth.accountId, scope: o.scope, key };
  const claim = await claimIdempotencyKey(db, { ...scope, bodyHash: o.bodyHash, staleAfterMs: o.staleAfterMs });
  if (claim.status === 'reused') throw new GatewayError('idempotency_key_reused', { key });
  if (claim.status === 'replay') return { replay: true, resultId: claim.resultId };
  return { replay: false, key: { release: () => releaseIdempotencyKey(db, scope), recordResult: (id) => recordIdempotentResult(db, scope, id) } };
}

/** Takes the hold; a refused hold frees the claimed key. */
export async function takeHold(reservations: Reservations, ctx: Context, h: Omit<HoldRequest, 'reservationId' | 'accountId' | 'keyId'>, key: ClaimedKey): Promise<Hold> {
  const auth: AuthRecord = ctx.state.auth;
  ctx.state.metricsModel = h.model; // the http_* metrics' model label: a catalog id, so bounded
  try {
    return await reservations.hold({ ...h, reservationId: ctx.state.requestId, accountId: auth.accountId, keyId: auth.keyId });
  } catch (err) {
    await key.release();
    throw err;
  }
}

export interface BillableCall {
  hold: Hold;
  /** Reports the outcome to settlement, with the latency since `started` and the call's fixed details. */
  report: Report;
  key: ClaimedKey;
}

export interface BillableCallOptions {
  /** when the request arrived (latency is measured from here) */
  started: number;
  hold: Omit<HoldRequest, 'reservationId' | 'accountId' | 'keyId'>;
  /** claim the request's Idempotency-Key (if sent); a repeat with the same content is 409 idempotent_replay */
  idempotency?: KeyScope | null;
  /** fields merged into every report (e.g. usage details known up front) */
  details?: (r: Omit<RequestReport, 'latencyMs'>) => Partial<RequestReport>;
}

/** Key claim, hold and a report bound to the hold: the head of text, image and audio requests. */
export async function beginBillableCall(deps: { db: Db; reservations: Reservations }, ctx: Context, o: BillableCallOptions): Promise<BillableCall> {
  const claim: KeyClaim = o.idempotency ? await claimRequestKey(deps.db, ctx, o.idempotency) : { replay: false, key: NO_KEY };
  if (claim.replay) throw new GatewayError('idempotent_replay');
  const hold = await takeHold(deps.reservations, ctx, o.hold, claim.key);
  const report: Report = (r) => void hold.report({ ...r, ...o.details?.(r), latencyMs: Date.now() - o.started });
  return { hold, report, key: claim.key };
}
