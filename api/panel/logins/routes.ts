import Router from '@koa/router';
import { z } from 'zod';
import { ROLES } from '../../../domain/panel/tree';
import type { Db } from '../../../platform/db';
import { createLogin, deleteLogin, listLogins, removeTwoFactor, resetPassword, setLoginStatus } from '../../../services/panel/logins/logins';
import { getTwoFactorPolicy, setTwoFactorPolicy } from '../../../services/panel/logins/two-factor-policy';
import { principalOf } from '../shared/auth';
import { bodyOf } from '../shared/http';

// Logins of the orgs below the caller (spec 2 section 2.5): the level above manages them. And the
// platform-wide two-factor policy per role (spec 2 section 5.2), set by a platform_admin.

export const createBody = z.strictObject({ username: z.string().max(64), password: z.string().max(256), role: z.enum(ROLES).optional() });
export const resetBody = z.strictObject({ password: z.string().max(256) });
export const twoFactorPolicyBody = z.strictObject({ require_roles: z.array(z.string().max(32)).max(ROLES.length * 2) });

export function loginRoutes(db: Db): Router {
  const r = new Router({ prefix: '/v1' });
  r.get('/orgs/:id/logins', async (ctx) => {
    ctx.body = { logins: await listLogins(db, principalOf(ctx), ctx.params.id) };
  });
  r.post('/orgs/:id/logins', async (ctx) => {
    const b = await bodyOf(ctx, createBody);
    ctx.status = 201;
    ctx.body = await createLogin(db, principalOf(ctx), ctx.params.id, b);
  });
  r.post('/logins/:id/suspend', async (ctx) => {
    ctx.body = await setLoginStatus(db, principalOf(ctx), ctx.params.id, 'suspended');
  });
  r.post('/logins/:id/reactivate', async (ctx) => {
    ctx.body = await setLoginStatus(db, principalOf(ctx), ctx.params.id, 'active');
  });
  r.post('/logins/:id/reset-password', async (ctx) => {
    const b = await bodyOf(ctx, resetBody);
    ctx.body = await resetPassword(db, principalOf(ctx), ctx.params.id, b.password);
  });
  r.delete('/logins/:id/two-factor', async (ctx) => {
    ctx.body = await removeTwoFactor(db, principalOf(ctx), ctx.params.id);
  });
  r.get('/platform/two-factor-policy', async (ctx) => {
    ctx.body = await getTwoFactorPolicy(db, principalOf(ctx));
  });
  r.put('/platform/two-factor-policy', async (ctx) => {
    const b = await bodyOf(ctx, twoFactorPolicyBody);
    ctx.body = await setTwoFactorPolicy(db, principalOf(ctx), b.require_roles);
  });
  r.delete('/logins/:id', async (ctx) => {
    await deleteLogin(db, principalOf(ctx), ctx.params.id);
    ctx.status = 204;
  });
  return r;
}
