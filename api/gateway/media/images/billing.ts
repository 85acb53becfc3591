import Decimal from 'decimal.js';
import { GatewayError } from '../../../../domain/shared/errors';
import { chargeOf as outcomeCharge } from '../../../../domain/credits/reservation';
import { add, convertProviderCost, sub, toNumber, unitsCharge, type Charge, type Credits, type MediaCharge } from '../../../../domain/credits/pricing';
import { uncovered } from '../../shared/usage-view';
import type { CatalogModel, Provider } from '../../../../domain/catalog/model';
import type { Hold } from '../../../../services/credits/holds';
import type { ImageRequest } from './schema';

// Image tariffs (details.pricing, credits): per_image, or per_megapixel of the output size;
// per_input_image when input images are billed. Held for n images, charged for images received.

export interface ImageRates {
  perImage: Credits;
  perInputImage: Credits | null;
}

const TIER_SIDE: Record<string, number> = { '512': 512, '1K': 1024, '2K': 2048, '4K': 4096 };

/** Output pixels of a request: `<W>x<H>`, or a tier (with aspect_ratio), default 1024x1024. */
export function outputPixels(req: Pick<ImageRequest, 'size' | 'resolution' | 'aspect_ratio'>): { width: number; height: number } {
  const m = req.size ? /^(\d+)x(\d+)$/.exec(req.size) : null;
  if (m) return { width: Number(m[1]), height: Number(m[2]) };
  const side = TIER_SIDE[req.size ?? req.resolution ?? '1K'] ?? 1024;
  const [w, h] = (req.aspect_ratio ?? '1:1').split(':').map(Number) as [number, number];
  // the tier is the long side; the short side follows the ratio, rounded to 16 px
  return w >= h ? { width: side, height: Math.max(16, Math.round((side * h) / w / 16) * 16) } : { width: Math.max(16, Math.round((side * w) / h / 16) * 16), height: side };
}

const decimalString = (v: unknown): string | null => (typeof v === 'string' && /^\d+(\.\d+)?$/.test(v) ? v : typeof v === 'number' && Number.isFinite(v) && v >= 0 ? String(v) : null);

export function ratesFor(model: CatalogModel, req: ImageRequest): ImageRates {
  const pricing = (model.details?.pricing ?? {}) as Record<string, unknown>;
  const perImage = decimalString(pricing.per_image);
  const perMp = decimalString(pricing.per_megapixel);
  let rate: Credits | null = perImage;
  if (rate === null && perMp !== null) {
    const { width, height } = outputPixels(req);
    rate = new Decimal(perMp).mul(width * height).div(1_000_000).toDecimalPlaces(12).toFixed();
  }
  if (rate === null) throw new GatewayError('model_pricing_unavailable', { model: model.id });
  return { perImage: rate, perInputImage: decimalString(pricing.per_input_image) };
}

/** What is held: n images at the model rate, plus the input images when the tariff lists them. */
export function holdFor(rates: ImageRates, n: number, inputImages: number): Credits {
  return add(unitsCharge(rates.perImage, n), rates.perInputImage ? unitsCharge(rates.perInputImage, inputImages) : '0');
}

/**
 * The charge of what was received: the provider's cost when it reported a credible one, else
 * the model rate × images received (input images only billed when an image came back).
 */
export function mediaCharge(rates: ImageRates, received: number, inputImages: number, providerCost: number | undefined, provider: Provider): MediaCharge {
  if (providerCost !== undefined && Number.isFinite(providerCost) && providerCost >= 0) {
    return { billingSource: 'provider_cost', amount: convertProviderCost(providerCost, provider.credits_per_cost_unit) };
  }
  return { billingSource: 'estimate', amount: received > 0 ? holdFor(rates, received, inputImages) : '0' };
}

export function chargeOf(hold: Hold, media: MediaCharge): Charge {
  return outcomeCharge(hold, { usage: null, providerCost: null, billable: true, media });
}

/** The media usage object of spec 2.2 (image form: with the provider's token counts when it gave them). */
export function imageUsage(hold: Hold, c: Charge, tokens: { input: number; output: number } | null) {
  return {
    ...(tokens ? { prompt_tokens: tokens.input, completion_tokens: tokens.output, total_tokens: tokens.input + tokens.output } : {}),
    cost: toNumber(c.charge),
    cost_details: { billing_source: c.billing_source, is_estimate: c.is_estimate, reserved_credits: toNumber(hold.held), ...uncovered(c) },
    balance: { before: toNumber(hold.balanceBefore), after: toNumber(sub(hold.balanceBefore, c.charge)), reserved_credits: toNumber(hold.held) },
  };
}
