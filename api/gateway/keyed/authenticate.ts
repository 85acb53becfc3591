import type { Context, Next } from 'koa';
import { GatewayError } from '../../../domain/shared/errors';
import { hashKey } from '../../../services/keys/key-format';
import type { AuthRecord, AuthStore } from '../../../services/keys/auth-store';
import type { IpLockout } from '../../../services/keys/lockout';
import type { KeyRateLimiter } from '../../../services/keys/rate-limit';
import type { LoggedRequest } from './request-log';

/** `mt-` followed by 43 characters of A-Z a-z 0-9 _ - (spec 3 A 2). */
export const MT_KEY = /^mt-[A-Za-z0-9_-]{43}$/;

/**
 * The key from `Authorization: Bearer` or `x-api-key` (spec 3 A 5.1). An Authorization header
 * of another scheme with no x-api-key is a wrong key (''), not a missing one.
 */
export function keyedKey(ctx: Context): string | null {
  const authorization = ctx.get('authorization');
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(authorization)?.[1];
  return bearer ?? (ctx.get('x-api-key') || (authorization ? '' : null));
}

export interface KeyedAuthDeps {
  store: AuthStore;
  lockout: IpLockout;
  rateLimiter: KeyRateLimiter;
  clientIp: (ctx: Context) => string;
}

/**
 * Authentication of the keyed variant, for every path under /v1/. In order: a locked-out IP
 * gets 429 (a lookup in memory); a key of the wrong format 401 at once, before any database
 * work; an unknown, revoked or expired key 401; then the key's per-minute limit (shared, one
 * statement). Wrong keys count towards the IP's lockout after the answer has gone out.
 */
export function authenticateKeyed(deps: KeyedAuthDeps) {
  const wrongKey = (ctx: Context, ip: string) => {
    deps.lockout.recordFailure(ip);
    ctx.res.once('close', () => void deps.lockout.persistFailure(ip));
    return new GatewayError('invalid_api_key');
  };

  return async (ctx: Context, next: Next) => {
    const logged: LoggedRequest | undefined = ctx.state.logged;
    const ip = logged?.ip ?? deps.clientIp(ctx);
    const lockedMs = deps.lockout.lockedFor(ip);
    if (lockedMs > 0) {
      const retryAfter = String(Math.ceil(lockedMs / 1000));
      throw new GatewayError('rate_limit_exceeded', { retry_after: retryAfter }, { 'retry-after': retryAfter });
    }
    const key = keyedKey(ctx);
    // Spec 3 has one 401 code: no key is a key not matching the format. It is no guess, so it
    // does not count towards the IP lockout.
    if (key === null) throw new GatewayError('invalid_api_key');
    if (!MT_KEY.test(key)) throw wrongKey(ctx, ip);

    const rec = await deps.store.byHash(hashKey(key));
    if (!rec) throw wrongKey(ctx, ip);
    if (logged) {
      logged.keyId = rec.keyId;
      logged.accountId = rec.accountId;
    }
    if (rec.revoked || (rec.keyExpiresAt !== null && rec.keyExpiresAt.getTime() <= Date.now())) throw new GatewayError('invalid_api_key');
    if (!rec.accountActive) throw new GatewayError('account_deactivated');
    if (rec.rpm !== null) await deps.rateLimiter.take(rec.keyId, rec.rpm);

    const auth: AuthRecord = {
      ...rec,
      noteModel: (model) => {
        if (logged) logged.model = model;
      },
    };
    ctx.state.auth = auth;
    await next();
  };
}
