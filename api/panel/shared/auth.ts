import type { Context, Next } from 'koa';
import { PanelError } from '../../../domain/panel/errors';
import type { Db } from '../../../platform/db';
import { sessionPrincipal, tokenPrincipal, type AuthSettings, type Principal } from '../../../services/panel/logins/auth';
import { twoFactorRoles } from '../../../services/panel/logins/two-factor-policy';
import { checkCsrf } from './csrf';

export const SESSION_COOKIE = 'panel_session';

/** What a login may still do while its password is temporary. */
const PASSWORD_CHANGE_ALLOWS = ['GET /v1/account', 'POST /v1/account/password', 'POST /v1/auth/sign-out'];

/** What a login of a role the two-factor policy names may do before it enrols (spec 2 section 5.2). */
const TWO_FACTOR_SETUP_ALLOWS = [...PASSWORD_CHANGE_ALLOWS, 'POST /v1/account/two-factor', 'POST /v1/account/two-factor/confirm', 'GET /v1/account/tokens', 'DELETE /v1/account/tokens/*'];

/** Changes a read_only login may still make: its own credentials only. */
const READ_ONLY_ALLOWS = [...TWO_FACTOR_SETUP_ALLOWS, 'POST /v1/account/tokens'];

const allows = (list: string[], method: string, path: string) =>
  list.some((entry) => {
    const [m, p] = entry.split(' ');
    return m === method && (p.endsWith('/*') ? path.startsWith(p.slice(0, -1)) && path.length > p.length - 1 : path === p);
  });

export interface PanelAuthOptions {
  db: Db;
  settings: AuthSettings;
}

/**
 * Resolves the caller from the session cookie or `Authorization: Bearer <API token>` on every
 * request (no cache, so suspensions apply on the next request on any process), then applies what
 * limits it: a temporary password, two-factor required by role, read_only.
 */
export function panelAuth(o: PanelAuthOptions) {
  return async (ctx: Context, next: Next) => {
    const bearer = /^Bearer\s+(\S+)$/i.exec(ctx.get('authorization'))?.[1];
    const cookie = ctx.cookies.get(SESSION_COOKIE);
    let principal: Principal | null = null;
    if (bearer) principal = await tokenPrincipal(o.db, bearer);
    else if (cookie) principal = await sessionPrincipal(o.db, o.settings, cookie);
    if (!principal) throw new PanelError('unauthenticated');
    if (!bearer && cookie) checkCsrf(ctx, o.settings.sealingKey, cookie);
    principal.requestId = ctx.state.requestId;
    ctx.state.principal = principal;
    const { method, path } = ctx;
    const reading = method === 'GET' || method === 'HEAD';
    if (principal.mustChangePassword && !allows(PASSWORD_CHANGE_ALLOWS, method, path)) throw new PanelError('password_change_required');
    // the platform-wide policy as stored now (no cache: a change binds every process on the next request)
    if (!principal.twoFactor && !allows(TWO_FACTOR_SETUP_ALLOWS, method, path) && (await twoFactorRoles(o.db)).includes(principal.role)) {
      throw new PanelError('two_factor_required', { role: principal.role });
    }
    if (principal.role === 'read_only' && !reading && !allows(READ_ONLY_ALLOWS, method, path)) {
      throw new PanelError('forbidden', { detail: 'a read_only login changes nothing' });
    }
    await next();
  };
}

export const principalOf = (ctx: Context): Principal => ctx.state.principal as Principal;
