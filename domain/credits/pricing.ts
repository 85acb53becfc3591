import Decimal from 'decimal.js';

// Pure credit arithmetic shared by the API, the activities and the workflows. Amounts travel as
// exact decimal strings; JSON numbers are made only at the HTTP edge.
const D = Decimal.clone({ precision: 60, rounding: Decimal.ROUND_HALF_UP });
const SCALE = 12; // numeric(38,12) in the database

export type Credits = string;

export interface Tariff {
  input_multiplier: Credits;
  output_multiplier: Credits;
  cache_multiplier: Credits;
  cache_creation_multiplier: Credits;
  /** credits per chat audio token; null or absent: the text rate of the same direction */
  audio_input_multiplier?: Credits | null;
  audio_output_multiplier?: Credits | null;
}

export interface TokenUsage {
  prompt_tokens: number;
  completion_tokens: number;
  cached_tokens: number;
  cache_write_tokens: number;
  reasoning_tokens: number | null;
  /**
   * Audio tokens, part of prompt_tokens / completion_tokens. Absent in reports signalled before
   * audio billing existed (they may still wait in a reservation workflow): read as 0.
   */
  audio_input_tokens?: number;
  audio_output_tokens?: number;
}

// provider_cost_capped: the provider reported a cost above the hold; the hold was charged and
// the rest (uncovered_credits) is the operator's, listed by `admin report uncovered`.
// cache: answered from the response cache, charged the hold (the model's cache-hit price).
export type BillingSource = 'provider_cost' | 'provider_cost_capped' | 'token_fallback' | 'estimate' | 'complimentary' | 'not_billed' | 'pending' | 'cache';

export interface Charge {
  billing_source: BillingSource;
  is_estimate: boolean;
  charge: Credits;
  input_credits: Credits;
  cache_write_credits: Credits;
  cache_read_credits: Credits;
  output_credits: Credits;
  pricing_adjustment_credits: Credits;
  /** the provider's cost above the hold, which was not charged; 0 unless provider_cost_capped */
  uncovered_credits: Credits;
}

const fix = (d: Decimal): Credits => d.toDecimalPlaces(SCALE).toFixed();
const ZERO = '0';

const audioInputRate = (t: Tariff): Credits => t.audio_input_multiplier ?? t.input_multiplier;
const audioOutputRate = (t: Tariff): Credits => t.audio_output_multiplier ?? t.output_multiplier;

/** Which audio a chat request holds (input_audio parts) or asks for (modalities). */
export interface AudioUse {
  input: boolean;
  output: boolean;
}
const NO_AUDIO: AudioUse = { input: false, output: false };

/**
 * Upper bound of what a text request can cost: every prompt token at the dearest input rate, every
 * output token at the dearer output rate (audio output tokens count in the output limit).
 */
export function holdForText(t: Tariff, promptTokenBound: number, maxOutputTokens: number, audio: AudioUse = NO_AUDIO): Credits {
  const inputRates = [t.input_multiplier, t.cache_creation_multiplier, t.cache_multiplier, ...(audio.input ? [audioInputRate(t)] : [])];
  const outputRate = audio.output ? D.max(t.output_multiplier, audioOutputRate(t)) : new D(t.output_multiplier);
  return fix(D.max(...inputRates).mul(promptTokenBound).add(outputRate.mul(maxOutputTokens)));
}

/** Table price of spec 2.1, split per token class; audio tokens count in the input and output classes. */
export function tablePrice(t: Tariff, u: TokenUsage) {
  const audioIn = u.audio_input_tokens ?? 0;
  const audioOut = u.audio_output_tokens ?? 0;
  const newText = Math.max(0, u.prompt_tokens - u.cached_tokens - u.cache_write_tokens - audioIn);
  const input = new D(t.input_multiplier).mul(newText).add(new D(audioInputRate(t)).mul(audioIn));
  const cacheWrite = new D(t.cache_creation_multiplier).mul(u.cache_write_tokens);
  const cacheRead = new D(t.cache_multiplier).mul(u.cached_tokens);
  const textOut = Math.max(0, u.completion_tokens - audioOut);
  const output = new D(t.output_multiplier).mul(textOut).add(new D(audioOutputRate(t)).mul(audioOut));
  return { input, cacheWrite, cacheRead, output, total: input.add(cacheWrite).add(cacheRead).add(output) };
}

