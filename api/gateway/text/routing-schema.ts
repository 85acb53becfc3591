import { z } from 'zod';

// The routing fields a chat, responses or messages request may carry (issue 36 part 2), named as
// OpenRouter names them: `models`, fallback models tried in order after `model`, and `provider`,
// the preferences over the models' routes. Gateway fields: never passed on to a provider.

const providerIds = z.array(z.string().min(1).max(100)).min(1).max(50);

export const providerPreferences = z
  .object({
    order: providerIds.optional().describe('provider ids to try first, in this order'),
    allow_fallbacks: z.boolean().optional().describe('false: only the providers of `order` (without `order`: only the first route); default true'),
    only: providerIds.optional().describe('provider ids allowed for this request'),
    ignore: providerIds.optional().describe('provider ids never used for this request'),
    sort: z.enum(['price', 'latency', 'throughput']).optional().describe("order the candidates by the catalog's price (lowest first) or this gateway's measured latency (lowest first) or throughput (highest first)"),
  })
  .strict()
  .describe('Provider routing preferences (OpenRouter `provider`); unknown fields are refused');

export const routingFields = {
  models: z.array(z.string().min(1).max(200)).min(1).max(5).optional().describe('fallback models tried in order after `model` when its routes fail; the answer names the one that answered, billed at its price'),
  provider: providerPreferences.optional(),
};

/** The routing fields, dropped from a body passed on to a provider as it is. */
export const ROUTING_FIELDS = Object.keys(routingFields);
