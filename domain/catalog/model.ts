import type { Tariff } from '../credits/pricing';

// The catalog's rows as every layer sees them: a model with its tariff, and an upstream provider.

export interface CatalogModel extends Tariff {
  id: string;
  provider_id: string;
  upstream_model: string;
  capabilities: string[];
  tiers: string[];
  free_trial: boolean;
  active: boolean;
  max_output_tokens: number;
  /** credits charged for an answer from the response cache (numeric, default 0) */
  cache_hit_credits: string;
  /** media attributes and unit pricing (migrations/…_media_billing.ts) */
  details: Record<string, unknown>;
}

export interface Provider {
  id: string;
  kind: string;
  base_url: string;
  api_keys: string[];
  credits_per_cost_unit: string;
  /** the AWS region a `bedrock` provider signs for (null for other kinds) */
  region?: string | null;
  /** the kind's own settings (Azure OpenAI: `api_version`), validated when the provider is set */
  settings: Record<string, unknown>;
}

/** One upstream route of a model: where a text request may go (services/catalog/routes.ts). */
export interface CatalogRoute {
  provider: Provider;
  upstreamModel: string;
  /** lower is tried first */
  priority: number;
  /** share of the traffic among routes of equal priority */
  weight: number;
  /** how a failed attempt is tried again on this route (services/catalog/routes.ts) */
  retry: RetryPolicy;
}

/** A route's retries: count, backoff base, and the failures that trigger one ('connect' or a status). */
export interface RetryPolicy {
  retries: number;
  backoffMs: number;
  on: string[];
}

export const RETRY_DEFAULTS: RetryPolicy = { retries: 0, backoffMs: 250, on: ['connect', '429', '500', '502', '503', '504'] };
