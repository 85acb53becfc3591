import type { Context, Next } from 'koa';
import { GatewayError } from '../../../domain/shared/errors';
import type { AuthStore } from '../../../services/keys/auth-store';
import type { IpLockout } from '../../../services/keys/lockout';
import type { KeyRateLimiter } from '../../../services/keys/rate-limit';
import { authenticateKey, type KeyRule } from '../shared/key-auth';
import type { LoggedRequest } from './request-log';

/** `mt-` followed by 43 characters of A-Z a-z 0-9 _ - (spec 3 A 2). */
export const MT_KEY = /^mt-[A-Za-z0-9_-]{43}$/;

export interface KeyedAuthDeps {
  store: AuthStore;
  lockout: IpLockout;
  rateLimiter: KeyRateLimiter;
  clientIp: (ctx: Context) => string;
}

/**
 * Authentication of the keyed variant, for every path under /v1/. In order: a locked-out IP
 * gets 429 (a lookup in memory); then the core (shared/key-auth.ts): a key of the wrong format
 * 401 at once, before any database work, an unknown, revoked or expired key 401; then the key's
 * per-minute limit (shared, one statement). Wrong keys count towards the IP's lockout after the
 * answer has gone out.
 */
export function authenticateKeyed(deps: KeyedAuthDeps) {
  const rule: KeyRule = {
    headers: ['x-api-key'],
    // Spec 3 has one 401 code: no key is a key not matching the format. It is no guess, so it
    // does not count towards the IP lockout; an Authorization of another scheme does.
    missing: () => new GatewayError('invalid_api_key'),
    otherScheme: 'wrong',
    accepts: (key) => MT_KEY.test(key),
    wrongKey: (ctx) => {
      const ip = ipOf(ctx);
      deps.lockout.recordFailure(ip);
      ctx.res.once('close', () => void deps.lockout.persistFailure(ip));
      return new GatewayError('invalid_api_key');
    },
    refused: (rec, now) => (rec.revoked || (rec.keyExpiresAt !== null && rec.keyExpiresAt.getTime() <= now) ? new GatewayError('invalid_api_key') : null),
  };
  const ipOf = (ctx: Context) => (ctx.state.logged as LoggedRequest | undefined)?.ip ?? deps.clientIp(ctx);

  return async (ctx: Context, next: Next) => {
    const lockedMs = deps.lockout.lockedFor(ipOf(ctx));
    if (lockedMs > 0) {
      const retryAfter = String(Math.ceil(lockedMs / 1000));
      throw new GatewayError('rate_limit_exceeded', { retry_after: retryAfter }, { 'retry-after': retryAfter });
    }
    const auth = await authenticateKey(ctx, deps.store, rule);
    if (auth.rpm !== null) await deps.rateLimiter.take(auth.keyId, auth.rpm);
    ctx.state.auth = auth;
    await next();
  };
}
