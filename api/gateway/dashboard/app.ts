import { timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import Router from '@koa/router';
import type { Context, Middleware, Next } from 'koa';
import compose from 'koa-compose';
import type { CacheInvalidation } from '../../../platform/cache-invalidation';
import type { Db } from '../../../platform/db';
import type { Logger } from '../../../platform/logger';
import { sessionOf, signIn, signOut, type DashboardAuthSettings } from '../../../services/dashboard/sessions';
import { KeyChangeAcks } from '../../../services/keys/change-acks';
import { html } from './html';
import { DashboardError, readForm, sessionOfCtx, show } from './http';
import { keyPages } from './keys';
import { requestPages } from './requests';
import { usagePage } from './usage';
import { invitationPages, teamPages } from './team';
import { accountPages } from './account';

// The gateway dashboard (issue 22) under /dashboard on the gateway's port, for account users:
// server-rendered pages, a session cookie (HttpOnly, SameSite=Strict, Path=/dashboard) that names
// a server-side row, and CSRF protection on every POST: the session's token in the form and, when
// the browser sends one, an Origin of this very host.

export interface DashboardDeps {
  db: Db;
  logger: Logger;
  invalidation: CacheInvalidation;
  auth: DashboardAuthSettings;
  variant: 'credits' | 'keyed';
  /** the client's IP for sign-in throttling */
  clientIp: (ctx: Context) => string;
}

export const SESSION_COOKIE = 'gw_dashboard';
const PREFIX = '/dashboard';
const ASSETS: Record<string, { type: string; body: Buffer }> = Object.fromEntries(
  ['dashboard.css', 'dashboard.js'].map((f) => [f, { type: path.extname(f), body: fs.readFileSync(path.join(__dirname, 'assets', f)) }]),
);
const CSP = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

const sameToken = (a: string, b: string) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

/** Errors become a page; security headers on every answer. Runs outside the API's request context, so it logs itself. */
const pages = (logger: Logger) => async (ctx: Context, next: Next) => {
  ctx.set('content-security-policy', CSP);
  ctx.set('x-content-type-options', 'nosniff');
  ctx.set('referrer-policy', 'same-origin');
  try {
    await next();
    if (ctx.body === undefined && ctx.status === 404) throw new DashboardError(404, 'There is no such page.');
  } catch (err) {
    const e = err instanceof DashboardError ? err : null;
    if (!e) logger.error({ err, method: ctx.method, path: ctx.path }, 'dashboard error');
    for (const [k, v] of Object.entries(e?.headers ?? {})) ctx.set(k, v);
    show(ctx, { title: e ? 'Not possible' : 'Something went wrong' }, html`<div class="banner error" role="alert">${e?.message ?? 'An internal error; please try again.'}</div><p><a href="${PREFIX}">Back to the dashboard</a></p>`, e?.status ?? 500);
  }
};

/** Cross-site POSTs are refused: the Origin (when sent) must be this host. */
function sameOrigin(ctx: Context): void {
  const origin = ctx.get('origin');
  if (origin && origin !== 'null') {
    let host: string;
    try {
      host = new URL(origin).host;
    } catch {
      throw new DashboardError(403, 'The request came from another site.');
    }
    if (host !== ctx.host) throw new DashboardError(403, 'The request came from another site.');
  } else if (ctx.get('sec-fetch-site') === 'cross-site') throw new DashboardError(403, 'The request came from another site.');
}

export function createDashboard(deps: DashboardDeps): Middleware {
  const acks = new KeyChangeAcks(deps.db, deps.invalidation);
  const open = new Router({ prefix: PREFIX });
  open.get('/assets/:file', (ctx) => {
    const a = ASSETS[ctx.params.file];
    if (!a) return;
    ctx.type = a.type;
    ctx.set('cache-control', 'public, max-age=300');
    ctx.body = a.body;
  });
  open.get('/sign-in', (ctx) => signInPage(ctx, { notice: ctx.query.joined ? 'Your sign-in is ready: sign in with your email and new password.' : undefined }));
  open.post('/sign-in', async (ctx) => {
    sameOrigin(ctx);
    const form = await readForm(ctx);
    const email = form.get('email') ?? '';
    const r = await signIn(deps.db, deps.auth, { email, password: form.get('password') ?? '', code: form.get('code') ?? undefined, ip: deps.clientIp(ctx) });
    if (r.ok) {
      ctx.cookies.set(SESSION_COOKIE, r.token, { httpOnly: true, sameSite: 'strict', path: PREFIX, secure: ctx.secure, expires: r.expiresAt, overwrite: true });
      ctx.redirect(`${PREFIX}/keys`);
      return;
    }
    if (r.reason === 'throttled') ctx.set('retry-after', String(r.retryAfter));
    const message = { invalid_credentials: 'Wrong email, password or code.', code_required: 'Enter the code from your authenticator app.', throttled: `Too many failed sign-ins; try again in ${Math.ceil((r.retryAfter ?? 60) / 60)} minutes.` }[r.reason];
    signInPage(ctx, { email, message, askCode: r.reason === 'code_required' }, r.reason === 'throttled' ? 429 : r.reason === 'code_required' ? 200 : 401);
  });

  invitationPages(open, { db: deps.db }, sameOrigin);

  const signedIn = new Router({ prefix: PREFIX });
  signedIn.use(async (ctx, next) => {
    const token = ctx.cookies.get(SESSION_COOKIE);
    const session = token ? await sessionOf(deps.db, token) : null;
    if (!session) {
      if (ctx.method === 'GET') return ctx.redirect(`${PREFIX}/sign-in`);
      throw new DashboardError(401, 'Your session has ended; sign in again.');
    }
    ctx.state.dashboard = session;
    if (ctx.method === 'POST') {
      sameOrigin(ctx);
      const form = await readForm(ctx);
      if (!sameToken(form.get('_csrf') ?? '', session.csrfToken)) throw new DashboardError(403, 'The form is out of date (CSRF check); reload the page and try again.');
      ctx.state.form = form;
    }
    await next();
  });
  signedIn.get('/', (ctx) => ctx.redirect(`${PREFIX}/keys`));
  signedIn.post('/sign-out', async (ctx) => {
    await signOut(deps.db, sessionOfCtx(ctx).sessionId);
    ctx.cookies.set(SESSION_COOKIE, '', { httpOnly: true, sameSite: 'strict', path: PREFIX, expires: new Date(0) });
    ctx.redirect(`${PREFIX}/sign-in`);
  });
  keyPages(signedIn, { db: deps.db, acks, variant: deps.variant });
  requestPages(signedIn, { db: deps.db });
  usagePage(signedIn, { db: deps.db });
  teamPages(signedIn, { db: deps.db });
  accountPages(signedIn, { db: deps.db, sealingKey: deps.auth.sealingKey });

  const handle = compose<Context>([pages(deps.logger), open.routes() as Middleware, signedIn.routes() as Middleware]);
  return (ctx, next) => (ctx.path === PREFIX || ctx.path.startsWith(`${PREFIX}/`) ? handle(ctx, async () => {}) : next());
}

function signInPage(ctx: Context, o: { email?: string; message?: string; notice?: string; askCode?: boolean } = {}, status = 200) {
  show(
    ctx,
    { title: 'Sign in' },
    html`<div class="signin">
  ${o.message ? html`<div class="banner error" role="alert">${o.message}</div>` : ''}
  ${o.notice ? html`<div class="banner notice" role="status">${o.notice}</div>` : ''}
  <form class="card" method="post" action="${PREFIX}/sign-in">
    <div><label for="email">Email</label><input id="email" name="email" type="email" autocomplete="username" required value="${o.email ?? ''}"></div>
    <div><label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password" required></div>
    <div><label for="code">Authenticator code <small>(if you set one up)</small></label><input id="code" name="code" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" ${o.askCode ? html`autofocus` : ''}></div>
    <button type="submit">Sign in</button>
  </form>
</div>`,
    status,
  );
}
