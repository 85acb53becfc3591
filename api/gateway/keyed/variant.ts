import type { Context, Middleware, Next } from 'koa';
import type { Db } from '../../../platform/db';
import type { Logger } from '../../../platform/logger';
import { GatewayError } from '../../../domain/shared/errors';
import { noteSpendLimitRefusal } from '../../../services/accounts/limit-refusals';
import type { AuthRecord, AuthStore } from '../../../services/keys/auth-store';
import type { CacheInvalidation } from '../../../platform/cache-invalidation';
import { authenticateKeyed } from './authenticate';
import { clientIpResolver } from './client-ip';
import { IpLockout } from '../../../services/keys/lockout';
import { KeyRateLimiter } from '../../../services/keys/rate-limit';
import { RequestLog } from '../../../services/keys/request-log';
import { requestLogging } from './request-log';

export interface KeyedSettings {
  /** wrong-key attempts from one IP within the window that lock it out */
  authFailureLimit: number;
  authFailureWindowMs: number;
  authLockoutMs: number;
  /** proxies (IPs or CIDR blocks) whose X-Forwarded-For is believed */
  trustedProxies: string[];
  requestLogFlushMs: number;
  /** entries older than this are deleted (hourly) */
  requestLogRetentionDays: number;
}

export const KEYED_DEFAULTS: KeyedSettings = {
  authFailureLimit: 20,
  authFailureWindowMs: 60_000,
  authLockoutMs: 300_000,
  trustedProxies: [],
  requestLogFlushMs: 250,
  requestLogRetentionDays: 90,
};

export interface KeyedVariant {
  /** outermost after requestContext: records every request once answered */
  requestLogging: Middleware;
  /** authentication, IP lockout and per-minute limit of every path under /v1/ */
  guard: Middleware;
  requestLog: RequestLog;
  close(): Promise<void>;
}

/** The request log of either variant: written in batches, pruned after its retention. */
export function startRequestLog(db: Db, logger: Logger, s: Pick<KeyedSettings, 'requestLogFlushMs' | 'requestLogRetentionDays' | 'trustedProxies'>) {
  const log = new RequestLog(db, logger, s.requestLogFlushMs, s.requestLogRetentionDays);
  log.startPruning();
  return { log, middleware: requestLogging(log, clientIpResolver(s.trustedProxies)) };
}

/** A request refused for its key's spend limit tells the account (key.spend_limit_reached, once per limit value); the refusal stands either way. */
async function spendLimitEvents(db: Db, logger: Logger, ctx: Context, next: Next): Promise<void> {
  try {
    await next();
  } catch (err) {
    if (err instanceof GatewayError && err.code === 'key_spend_limit_exceeded') {
      const auth: AuthRecord = ctx.state.auth;
      await noteSpendLimitRefusal(db, auth.keyId, ctx.state.requestId).catch((e: Error) => logger.warn({ err: e, key_id: auth.keyId }, 'could not record the spend limit event'));
    }
    throw err;
  }
}

/** The parts of the key-authenticated variant (spec 3 A) one API process needs. */
export async function startKeyedVariant(o: { db: Db; logger: Logger; authStore: AuthStore; invalidation: CacheInvalidation; settings: KeyedSettings }): Promise<KeyedVariant> {
  const s = o.settings;
  const clientIp = clientIpResolver(s.trustedProxies);
  const lockout = new IpLockout(o.db, o.invalidation, { limit: s.authFailureLimit, windowMs: s.authFailureWindowMs, lockoutMs: s.authLockoutMs }, o.logger);
  await lockout.start();
  const { log: requestLog, middleware } = startRequestLog(o.db, o.logger, s);
  const authenticate = authenticateKeyed({ store: o.authStore, lockout, rateLimiter: new KeyRateLimiter(o.db), clientIp });
  return {
    requestLogging: middleware,
    guard: (ctx: Context, next: Next) => (ctx.path === '/v1' || ctx.path.startsWith('/v1/') ? authenticate(ctx, () => spendLimitEvents(o.db, o.logger, ctx, next)) : next()),
    requestLog,
    async close() {
      lockout.stop();
      await requestLog.close();
    },
  };
}
