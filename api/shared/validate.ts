import type { z } from 'zod';
import { GatewayError } from '../../domain/shared/errors';

/** Parses with a zod schema; the first issue becomes a 400 in the envelope, naming the parameter. */
export function validate<S extends z.ZodType>(schema: S, input: unknown): z.infer<S> {
  const r = schema.safeParse(input);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  const path = issue.path.map(String);
  if (issue.code === 'unrecognized_keys') {
    // Spec 1 section 7: an unknown parameter is `unsupported_parameter`, `param` naming it.
    throw new GatewayError('unsupported_parameter', { param: [...path, issue.keys[0]].join('.'), detail: 'not accepted by this endpoint' });
  }
  const param = path.join('.') || undefined;
  if (issue.code === 'invalid_type' && valueAt(input, issue.path) === undefined) {
    throw new GatewayError('missing_required_parameter', { param });
  }
  throw new GatewayError('invalid_parameter', { param, detail: issue.message });
}

function valueAt(input: unknown, path: PropertyKey[]): unknown {
  let v = input;
  for (const k of path) v = v !== null && typeof v === 'object' ? (v as Record<PropertyKey, unknown>)[k] : undefined;
  return v;
}
