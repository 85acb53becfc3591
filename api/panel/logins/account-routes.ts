import Router from '@koa/router';
import { z } from 'zod';
import { rolePowers } from '../../../domain/panel/tree';
import type { Db } from '../../../platform/db';
import { accountOf, changeOwnPassword, createToken, listTokens, revokeToken, signIn, signOut, type AuthSettings } from '../../../services/panel/logins/auth';
import { confirmEnrolment, startEnrolment } from '../../../services/panel/logins/two-factor';
import { principalOf, SESSION_COOKIE } from '../shared/auth';
import { bodyOf } from '../shared/http';
import { CSRF_HEADER, csrfToken } from '../shared/csrf';

// Signing in and out, and the caller's own account page: password, two-factor, API tokens.

export const signInBody = z.strictObject({ username: z.string().max(64), password: z.string().max(256), code: z.string().max(32).optional() });
export const passwordBody = z.strictObject({ current_password: z.string().max(256), new_password: z.string().max(256) });
export const codeBody = z.strictObject({ code: z.string().max(32) });
export const tokenBody = z.strictObject({ name: z.string().trim().min(1).max(80) });

export interface AccountDeps {
  db: Db;
  settings: AuthSettings;
  /** the issuer shown in authenticator apps */
  issuer: string;
  /** Secure cookies when the console is served over HTTPS */
  secureCookies: boolean;
}

/** POST /v1/auth/sign-in: the one route that needs no principal. */
export function signInRoutes(d: AccountDeps): Router {
  const r = new Router({ prefix: '/v1/auth' });
  r.post('/sign-in', async (ctx) => {
    const body = await bodyOf(ctx, signInBody);
    const s = await signIn(d.db, d.settings, { ...body, ip: ctx.ip, userAgent: ctx.get('user-agent') });
    // The cookie lives as long as the session may (sessionMaxMs); the server slides and enforces the
    // idle expiry, which the browser never learns of again after sign-in.
    ctx.set(CSRF_HEADER, csrfToken(d.settings.sealingKey, s.token));
    ctx.cookies.set(SESSION_COOKIE, s.token, { httpOnly: true, sameSite: 'strict', secure: d.secureCookies, expires: new Date(Date.now() + d.settings.sessionMaxMs), overwrite: true });
    ctx.body = { login: s.login, expires_at: s.expires_at, must_change_password: s.login.must_change_password };
  });
  return r;
}

export function accountRoutes(d: AccountDeps): Router {
  const r = new Router({ prefix: '/v1' });
  r.post('/auth/sign-out', async (ctx) => {
    await signOut(d.db, principalOf(ctx));
    ctx.cookies.set(SESSION_COOKIE, null, { overwrite: true });
    ctx.status = 204;
  });
  r.get('/account', async (ctx) => {
    const p = principalOf(ctx);
    // Role powers (site.place, php.admin, migration.run) come with the role and the org's place in the tree.
    ctx.body = { login: await accountOf(d.db, p), org_id: p.orgId, org_type: p.orgType, via: p.via, powers: rolePowers(p.role, p.orgType) };
  });
  r.post('/account/password', async (ctx) => {
    const b = await bodyOf(ctx, passwordBody);
    await changeOwnPassword(d.db, principalOf(ctx), b.current_password, b.new_password);
    ctx.status = 204;
  });
  r.post('/account/two-factor', async (ctx) => {
    ctx.body = await startEnrolment(d.db, d.settings.sealingKey, principalOf(ctx), d.issuer);
  });
  r.post('/account/two-factor/confirm', async (ctx) => {
    const b = await bodyOf(ctx, codeBody);
    ctx.body = await confirmEnrolment(d.db, d.settings.sealingKey, principalOf(ctx), b.code.trim());
  });
  r.get('/account/tokens', async (ctx) => {
    ctx.body = { tokens: await listTokens(d.db, principalOf(ctx)) };
  });
  r.post('/account/tokens', async (ctx) => {
    const b = await bodyOf(ctx, tokenBody);
    ctx.status = 201;
    ctx.body = await createToken(d.db, principalOf(ctx), b.name);
  });
  r.delete('/account/tokens/:id', async (ctx) => {
    await revokeToken(d.db, principalOf(ctx), ctx.params.id);
    ctx.status = 204;
  });
  return r;
}