export interface ChargeInput {
  tariff: Tariff;
  held: Credits;
  complimentary: boolean;
  /** null when the provider reported no usage */
  usage: TokenUsage | null;
  /** provider cost already converted to credits; null when none was reported */
  providerCost: Credits | null;
  /** false when the request failed or was rejected without cost */
  billable: boolean;
  /** media: the charge decided by units (images, seconds, characters) rather than tokens */
  media?: MediaCharge;
  /** answered from the response cache: the hold, taken at the cache-hit price, is the charge */
  cacheHit?: boolean;
}

/** A media request's charge: the provider's cost when credible, else the model rate × units. */
export interface MediaCharge {
  billingSource: 'provider_cost' | 'estimate';
  amount: Credits;
}

/** Model rate × units, e.g. credits per image × images received. */
export const unitsCharge = (rate: Credits, units: number): Credits => fix(new D(rate).mul(units));

/** Credits per token of a media model priced by tokens (audio `details.pricing`). */
export interface TokenRates {
  per_input_token: Credits;
  per_output_token: Credits;
}

/** Input tokens × input rate + output tokens × output rate. */
export const tokensCharge = (r: TokenRates, input: number, output: number): Credits =>
  fix(new D(r.per_input_token).mul(input).add(new D(r.per_output_token).mul(output)));

/** The charge of a settled request (spec 2.1 billing_source rules). Never above the hold. */
export function computeCharge(c: ChargeInput): Charge {
  const zero = { input_credits: ZERO, cache_write_credits: ZERO, cache_read_credits: ZERO, output_credits: ZERO, pricing_adjustment_credits: ZERO, uncovered_credits: ZERO };
  if (!c.billable) return { billing_source: 'not_billed', is_estimate: false, charge: ZERO, ...zero };
  if (c.complimentary) return { billing_source: 'complimentary', is_estimate: false, charge: ZERO, ...zero };
  const held = new D(c.held);
  if (c.cacheHit) return { billing_source: 'cache', is_estimate: false, charge: fix(held), ...zero };
  if (c.media) {
    const amount = new D(c.media.amount);
    if (c.media.billingSource === 'provider_cost' && amount.gt(held)) {
      return { billing_source: 'provider_cost_capped', is_estimate: false, ...zero, charge: fix(held), uncovered_credits: fix(amount.sub(held)) };
    }
    return { billing_source: c.media.billingSource, is_estimate: c.media.billingSource === 'estimate', charge: fix(D.min(amount, held)), ...zero };
  }
  if (!c.usage) {
    // No usage reported: bill the reservation estimate, never invent token counts.
    return { billing_source: 'token_fallback', is_estimate: true, charge: fix(held), ...zero };
  }
  const p = tablePrice(c.tariff, c.usage);
  const classes = {
    input_credits: fix(p.input),
    cache_write_credits: fix(p.cacheWrite),
    cache_read_credits: fix(p.cacheRead),
    output_credits: fix(p.output),
  };
  if (c.providerCost !== null) {
    const cost = new D(c.providerCost);
    const charge = D.min(cost, held);
    return {
      billing_source: cost.gt(held) ? 'provider_cost_capped' : 'provider_cost',
      is_estimate: false,
      charge: fix(charge),
      ...classes,
      pricing_adjustment_credits: fix(charge.sub(p.total)),
      uncovered_credits: fix(cost.sub(charge)),
    };
  }
  return { billing_source: 'token_fallback', is_estimate: true, charge: fix(D.min(p.total, held)), ...classes, pricing_adjustment_credits: ZERO, uncovered_credits: ZERO };
}

export function convertProviderCost(cost: string | number, creditsPerUnit: Credits): Credits {
  return fix(new D(cost).mul(creditsPerUnit));
}

/** The canonical form of an amount read from the database (numeric keeps trailing zeros). */
export const normalize = (a: Credits): Credits => fix(new D(a));
export const sub = (a: Credits, b: Credits): Credits => fix(new D(a).sub(b));
export const add = (a: Credits, b: Credits): Credits => fix(new D(a).add(b));
export const lt = (a: Credits, b: Credits): boolean => new D(a).lt(b);
/** JSON number for the HTTP edge only. */
export const toNumber = (a: Credits | null | undefined): number => (a == null ? 0 : Number(a));
