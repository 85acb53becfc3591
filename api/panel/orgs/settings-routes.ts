import Router from '@koa/router';
import { z } from 'zod';
import type { Db } from '../../../platform/db';
import { withLimitsCascade } from '../../../services/panel/sites/site-limits';
import type { SitesDeps } from '../../../services/panel/sites/sites';
import { getBranding, limitsOf, publicBranding, setBranding, setLimits, setPowers, setRegions } from '../../../services/panel/orgs/settings';
import { principalOf } from '../shared/auth';
import { bodyOf, parse } from '../shared/http';
import { limitsSchema, powersSchema, regionSchema } from '../shared/schemas';

// An org's settings (spec 2 sections 2.1-2.3, 2.7): limits, delegated powers, regions, branding;
// and the public branding of the sign-in page.

/** A DNS hostname of two or more labels, lower-cased; the last label starts with a letter (not an IP address). */
const HOSTNAME = /^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const hostname = z.string().trim().toLowerCase().regex(HOSTNAME, 'must be a DNS hostname such as panel.example.com');

export const brandingBody = z.strictObject({
  display_name: z.string().trim().min(1).max(80).nullable().optional(),
  accent_color: z.string().regex(/^#[0-9a-fA-F]{6}$/, 'must be a colour #rrggbb').toLowerCase().nullable().optional(),
  support_email: z.email('must be an email address').max(254).nullable().optional(),
  login_hostname: hostname.nullable().optional(),
});

export const limitsBody = z.strictObject({ limits: limitsSchema });
export const powersBody = z.strictObject({ powers: powersSchema });
export const publicBrandingQuery = z.strictObject({ hostname: z.string().max(253).optional() });
export const regionsBody = z.strictObject({ preferred_region: regionSchema.nullable().optional(), required_region: regionSchema.nullable().optional() });

export function orgSettingsRoutes(sites: SitesDeps): Router {
  const db = sites.db;
  const r = new Router({ prefix: '/v1/orgs/:id' });
  r.get('/limits', async (ctx) => {
    ctx.body = await limitsOf(db, principalOf(ctx), ctx.params.id);
  });
  r.put('/limits', async (ctx) => {
    const b = await bodyOf(ctx, limitsBody);
    // the sites below get their new limits on their nodes (issue 34)
    ctx.body = await withLimitsCascade(sites, (cascade) => setLimits(db, principalOf(ctx), ctx.params.id, b.limits, cascade));
  });
  r.put('/powers', async (ctx) => {
    const b = await bodyOf(ctx, powersBody);
    ctx.body = await setPowers(db, principalOf(ctx), ctx.params.id, b.powers);
  });
  r.put('/regions', async (ctx) => {
    ctx.body = await setRegions(db, principalOf(ctx), ctx.params.id, await bodyOf(ctx, regionsBody));
  });
  r.get('/branding', async (ctx) => {
    ctx.body = await getBranding(db, principalOf(ctx), ctx.params.id);
  });
  r.put('/branding', async (ctx) => {
    ctx.body = await setBranding(db, principalOf(ctx), ctx.params.id, await bodyOf(ctx, brandingBody));
  });
  return r;
}

/** GET /v1/branding?hostname=HOST: no sign-in, so it answers the four branding fields and nothing else. */
export function publicBrandingRoutes(db: Db): Router {
  const r = new Router({ prefix: '/v1' });
  r.get('/branding', async (ctx) => {
    const q = parse(publicBrandingQuery, ctx.query);
    ctx.body = await publicBranding(db, q.hostname);
  });
  return r;
}
