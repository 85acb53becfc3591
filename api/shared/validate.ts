import type { z } from 'zod';
import { GatewayError, type ErrorCode } from '../../domain/shared/errors';

// Request validation for every API: a zod schema's refusal becomes ONE 400 in the envelope, its
// `param` naming the first refused field and its message listing every one with what is accepted.

interface Refusal {
  code: Extract<ErrorCode, 'unsupported_parameter' | 'missing_required_parameter' | 'invalid_parameter'>;
  param: string | undefined;
  detail: string;
}

// Unknown names first (spec 1 section 7), then missing ones, then bad values.
const RANK: Record<Refusal['code'], number> = { unsupported_parameter: 0, missing_required_parameter: 1, invalid_parameter: 2 };

/** Parses with a zod schema; throws the 400 of every refused field at once. */
export function validate<S extends z.ZodType>(schema: S, input: unknown): z.infer<S> {
  const r = schema.safeParse(input);
  if (r.success) return r.data;
  const seen = new Set<string>();
  const refusals = r.error.issues
    .flatMap((i) => refusalsOf(i, [], input))
    .filter((x) => !seen.has(x.param ?? '') && seen.add(x.param ?? ''))
    .sort((a, b) => RANK[a.code] - RANK[b.code]);
  const [first, ...rest] = refusals;
  const also = rest.length ? `Also refused: ${rest.map(listed).join('; ')}.` : undefined;
  throw new GatewayError(first.code, { param: first.param, detail: first.detail, also });
}

const listed = (r: Refusal) => (r.code === 'unsupported_parameter' ? `'${r.param}' (not accepted)` : r.code === 'missing_required_parameter' ? `'${r.param}' (missing)` : `'${r.param}' (${r.detail})`);

function refusalsOf(issue: z.core.$ZodIssue, prefix: PropertyKey[], input: unknown): Refusal[] {
  const path = [...prefix, ...issue.path];
  const param = path.map(String).join('.') || undefined;
  const value = valueAt(input, path);
  switch (issue.code) {
    case 'unrecognized_keys':
      return issue.keys.map((k) => ({ code: 'unsupported_parameter', param: [...path, k].map(String).join('.'), detail: 'not accepted by this endpoint' }));
    case 'invalid_type':
      if (value === undefined) return [{ code: 'missing_required_parameter', param, detail: `expected ${issue.expected}` }];
      return [{ code: 'invalid_parameter', param, detail: custom(issue) ?? `expected ${issue.expected}, got ${kind(value)}` }];
    case 'invalid_value':
      return [{ code: 'invalid_parameter', param, detail: custom(issue) ?? `expected ${oneOf(issue.values)}` }];
    case 'invalid_union':
      return unionRefusals(issue, path, param, value, input);
    case 'too_big':
    case 'too_small': {
      const bound = issue.code === 'too_big' ? `at most ${issue.maximum}` : `at least ${issue.minimum}`;
      const unit = issue.origin === 'array' || issue.origin === 'set' ? ' items' : issue.origin === 'string' ? ' characters' : '';
      return [{ code: 'invalid_parameter', param, detail: custom(issue) ?? `${bound}${unit}` }];
    }
    default:
      return [{ code: 'invalid_parameter', param, detail: issue.message }];
  }
}

/**
 * A failed union, described by what the value most likely meant (never a bare "Invalid input"):
 * the branch whose discriminator (a literal field such as `type` or `role`) matched, else the
 * discriminator's accepted values, else the expected types, else the branch that came furthest.
 */
function unionRefusals(issue: z.core.$ZodIssueInvalidUnion, path: PropertyKey[], param: string | undefined, value: unknown, input: unknown): Refusal[] {
  const own = custom(issue);
  if (own) return [{ code: 'invalid_parameter', param, detail: own }];
  const options = (issue as { options?: unknown[] }).options; // discriminatedUnion
  if (options) return [{ code: value === undefined ? 'missing_required_parameter' : 'invalid_parameter', param, detail: `expected ${oneOf(options)}` }];
  const branches = issue.errors.filter((b) => b.length > 0);
  const key = (p: PropertyKey[]) => p.map(String).join('.');
  const literalMisses = (b: z.core.$ZodIssue[]) => b.filter((i): i is z.core.$ZodIssueInvalidValue => i.code === 'invalid_value');
  const discriminators = new Set(branches.flatMap((b) => literalMisses(b).map((i) => key(i.path))));
  if (discriminators.size > 0) {
    const matched = branches.find((b) => !literalMisses(b).some((i) => discriminators.has(key(i.path))));
    if (matched) return matched.flatMap((i) => refusalsOf(i, path, input));
    const common = [...discriminators].find((d) => branches.every((b) => literalMisses(b).some((i) => key(i.path) === d)));
    if (common !== undefined) {
      const misses = branches.flatMap((b) => literalMisses(b).filter((i) => key(i.path) === common));
      const at = [...path, ...misses[0].path];
      const values = [...new Set(misses.flatMap((i) => i.values))];
      return [{ code: valueAt(input, at) === undefined ? 'missing_required_parameter' : 'invalid_parameter', param: key(at), detail: `expected ${oneOf(values)}` }];
    }
  }
  const typeOnly = branches.every((b) => b.length === 1 && b[0].code === 'invalid_type' && b[0].path.length === 0);
  if (branches.length === 0 || typeOnly) {
    const expected = [...new Set(branches.map((b) => (b[0] as { expected?: string }).expected ?? 'another value'))];
    return [{ code: value === undefined ? 'missing_required_parameter' : 'invalid_parameter', param, detail: `expected ${expected.join(' or ')}, got ${kind(value)}` }];
  }
  // the branch whose issues lie deepest matched the value's shape best
  const depth = (b: z.core.$ZodIssue[]) => Math.max(...b.map((i) => i.path.length));
  const best = branches.reduce((a, b) => (depth(b) > depth(a) ? b : a));
  return best.flatMap((i) => refusalsOf(i, path, input));
}

/** the issue's own message when the schema set one (zod's own start with these words) */
const custom = (issue: z.core.$ZodIssue) => (/^(Invalid|Too (big|small)|Unrecognized)\b/.test(issue.message) ? undefined : issue.message);

const quoted = (v: unknown) => (typeof v === 'string' ? `'${v}'` : String(v));
const oneOf = (values: readonly unknown[]) => (values.length === 1 ? quoted(values[0]) : `one of ${values.map(quoted).join(', ')}`);

const kind = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);

function valueAt(input: unknown, path: PropertyKey[]): unknown {
  let v = input;
  for (const k of path) v = v !== null && typeof v === 'object' ? (v as Record<PropertyKey, unknown>)[k] : undefined;
  return v;
}
