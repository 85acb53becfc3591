import type { Context, Next } from 'koa';
import { GatewayError } from '../../../domain/shared/errors';
import { preciseNow, type RequestLog } from '../../../services/keys/request-log';

const DECIMAL = /^\d{1,24}(\.\d{1,12})?$/;

export interface LoggedRequest {
  /** the client IP as the lockout sees it */
  ip: string;
  keyId: string | null;
  accountId: string | null;
  model: string | null;
  errorCode: string | null;
}

/**
 * Records every request (except /healthz, /readyz and the admin API) once its response is finished or
 * the client went away: request id, key, model, status, latency, and the charge when the answer
 * showed one (`x-gateway-cost`). Must run inside requestContext (it needs the request id) and
 * outside authentication (401s and 429s are recorded too).
 */
export function requestLogging(log: RequestLog, clientIp: (ctx: Context) => string) {
  return async (ctx: Context, next: Next) => {
    if (ctx.path === '/healthz' || ctx.path === '/readyz' || ctx.path === '/admin' || ctx.path.startsWith('/admin/')) return next();
    const started = process.hrtime.bigint();
    const createdAt = preciseNow();
    const entry: LoggedRequest = { ip: clientIp(ctx), keyId: null, accountId: null, model: null, errorCode: null };
    ctx.state.logged = entry;
    ctx.res.once('close', () => {
      const res = ctx.res;
      const cost = String(res.getHeader('x-gateway-cost') ?? '');
      const body = ctx.body as { error?: { code?: unknown } } | undefined;
      log.record({
        id: ctx.state.requestId,
        key_id: entry.keyId,
        account_id: entry.accountId,
        method: ctx.method,
        path: ctx.path.slice(0, 500),
        model: entry.model?.slice(0, 200) ?? null,
        // A client that went away before the answer was complete: 499, as nginx logs it.
        status: res.writableFinished ? res.statusCode : 499,
        latency_ms: Math.round(Number(process.hrtime.bigint() - started) / 1e6),
        cost: DECIMAL.test(cost) ? cost : null,
        ip: entry.ip,
        error_code: res.statusCode < 400 ? null : (entry.errorCode ?? (typeof body?.error?.code === 'string' ? body.error.code : null)),
        created_at: createdAt,
      });
    });
    try {
      await next();
    } catch (err) {
      entry.errorCode = err instanceof GatewayError ? err.code : 'internal_error';
      throw err;
    }
  };
}
