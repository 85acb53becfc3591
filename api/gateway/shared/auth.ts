import type { Context, Next } from 'koa';
import { GatewayError } from '../../../domain/shared/errors';
import { keyFormatOf } from '../../../services/keys/key-format';
import type { AuthRecord, AuthStore } from '../../../services/keys/auth-store';
import { authenticateKey, type KeyRule } from './key-auth';

// Authentication of the credits variant (spec 1 section 5): `gw_ai_` and `rk_live_` keys by
// Bearer, `x-api-key` or `api-key`; the core (key-auth.ts) does the rest.

export function isExpired(rec: AuthRecord, now = Date.now()): boolean {
  return rec.planExpiresAt !== null && rec.planExpiresAt.getTime() <= now;
}

const CREDITS_RULE: KeyRule = {
  headers: ['x-api-key', 'api-key'],
  missing: () => new GatewayError('missing_api_key'),
  otherScheme: 'missing',
  accepts: (key) => {
    const format = keyFormatOf(key);
    return format === 'gw_ai' || format === 'rk_live';
  },
  wrongKey: () => new GatewayError('invalid_api_key'),
  refused: (rec) => (rec.revoked ? new GatewayError('key_revoked') : null),
};

/** Authenticates `gw_ai_` and `rk_live_` keys; sets ctx.state.auth. */
export function authenticate(store: AuthStore) {
  return async (ctx: Context, next: Next) => {
    ctx.state.auth = await authenticateKey(ctx, store, CREDITS_RULE);
    await next();
  };
}
