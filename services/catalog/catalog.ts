import type { Db } from '../../platform/db';
import type { CatalogModel, Provider } from '../../domain/catalog/model';
import type { CacheInvalidation } from '../../platform/cache-invalidation';

/** A provider's row read now (workers, which keep no catalog); undefined when unknown. */
export async function findProvider(db: Db, id: string): Promise<Provider | undefined> {
  return db('providers').where({ id }).first();
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
