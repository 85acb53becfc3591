import Router from '@koa/router';
import type { Context, Next } from 'koa';
import { z } from 'zod';
import { SEVERITIES } from '../../../domain/panel/alerts';
import { PanelError } from '../../../domain/panel/errors';
import { isoInstant } from '../../../domain/shared/instant';
import type { Db } from '../../../platform/db';
import { getAlert, listAlerts, moveAlert } from '../../../services/panel/alerts/alerts';
import { changeRule, effectiveRules, restoreRule, ruleView } from '../../../services/panel/alerts/rules';
import { nodeChart } from '../../../services/panel/alerts/samples';
import { principalOf } from '../shared/auth';
import { bodyOf, parse } from '../shared/http';

// Alerts, alert rules and node metrics (spec 2 sections 2.6, 3, 4.2; issue 17 items 1-3):
//   GET  /v1/alerts[?state&node&severity&limit&before]   alerts the caller sees
//   GET  /v1/alerts/{id}                                  with events, related alerts, chart window
//   POST /v1/alerts/{id}/acknowledge | /resolve           {note?}
//   GET  /v1/alert-rules, PATCH /v1/alert-rules/{key}, POST /v1/alert-rules/{key}/restore   (root only)
//   GET  /v1/cluster/nodes/{node}/metrics?from&to&step                                       (root only)
// Without -metrics-interval nothing is sampled and no alert exists: reads say so in
// `metrics_sampling: false` and a message; changes are refused with conflict.

export interface AlertRouteOptions {
  db: Db;
  /** -metrics-interval; null: sampling (and so alerting) is off */
  metricsIntervalMs: number | null;
}

export const SAMPLING_OFF = 'metrics sampling is off (panel-api runs without -metrics-interval), so no samples are taken and no alerts exist';

function platformOnly(ctx: Context, next: Next) {
  if (principalOf(ctx).orgType !== 'platform') throw new PanelError('route_not_found', { method: ctx.method, path: ctx.path });
  return next();
}

export const noteBody = z.strictObject({ note: z.string().trim().min(1).max(2000).optional() });
export const listQuery = z.object({
  state: z.enum(['open', 'acknowledged', 'resolved', 'unresolved']).optional(),
  node: z.string().max(63).optional(),
  severity: z.enum(SEVERITIES as [string, ...string[]]).optional(),
  limit: z.coerce.number().int().min(1).max(500).default(100),
  before: isoInstant.optional(),
});
export const ruleChange = z.strictObject({
  threshold: z.number().optional(),
  for_seconds: z.number().int().optional(),
  reopen_seconds: z.number().int().optional(),
  severity: z.enum(['warning', 'critical']).optional(),
  enabled: z.boolean().optional(),
});
export const chartQuery = z.object({ from: z.string().optional(), to: z.string().optional(), step: z.string().optional() });

export function alertRoutes(o: AlertRouteOptions): Router {
  const r = new Router({ prefix: '/v1' });
  const sampling = { metrics_sampling: o.metricsIntervalMs !== null, metrics_interval_seconds: o.metricsIntervalMs === null ? null : o.metricsIntervalMs / 1000 };
  const off = sampling.metrics_sampling ? {} : { message: SAMPLING_OFF };
  const requireSampling = () => {
    if (!sampling.metrics_sampling) throw new PanelError('conflict', { detail: SAMPLING_OFF });
  };

  r.get('/alerts', async (ctx) => {
    const f = parse(listQuery, ctx.query);
    ctx.body = { ...sampling, ...off, ...(await listAlerts(o.db, principalOf(ctx), f as Parameters<typeof listAlerts>[2])) };
  });
  r.get('/alerts/:id', async (ctx) => {
    ctx.body = await getAlert(o.db, principalOf(ctx), ctx.params.id);
  });
  for (const [action, to] of [
    ['acknowledge', 'acknowledged'],
    ['resolve', 'resolved'],
  ] as const) {
    r.post(`/alerts/:id/${action}`, async (ctx) => {
      const b = await bodyOf(ctx, noteBody);
      ctx.body = await moveAlert(o.db, principalOf(ctx), ctx.params.id, to, b.note ?? null);
    });
  }

  r.get('/alert-rules', platformOnly, async (ctx) => {
    ctx.body = { ...sampling, ...off, rules: (await effectiveRules(o.db)).map(ruleView) };
  });
  r.patch('/alert-rules/:key', platformOnly, async (ctx) => {
    const b = await bodyOf(ctx, ruleChange);
    requireSampling();
    ctx.body = await changeRule(o.db, principalOf(ctx), ctx.params.key, b);
  });
  r.post('/alert-rules/:key/restore', platformOnly, async (ctx) => {
    requireSampling();
    ctx.body = await restoreRule(o.db, principalOf(ctx), ctx.params.key);
  });

  r.get('/cluster/nodes/:name/metrics', platformOnly, async (ctx) => {
    const c = parse(chartQuery, ctx.query);
    if (!sampling.metrics_sampling) {
      ctx.body = { ...sampling, ...off, node: ctx.params.name, points: [] };
      return;
    }
    ctx.body = { ...sampling, ...(await nodeChart(o.db, ctx.params.name, c)) };
  });
  return r;
}
