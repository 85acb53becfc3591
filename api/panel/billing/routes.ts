import Router from '@koa/router';
import type { Client } from '@temporalio/client';
import type { Context } from 'koa';
import { z } from 'zod';
import { PanelError } from '../../../domain/panel/errors';
import type { Db } from '../../../platform/db';
import { runMonthClose } from '../../../services/panel/billing/client';
import { assignPlan, createPlan, deletePlan, getPlan, listPlans, updatePlan } from '../../../services/panel/billing/plans';
import { billingPage, checkClose, closedStatements, issuedStatements, statement, statementCsv, statementsCsv, type BillingSettings } from '../../../services/panel/billing/statements';
import { principalOf } from '../shared/auth';
import { bodyOf, parse } from '../shared/http';

// Billing (spec 2 sections 2.8, 3, 4.1, 4.2): plans of an org, Assign plan / Not billed, the
// billing page (statement estimate, orgs billed, margin), a statement and its exports (JSON, or CSV
// with Accept: text/csv), the closed statements of an org and of those it bills, Close month
// (confirmed, after the month ended) and the API-token export of issued statements.

export interface BillingApiDeps {
  db: Db;
  temporal: Client;
  settings: BillingSettings & { taskQueue: string };
}

const money = z.union([z.string().max(40), z.number()]);
export const planBody = z.strictObject({
  name: z.string().trim().min(1).max(80),
  currency: z.string().max(8),
  base_price: money,
  account_price: money,
  package_prices: z.record(z.string().max(64), money).optional(),
  rates: z.string().max(20_000),
});

export const planPatchBody = planBody.partial();
export const assignPlanBody = z.strictObject({ plan_id: z.string().max(64).nullable() });
export const closeBody = z.strictObject({ period: z.string().max(16), confirm: z.boolean().optional() });
/** YYYY-MM; absent: the current month */
export const periodQuery = z.object({ period: z.string().max(16).optional() });

const wantsCsv = (ctx: Context) => ctx.accepts('application/json', 'text/csv') === 'text/csv' && /text\/csv/.test(ctx.get('accept'));

function sendCsv(ctx: Context, name: string, csv: string) {
  ctx.type = 'text/csv; charset=utf-8';
  ctx.set('content-disposition', `attachment; filename="${name}.csv"`);
  ctx.body = csv;
}

export function billingRoutes(d: BillingApiDeps): Router {
  const r = new Router({ prefix: '/v1' });
  r.get('/orgs/:id/billing-plans', async (ctx) => {
    ctx.body = await listPlans(d.db, principalOf(ctx), ctx.params.id);
  });
  r.post('/orgs/:id/billing-plans', async (ctx) => {
    const b = await bodyOf(ctx, planBody);
    ctx.status = 201;
    ctx.body = await createPlan(d.db, principalOf(ctx), ctx.params.id, b);
  });
  r.get('/billing-plans/:id', async (ctx) => {
    ctx.body = await getPlan(d.db, principalOf(ctx), ctx.params.id);
  });
  r.patch('/billing-plans/:id', async (ctx) => {
    ctx.body = await updatePlan(d.db, principalOf(ctx), ctx.params.id, await bodyOf(ctx, planPatchBody));
  });
  r.delete('/billing-plans/:id', async (ctx) => {
    await deletePlan(d.db, principalOf(ctx), ctx.params.id);
    ctx.status = 204;
  });
  r.put('/orgs/:id/billing-plan', async (ctx) => {
    const b = await bodyOf(ctx, assignPlanBody);
    ctx.body = await assignPlan(d.db, principalOf(ctx), ctx.params.id, b.plan_id, d.settings.clock());
  });
  r.get('/orgs/:id/billing', async (ctx) => {
    ctx.body = await billingPage(d.db, principalOf(ctx), ctx.params.id, parse(periodQuery, ctx.query).period, d.settings);
  });
  r.get('/orgs/:id/billing/statement', async (ctx) => {
    const st = await statement(d.db, principalOf(ctx), ctx.params.id, parse(periodQuery, ctx.query).period, d.settings);
    if (!st) throw new PanelError('not_found', { what: 'statement (the organisation was not billed in that month)' });
    if (wantsCsv(ctx)) sendCsv(ctx, `statement-${st.org_id}-${st.period}`, statementCsv(st));
    else ctx.body = st;
  });
  r.get('/orgs/:id/billing/statements', async (ctx) => {
    ctx.body = await closedStatements(d.db, principalOf(ctx), ctx.params.id);
  });
  r.post('/orgs/:id/billing/close', async (ctx) => {
    const b = await bodyOf(ctx, closeBody);
    const { org, period } = await checkClose(d.db, principalOf(ctx), ctx.params.id, b.period, b.confirm === true, d.settings);
    await runMonthClose(d.temporal, d.settings.taskQueue, org.id, period);
    ctx.body = await statement(d.db, principalOf(ctx), org.id, period, d.settings);
  });
  r.get('/orgs/:id/billing/issued', async (ctx) => {
    if (principalOf(ctx).via !== 'token') throw new PanelError('forbidden', { detail: 'the issued-statements export takes an API token (Authorization: Bearer <token>), not a session' });
    const issued = await issuedStatements(d.db, principalOf(ctx), ctx.params.id, parse(periodQuery, ctx.query).period, d.settings);
    if (wantsCsv(ctx)) sendCsv(ctx, `issued-${issued.org_id}-${issued.period}`, statementsCsv(issued.statements));
    else ctx.body = issued;
  });
  return r;
}
