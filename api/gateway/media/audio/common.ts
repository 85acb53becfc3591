import type { Context } from 'koa';
import { GatewayError } from '../../../../domain/shared/errors';
import { sub, toNumber, type Credits, type TokenRates } from '../../../../domain/credits/pricing';
import type { UpstreamResponse } from '../../../../providers/upstream';
import type { Db } from '../../../../platform/db';
import type { AuthRecord } from '../../../../services/keys/auth-store';
import type { Catalog } from '../../../../services/catalog/catalog';
import type { Hold, Reservations } from '../../../../services/credits/holds';
import type { Report } from '../../shared/upstream-failure';
export { upstreamFailure, type Report } from '../../shared/upstream-failure';
import { claimIdempotencyKey, idempotencyKey, releaseIdempotencyKey } from '../../../../services/idempotency/claims';

export interface AudioDeps {
  db: Db;
  catalog: Catalog;
  reservations: Reservations;
  upstreamTimeoutMs: number;
}


/** Keys a client may send that the table of the endpoint does not know: 400 naming the first. */
export function rejectUnknown(body: Record<string, unknown>, known: readonly string[]): void {
  const extra = Object.keys(body).find((k) => !known.includes(k));
  if (extra !== undefined) throw new GatewayError('unsupported_parameter', { param: extra, detail: 'not accepted by this endpoint' });
}

/** Decodes base64 or a data URI strictly; null when it is not base64. */
export function decodeBase64(data: string): Buffer | null {
  const payload = data.startsWith('data:') ? data.slice(data.indexOf(',') + 1) : data;
  const clean = payload.replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(clean) || clean.length % 4 !== 0) return null;
  return Buffer.from(clean, 'base64');
}

/**
 * Claims the Idempotency-Key (spec 4.9) before the hold: a repeat with the same content is 409
 * `idempotent_replay`, other content 409 `idempotency_key_reused`. Returns the release to call
 * when the request ends without output, so the key can be used again.
 */
export async function claimAudioKey(ctx: Context, db: Db, bodyHash: string): Promise<(() => Promise<void>) | null> {
  const key = idempotencyKey(ctx);
  if (!key) return null;
  const auth: AuthRecord = ctx.state.auth;
  const scope = { accountId: auth.accountId, scope: 'audio' as const, key };
  const claim = await claimIdempotencyKey(db, { ...scope, bodyHash });
  if (claim.status === 'replay') throw new GatewayError('idempotent_replay');
  if (claim.status === 'reused') throw new GatewayError('idempotency_key_reused', { key });
  return () => releaseIdempotencyKey(db, scope);
}

/** Spec 2.2 media form of `usage`: what the charge is now, and the balance around it. */
export function mediaUsage(hold: Hold, cost: Credits, billingSource: string) {
  const shown = hold.complimentary ? '0' : cost;
  return {
    cost: toNumber(shown),
    cost_details: { billing_source: hold.complimentary ? 'complimentary' : billingSource, is_estimate: billingSource === 'estimate' || billingSource === 'pending', reserved_credits: toNumber(hold.held) },
    balance: { before: toNumber(hold.balanceBefore), after: toNumber(sub(hold.balanceBefore, shown)), reserved_credits: toNumber(hold.held) },
  };
}

/** A non-200 answer of the provider: reported (not billed) and mapped to spec 1 section 7. */
export async function upstreamRefusal(res: UpstreamResponse, report: Report, model: string, audioParam: string | null): Promise<GatewayError> {
  let detail = `HTTP ${res.statusCode}`;
  let code: string | undefined;
  try {
    const body = (await res.body.json()) as { error?: { message?: string; code?: string } };
    detail = body.error?.message ?? detail;
    code = body.error?.code;
  } catch {
    // not JSON: keep the status line
  }
  report({ outcome: 'failed', billable: false, usage: null, providerCost: null, httpStatus: res.statusCode, error: detail });
  const s = res.statusCode;
  if (s === 400 && code === 'unsupported_format' && audioParam) return new GatewayError('unsupported_audio_format', { format: 'this', param: audioParam });
  if (s === 429) return new GatewayError('provider_rate_limited', {}, { 'retry-after': res.headers['retry-after']?.toString() ?? '1' });
  if (s === 401 || s === 403) return new GatewayError('provider_unavailable', { model });
  if (s >= 400 && s < 500) return new GatewayError('invalid_request', { detail: `the provider rejected the request: ${detail}` });
  return new GatewayError('provider_error', { detail });
}

/**
 * How an audio model is priced (`details.pricing`, credits per unit): by its unit (`per_character`
 * for speech, `per_second` for transcription) or by tokens (`per_input_token` and
 * `per_output_token`). The unit rate wins when both are present; neither is 503.
 */
export type AudioPricing = { kind: 'unit'; rate: Credits } | { kind: 'tokens'; rates: TokenRates };

export function audioPricing(details: Record<string, unknown>, unit: 'per_character' | 'per_second', model: string): AudioPricing {
  const pricing = (details.pricing as Record<string, unknown> | undefined) ?? {};
  const rate = (name: string): Credits | null => {
    const v = pricing[name];
    return typeof v === 'string' || typeof v === 'number' ? String(v) : null;
  };
  const perUnit = rate(unit);
  if (perUnit !== null) return { kind: 'unit', rate: perUnit };
  const input = rate('per_input_token');
  const output = rate('per_output_token');
  if (input !== null && output !== null) return { kind: 'tokens', rates: { per_input_token: input, per_output_token: output } };
  throw new GatewayError('model_pricing_unavailable', { model });
}
