import type { Context, Next } from 'koa';
import { GatewayError } from '../../../domain/shared/errors';
import { hashKey, keyFormatOf } from '../../../services/keys/key-format';
import type { AuthRecord, AuthStore } from '../../../services/keys/auth-store';
import type { LoggedRequest } from '../keyed/request-log';

/** The key from `Authorization: Bearer`, `x-api-key` or `api-key` (spec 1 section 5). */
export function presentedKey(ctx: Context): string | null {
  const auth = ctx.get('authorization');
  if (auth) {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
    return m ? m[1] : null;
  }
  return ctx.get('x-api-key') || ctx.get('api-key') || null;
}

export function isExpired(rec: AuthRecord, now = Date.now()): boolean {
  return rec.planExpiresAt !== null && rec.planExpiresAt.getTime() <= now;
}

/** Authenticates `gw_ai_` and `rk_live_` keys; sets ctx.state.auth. */
export function authenticate(store: AuthStore) {
  return async (ctx: Context, next: Next) => {
    const key = presentedKey(ctx);
    if (!key) throw new GatewayError('missing_api_key');
    const format = keyFormatOf(key);
    if (format !== 'gw_ai' && format !== 'rk_live') throw new GatewayError('invalid_api_key');
    const rec = await store.byHash(hashKey(key));
    if (!rec) throw new GatewayError('invalid_api_key');
    // The request log (api/gateway/keyed/request-log.ts) learns whose request this is.
    const logged: LoggedRequest | undefined = ctx.state.logged;
    if (logged) {
      logged.keyId = rec.keyId;
      logged.accountId = rec.accountId;
    }
    if (rec.revoked) throw new GatewayError('key_revoked');
    if (!rec.accountActive) throw new GatewayError('account_deactivated');
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
