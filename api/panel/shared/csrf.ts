import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Context } from 'koa';
import { PanelError } from '../../../domain/panel/errors';

// CSRF protection of cookie-authenticated changes (the console). The token is an HMAC of the
// session token, so it needs no storage, dies with the session and cannot be planted by another
// site; the server hands it out in the `x-csrf-token` response header (sign-in and every
// cookie-authenticated response) and requires it back in the same header on every change.
// Bearer-token requests carry no ambient credential, so they are exempt.

export const CSRF_HEADER = 'x-csrf-token';

export const csrfToken = (key: Buffer, sessionToken: string): string => createHmac('sha256', key).update(`csrf\0${sessionToken}`).digest('base64url');

const SAFE = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Sends the session's CSRF token; on a change, refuses a missing or wrong one (403 forbidden). */
export function checkCsrf(ctx: Context, key: Buffer, sessionToken: string): void {
  const expected = csrfToken(key, sessionToken);
  ctx.set(CSRF_HEADER, expected);
  if (SAFE.has(ctx.method)) return;
  const sent = Buffer.from(ctx.get(CSRF_HEADER));
  const want = Buffer.from(expected);
  if (sent.length !== want.length || !timingSafeEqual(sent, want)) {
    throw new PanelError('forbidden', { detail: `a change made with the session cookie needs the ${CSRF_HEADER} header of this session (the console sends it; API clients use a Bearer token)` });
  }
}
