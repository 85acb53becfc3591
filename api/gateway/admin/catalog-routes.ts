import type Router from '@koa/router';
import { z } from 'zod';
import { accountChange, addCredits, createAccount, credits, getAccount, setAccountActive, TIERS, updateAccount } from '../../../services/accounts/accounts';
import { GatewayError } from '../../../domain/shared/errors';
import { isoInstant } from '../../../domain/shared/instant';
import { listModels, modelInput, providerInput, setModel, setProvider } from '../../../services/catalog/entries';
import { newCycleInput, startNewCycle } from '../../../services/accounts/cycles';
import { listRoutes, removeRoute, routeInput, setRoute } from '../../../services/catalog/routes';
import type { Db } from '../../../platform/db';
import { readJsonObject } from '../../shared/http';
import { validate } from '../../shared/validate';

// The admin HTTP API beyond keys: accounts, models and providers, the same operations and
// validation as the operator CLI (services/accounts, services/catalog/entries).

export const newAccount = z
  .object({ name: z.string().min(1).max(200), tier: z.enum(TIERS).optional(), credits: credits.optional(), plan_expires_at: isoInstant.nullable().optional() })
  .strict();
export const change = z.object({ tier: accountChange.shape.tier, plan_expires_at: accountChange.shape.planExpiresAt }).strict();
export const grant = z.object({ credits }).strict();
export const cycle = newCycleInput.omit({ account: true }).strict();
export const routeBody = routeInput.omit({ model: true }).strict();

/**
 * JSON values in the CLI's string forms, so one schema (services/catalog/entries.ts) checks both:
 * lists as comma-separated strings, booleans and numbers as text; `details` stays an object.
 */
function cliForm(body: Record<string, unknown>, fields: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(body)) {
    const name = k.replace(/_/g, '-');
    if (!(name in fields) || name === 'id') throw new GatewayError('unsupported_parameter', { param: k, detail: 'not a field of this entry (the id is in the path)' });
    out[name] = Array.isArray(v) ? v.join(',') : typeof v === 'boolean' || typeof v === 'number' ? String(v) : v;
  }
  return out;
}

export function catalogAdminRoutes(r: Router, db: Db): void {
  r.post('/accounts', async (ctx) => {
    const b = validate(newAccount, await readJsonObject(ctx));
    const made = await createAccount(db, { name: b.name, tier: b.tier, credits: b.credits, planExpiresAt: b.plan_expires_at ?? null });
    ctx.status = 201;
    ctx.body = await getAccount(db, made.id);
  });
  r.get('/accounts/:id', async (ctx) => {
    ctx.body = await getAccount(db, ctx.params.id);
  });
  r.patch('/accounts/:id', async (ctx) => {
    const b = validate(change, await readJsonObject(ctx));
    ctx.body = await updateAccount(db, ctx.params.id, { tier: b.tier, planExpiresAt: b.plan_expires_at });
  });
  r.post('/accounts/:id/credits', async (ctx) => {
    const b = validate(grant, await readJsonObject(ctx));
    await getAccount(db, ctx.params.id); // 404 (and a UUID check) before the grant
    await addCredits(db, ctx.params.id, b.credits);
    ctx.body = await getAccount(db, ctx.params.id);
  });
  r.post('/accounts/:id/cycle', async (ctx) => {
    ctx.body = await startNewCycle(db, { ...validate(cycle, await readJsonObject(ctx)), account: ctx.params.id });
  });
  r.post('/accounts/:id/deactivate', async (ctx) => {
    ctx.body = await setAccountActive(db, ctx.params.id, false);
  });
  r.post('/accounts/:id/reactivate', async (ctx) => {
    ctx.body = await setAccountActive(db, ctx.params.id, true);
  });

  r.get('/models', async (ctx) => {
    ctx.body = { data: await listModels(db) };
  });
  r.put('/models/:id', async (ctx) => {
    ctx.body = await setModel(db, { ...cliForm(await readJsonObject(ctx), modelInput.shape), id: ctx.params.id } as never);
  });
  r.put('/providers/:id', async (ctx) => {
    ctx.body = await setProvider(db, { ...cliForm(await readJsonObject(ctx), providerInput.shape), id: ctx.params.id } as never);
  });

  // A model's upstream routes (services/catalog/routes.ts): each answer is the model's routes.
  r.get('/models/:id/routes', async (ctx) => {
    ctx.body = await listRoutes(db, ctx.params.id);
  });
  r.put('/models/:id/routes', async (ctx) => {
    ctx.body = await setRoute(db, { ...validate(routeBody, await readJsonObject(ctx)), model: ctx.params.id });
  });
  r.delete('/models/:id/routes', async (ctx) => {
    ctx.body = await removeRoute(db, { ...validate(routeBody.pick({ provider: true, upstream: true }), await readJsonObject(ctx)), model: ctx.params.id });
  });
}
