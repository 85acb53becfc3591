import type { Context } from 'koa';
import { GatewayError } from '../../../domain/shared/errors';
import { hashKey } from '../../../services/keys/key-format';
import type { AuthRecord, AuthStore } from '../../../services/keys/auth-store';
import type { LoggedRequest } from '../keyed/request-log';

// The one key-authentication core of both gateway variants: read the key from the request, look
// it up through the cached AuthStore, check its status, return the principal. Each variant
// (shared/auth.ts, keyed/authenticate.ts) states its rule and adds its own checks around this.

export interface KeyRule {
  /** headers read, in order, when there is no `Authorization: Bearer` */
  headers: readonly string[];
  /** the error for a request that presents no key */
  missing: () => GatewayError;
  /** an Authorization header of another scheme (and no key header): no key, or a wrong one */
  otherScheme: 'missing' | 'wrong';
  /** a key this variant issues (a format check, before any database work) */
  accepts: (key: string) => boolean;
  /** the error for a key of the wrong format or unknown (the keyed variant counts it towards a lockout) */
  wrongKey: (ctx: Context) => GatewayError;
  /** the error for a key that exists but may not be used (revoked, expired), or null */
  refused: (rec: AuthRecord, now: number) => GatewayError | null;
}

/**
 * The key from `Authorization: Bearer <key>`, else from the given headers; '' when only an
 * Authorization header of another scheme came, null when nothing did.
 */
export function presentedKey(ctx: Context, headers: readonly string[]): string | null {
  const authorization = ctx.get('authorization');
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(authorization)?.[1];
  if (bearer) return bearer;
  for (const h of headers) if (ctx.get(h)) return ctx.get(h);
  return authorization ? '' : null;
}

/** Authenticates the request's key by the rule; tells the request log whose request it is. */
export async function authenticateKey(ctx: Context, store: AuthStore, rule: KeyRule): Promise<AuthRecord> {
  const key = presentedKey(ctx, rule.headers);
  if (key === null || (key === '' && rule.otherScheme === 'missing')) throw rule.missing();
  if (!rule.accepts(key)) throw rule.wrongKey(ctx);
  const rec = await store.byHash(hashKey(key));
  if (!rec) throw rule.wrongKey(ctx);
  // The request log (api/gateway/keyed/request-log.ts) learns whose request this is, refused or not.
  const logged: LoggedRequest | undefined = ctx.state.logged;
  if (logged) {
    logged.keyId = rec.keyId;
    logged.accountId = rec.accountId;
  }
  const refusal = rule.refused(rec, Date.now());
  if (refusal) throw refusal;
  if (!rec.accountActive) throw new GatewayError('account_deactivated');
  return {
    ...rec,
    noteModel: (model) => {
      if (logged) logged.model = model;
    },
  };
}
