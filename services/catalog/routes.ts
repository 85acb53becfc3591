import { z } from 'zod';
import type { Knex } from 'knex';
import type { Db } from '../../platform/db';
import { InvalidInput, NotFound } from '../shared/errors';

// A model's upstream routes (issue 23, feature 1), as operators set them with `admin route …` or
// the admin HTTP API. The model row's provider and upstream model mirror its top route, which the
// one-route endpoints (media, embeddings) use; text requests try the routes in order
// (api/gateway/text/routing.ts). API processes reload them on NOTIFY, as models.

const int = (min: number, max: number) => z.union([z.number(), z.string().regex(/^\d+$/, 'must be a whole number').transform(Number)]).pipe(z.number().int().min(min).max(max));

/** The failures that trigger a retry: 'connect' (no answer's headers) or statuses 408, 409, 425, 429, 5xx; a list or 'a,b'. */
const RETRY_ON = /^(connect|408|409|425|429|5\d\d)$/;
const retryOn = z
  .union([z.array(z.string()), z.string().transform((s) => (s ? s.split(',').map((x) => x.trim()) : []))])
  .pipe(z.array(z.string().regex(RETRY_ON, "each entry is 'connect' or a status: 408, 409, 425, 429 or 5xx")).max(20))
  .transform((l) => [...new Set(l)]);

export const routeInput = z.object({
  model: z.string().min(1).max(200),
  provider: z.string().min(1).max(100),
  upstream: z.string().min(1).max(200),
  // lower first; equal priorities share the traffic by weight
  priority: int(0, 1000).default(0),
  weight: int(1, 1000).default(1),
  // retries on this route before the request moves on (issue 36 part 3); absent: kept as they are
  retries: int(0, 10).optional(),
  retry_backoff_ms: int(0, 60_000).optional(),
  retry_on: retryOn.optional(),
});

export const routeKey = routeInput.pick({ model: true, provider: true, upstream: true });

export interface RouteRow {
  model_id: string;
  provider_id: string;
  upstream_model: string;
  priority: number;
  weight: number;
  retries: number;
  retry_backoff_ms: number;
  retry_on: string[];
}

const COLUMNS = ['model_id', 'provider_id', 'upstream_model', 'priority', 'weight', 'retries', 'retry_backoff_ms', 'retry_on'];
const ORDER = [{ column: 'priority' }, { column: 'weight', order: 'desc' }, { column: 'provider_id' }, { column: 'upstream_model' }] as const;

async function knownModel(db: Knex, id: string): Promise<void> {
  if (!(await db('models').where({ id }).first('id'))) throw new NotFound(`model ${id} not found`);
}

/** Refuses a provider the catalog does not have (instead of a foreign-key failure). */
export async function knownProvider(db: Knex, id: string): Promise<void> {
  if (!(await db('providers').where({ id }).first('id'))) throw new InvalidInput('provider', `unknown provider '${id}' (provider set adds one)`);
}

/** The model's routes in the order they are tried (weights aside). */
export async function listRoutes(db: Db, modelId: string): Promise<{ model: string; routes: RouteRow[] }> {
  await knownModel(db, modelId);
  return { model: modelId, routes: await db('model_routes').where({ model_id: modelId }).orderBy([...ORDER]).select(COLUMNS) };
}

/** The model row follows its top route (the one-route endpoints use it). */
async function mirrorTopRoute(trx: Knex, modelId: string): Promise<void> {
  const top = await trx('model_routes').where({ model_id: modelId }).orderBy([...ORDER]).first('provider_id', 'upstream_model');
  if (top) await trx('models').where({ id: modelId }).update({ provider_id: top.provider_id, upstream_model: top.upstream_model, updated_at: trx.fn.now() });
}

/** Adds a route, or changes the priority, weight and retries of an existing one (retry settings not given are kept). */
export async function setRoute(db: Db, input: z.input<typeof routeInput>) {
  const r = routeInput.parse(input);
  return db.transaction(async (trx) => {
    await knownModel(trx, r.model);
    await knownProvider(trx, r.provider);
    const retry = { retries: r.retries, retry_backoff_ms: r.retry_backoff_ms, retry_on: r.retry_on };
    const given = Object.keys(retry).filter((k) => retry[k as keyof typeof retry] !== undefined);
    await trx('model_routes')
      .insert({ model_id: r.model, provider_id: r.provider, upstream_model: r.upstream, priority: r.priority, weight: r.weight, ...retry })
      .onConflict(['model_id', 'provider_id', 'upstream_model'])
      .merge(['priority', 'weight', ...given]);
    await mirrorTopRoute(trx, r.model);
    return { model: r.model, routes: await trx('model_routes').where({ model_id: r.model }).orderBy([...ORDER]).select(COLUMNS) };
  });
}

/** Removes a route; a model keeps at least one. */
export async function removeRoute(db: Db, input: z.input<typeof routeKey>) {
  const r = routeKey.parse(input);
  return db.transaction(async (trx) => {
    await knownModel(trx, r.model);
    const routes: RouteRow[] = await trx('model_routes').where({ model_id: r.model }).forUpdate().select(COLUMNS);
    if (!routes.some((x) => x.provider_id === r.provider && x.upstream_model === r.upstream)) throw new NotFound(`model ${r.model} has no route ${r.provider}/${r.upstream}`);
    if (routes.length === 1) throw new InvalidInput('upstream', `the last route of ${r.model} cannot be removed (a model needs one; model set changes it)`);
    await trx('model_routes').where({ model_id: r.model, provider_id: r.provider, upstream_model: r.upstream }).delete();
    await mirrorTopRoute(trx, r.model);
    return { model: r.model, routes: await trx('model_routes').where({ model_id: r.model }).orderBy([...ORDER]).select(COLUMNS) };
  });
}

/**
 * `model set` keeps the routes in step with the model's provider and upstream model: the route
 * that was the old pair becomes the new pair (a one-route model is simply moved); a model without
 * that route gains it.
 */
export async function followModelChange(trx: Knex, modelId: string, old: { provider_id: string; upstream_model: string } | undefined, now: { provider_id: string; upstream_model: string }): Promise<void> {
  const same = (a: { provider_id: string; upstream_model: string }) => a.provider_id === now.provider_id && a.upstream_model === now.upstream_model;
  if (old && !same(old)) {
    const taken = await trx('model_routes').where({ model_id: modelId, ...now }).first('id');
    const prior = trx('model_routes').where({ model_id: modelId, provider_id: old.provider_id, upstream_model: old.upstream_model });
    await (taken ? prior.delete() : prior.update(now));
  }
  await trx('model_routes').insert({ model_id: modelId, ...now }).onConflict(['model_id', 'provider_id', 'upstream_model']).ignore();
}
