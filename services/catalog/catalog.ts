import type { Db } from '../../platform/db';
import { RETRY_DEFAULTS, type CatalogModel, type CatalogRoute, type Provider } from '../../domain/catalog/model';
import type { CacheInvalidation } from '../../platform/cache-invalidation';

/** A provider's row read now (workers, which keep no catalog); undefined when unknown. */
export async function findProvider(db: Db, id: string): Promise<Provider | undefined> {
  return db('providers').where({ id }).first();
}

/** The model catalog and providers, held in memory and reloaded when a row changes. */
export class Catalog {
  private models = new Map<string, CatalogModel>();
  private providers = new Map<string, Provider>();
  private routesByModel = new Map<string, CatalogRoute[]>();
  private loading: Promise<void> | null = null;
  private stale = true;

  constructor(
    private readonly db: Db,
    invalidation: CacheInvalidation,
  ) {
    invalidation.subscribe((table) => {
      if (table === 'models' || table === 'providers' || table === 'model_routes' || table === '*') this.stale = true;
    });
  }

  private async load(): Promise<void> {
    this.stale = false;
    const [models, providers, routes] = await Promise.all([
      this.db('models').select(),
      this.db('providers').select(),
      this.db('model_routes').orderBy(['model_id', 'priority', { column: 'weight', order: 'desc' }, 'provider_id', 'upstream_model']).select(),
    ]);
    this.models = new Map(models.map((m: CatalogModel) => [m.id, m]));
    this.providers = new Map(providers.map((p: Provider) => [p.id, p]));
    const byModel = new Map<string, CatalogRoute[]>();
    for (const r of routes) {
      const provider = this.providers.get(r.provider_id);
      if (!provider) continue;
      const list = byModel.get(r.model_id) ?? [];
      list.push({ provider, upstreamModel: r.upstream_model, priority: r.priority, weight: r.weight, retry: { retries: r.retries, backoffMs: r.retry_backoff_ms, on: r.retry_on } });
      byModel.set(r.model_id, list);
    }
    this.routesByModel = byModel;
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

  /**
   * The model's upstream routes, lowest priority first; a model without route rows (inserted
   * directly, as the simulator's seed does) has its own provider and upstream model as its one route.
   */
  async routes(model: CatalogModel): Promise<CatalogRoute[]> {
    await this.fresh();
    const own = this.routesByModel.get(model.id);
    if (own?.length) return own;
    const provider = this.providers.get(model.provider_id);
    return provider ? [{ provider, upstreamModel: model.upstream_model, priority: 0, weight: 1, retry: RETRY_DEFAULTS }] : [];
  }

  async provider(id: string): Promise<Provider | undefined> {
    await this.fresh();
    return this.providers.get(id);
  }
}
