import { request } from 'undici';
import { convertProviderCost } from '../../domain/credits/pricing';
import type { Db } from '../../platform/db';
import { providerAuthHeaders } from '../../providers';
import { findProvider } from '../../services/catalog/catalog';

export type LateCost = { status: 'pending' } | { status: 'completed'; cost: string | null; usage: Record<string, unknown> };

/**
 * Reads a cost the provider records after answering (audio): `GET {base}v1/generations/{id}`.
 * The cost comes back in credits.
 */
export function createProviderCostActivities(db: Db) {
  async function fetchLateCost(providerId: string, generationId: string): Promise<LateCost> {
    const provider = await findProvider(db, providerId);
    if (!provider) throw new Error(`provider ${providerId} not found`);
    const key: string | undefined = provider.api_keys[0];
    const res = await request(new URL(`v1/generations/${encodeURIComponent(generationId)}`, provider.base_url), {
      headers: key ? providerAuthHeaders(provider.kind, key) : {},
      headersTimeout: 10_000,
      bodyTimeout: 10_000,
    });
    const body = (await res.body.json()) as { status?: string; cost?: number | string | null; usage?: Record<string, unknown> };
    if (res.statusCode !== 200) throw new Error(`provider answered ${res.statusCode} for generation ${generationId}`);
    if (body.status !== 'completed') return { status: 'pending' };
    const cost = body.cost === null || body.cost === undefined ? null : convertProviderCost(body.cost, provider.credits_per_cost_unit);
    return { status: 'completed', cost, usage: body.usage ?? {} };
  }
  return { fetchLateCost };
}

export type ProviderCostActivities = ReturnType<typeof createProviderCostActivities>;
