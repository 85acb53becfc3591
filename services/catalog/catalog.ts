import type { Db } from '../../platform/db';
import type { Tariff } from '../../domain/credits/pricing';
import type { CacheInvalidation } from '../../platform/cache-invalidation';

export interface CatalogModel extends Tariff {
  id: string;
  provider_id: string;
  upstream_model: string;
  capabilities: string[];
  tiers: string[];
  free_trial: boolean;
  active: boolean;
  max_output_tokens: number;
  /** media attributes and unit pricing (migrations/…_media_billing.ts) */
  details: Record<string, unknown>;
}

export interface Provider {
  id: string;
  kind: string;
  base_url: string;
  api_keys: string[];
  credits_per_cost_unit: string;
}

/** The model catalog and providers, held in memory and reloaded when a row changes. */
export class Catalog {
  private models = new Map<string, CatalogModel>();
  private providers = new Map<string, Provider>();
  private loading: Promise<void> | null = null;
  private stale = true;

  constructor(
    private readonly db: Db,
    invalidation: CacheInvalidation,
  ) {
    invalidation.subscribe((table) => {
      if (table === 'models' || table === 'providers' || table === '*') this.stale = true;
    });
  }

  private async load(): Promise<void> {
    this.stale = false;
    const [models, providers] = await Promise.all([this.db('models').select(), this.db('providers').select()]);
    this.models = new Map(models.map((m: CatalogModel) => [m.id, m]));
    this.providers = new Map(providers.map((p: Provider) => [p.id, p]));
  }

  private async fresh(): Promise<void> {
    // Callers during a load wait for it: the first load starts from an empty catalog.
    if (this.stale || this.loading) {
      this.loading ??= this.load().finally(() => (this.loading = null));
      await this.loading;
    }
  }

  async model(id: string): Promise<CatalogModel | undefined> {
    await this.fresh();
    return this.models.get(id);
  }

  async allModels(): Promise<CatalogModel[]> {
    await this.fresh();
    return [...this.models.values()];
  }

  async provider(id: string): Promise<Provider | undefined> {
    await this.fresh();
    return this.providers.get(id);
  }
}
