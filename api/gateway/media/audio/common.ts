import { GatewayError } from '../../../../domain/shared/errors';
import { sub, toNumber, type Credits, type TokenRates } from '../../../../domain/credits/pricing';
import type { Db } from '../../../../platform/db';
import type { Catalog } from '../../../../services/catalog/catalog';
import type { Hold, Reservations } from '../../../../services/credits/holds';

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

/** Spec 2.2 media form of `usage`: what the charge is now, and the balance around it. */
export function mediaUsage(hold: Hold, cost: Credits, billingSource: string) {
  const shown = hold.complimentary ? '0' : cost;
  return {
    cost: toNumber(shown),
    cost_details: { billing_source: hold.complimentary ? 'complimentary' : billingSource, is_estimate: billingSource === 'estimate' || billingSource === 'pending', reserved_credits: toNumber(hold.held) },
    balance: { before: toNumber(hold.balanceBefore), after: toNumber(sub(hold.balanceBefore, shown)), reserved_credits: toNumber(hold.held) },
  };
}

/** A provider refusing the audio's format answers 400 unsupported_audio_format naming the field. */
export const unsupportedFormat = (audioParam: string) => (status: number, code: string | undefined) =>
  status === 400 && code === 'unsupported_format' ? new GatewayError('unsupported_audio_format', { format: 'this', param: audioParam }) : null;

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
