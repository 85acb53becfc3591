import type { Context, Next } from 'koa';

// CORS for browser clients of /v1 (CORS_ORIGINS; off by default). The admin API and the test-run
// API never answer browsers. Preflights are answered here, before authentication: a browser
// sends them without the key.

/** `*` (any origin) or exact origins (`https://app.example.com`). */
export type CorsOrigins = '*' | string[];

const EXPOSED = 'x-request-id, x-gateway-request-id, x-gateway-cost, x-gateway-cache, retry-after';

export function cors(origins: CorsOrigins) {
  return async (ctx: Context, next: Next) => {
    const origin = ctx.get('origin');
    if (!origin || !(ctx.path === '/v1' || ctx.path.startsWith('/v1/'))) return next();
    const allowed = origins === '*' || origins.includes(origin);
    ctx.vary('Origin');
    if (!allowed) return next(); // no CORS headers: the browser refuses the answer
    ctx.set('access-control-allow-origin', origins === '*' ? '*' : origin);
    ctx.set('access-control-expose-headers', EXPOSED);
    if (ctx.method === 'OPTIONS' && ctx.get('access-control-request-method')) {
      ctx.set('access-control-allow-methods', 'GET, POST, OPTIONS');
      ctx.set('access-control-allow-headers', ctx.get('access-control-request-headers') || 'authorization, content-type');
      ctx.set('access-control-max-age', '600');
      ctx.status = 204;
      return;
    }
    await next();
  };
}
