import type { Context } from 'koa';
import getRawBody from 'raw-body';
import type { DashboardSession } from '../../../services/dashboard/sessions';
import { html, page, type PageChrome } from './html';

/** A refusal the dashboard shows as a page with this status. */
export class DashboardError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/** A form body (application/x-www-form-urlencoded, at most 64 KB). */
export async function readForm(ctx: Context): Promise<URLSearchParams> {
  if (ctx.request.type !== 'application/x-www-form-urlencoded') throw new DashboardError(415, 'Expected a form (application/x-www-form-urlencoded).');
  try {
    return new URLSearchParams(await getRawBody(ctx.req, { limit: 64 * 1024, encoding: 'utf8', length: ctx.get('content-length') || undefined }));
  } catch {
    throw new DashboardError(413, 'The form could not be read (at most 64 KB).');
  }
}

export const sessionOfCtx = (ctx: Context): DashboardSession => ctx.state.dashboard as DashboardSession;

/** Renders a page of the signed-in user; nothing of it is cached. */
export function show(ctx: Context, chrome: Omit<PageChrome, 'user'>, content: ReturnType<typeof html>, status = 200): void {
  const s = ctx.state.dashboard as DashboardSession | undefined;
  ctx.status = status;
  ctx.type = 'html';
  ctx.set('cache-control', 'no-store');
  ctx.body = page({ ...chrome, user: s ? { email: s.email, role: s.role, csrfToken: s.csrfToken } : undefined }, content);
}

/** Owners manage keys; members only look. */
export function requireOwner(ctx: Context): DashboardSession {
  const s = sessionOfCtx(ctx);
  if (s.role !== 'owner') throw new DashboardError(403, 'Only an owner of the account can change its keys.');
  return s;
}
