import type { Context, Next } from 'koa';
import { z } from 'zod';
import { GatewayError } from '../../domain/shared/errors';
import { Conflict, InvalidInput, NotFound } from '../../services/shared/errors';

/** Service errors become the envelope's: a bad value 400 naming it, a missing row 404, a conflict 409. */
export async function serviceErrors(_ctx: Context, next: Next) {
  try {
    await next();
  } catch (err) {
    if (err instanceof InvalidInput) throw new GatewayError('invalid_parameter', { param: err.param, detail: err.message });
    if (err instanceof NotFound) throw new GatewayError('not_found', { detail: err.message });
    if (err instanceof Conflict) throw new GatewayError('conflict', { detail: err.message });
    if (err instanceof z.ZodError) {
      const i = err.issues[0];
      throw new GatewayError('invalid_parameter', { param: i.path.join('.') || undefined, detail: i.message });
    }
    throw err;
  }
}
