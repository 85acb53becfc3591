import { z } from 'zod';

// A case's json_schema assertion as a zod schema: checked when the case is stored (runs.ts) and when
// its answer is judged (assertions.ts). Pure: no I/O.

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : {});

const SUBSCHEMA = ['items', 'additionalProperties', 'not', 'if', 'then', 'else', 'contains', 'propertyNames', 'unevaluatedProperties', 'unevaluatedItems'];
const SUBSCHEMA_LISTS = ['anyOf', 'oneOf', 'allOf', 'prefixItems'];
const SUBSCHEMA_MAPS = ['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas'];

/**
 * The schema as zod's converter (z.fromJSONSchema) needs it: that converter ignores a `required`
 * name that is not among `properties`, so each such name gets an unconstrained property.
 */
function normalizeJsonSchema(schema: unknown): unknown {
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) return schema;
  const out: Obj = { ...(schema as Obj) };
  for (const k of SUBSCHEMA) if (k in out) out[k] = normalizeJsonSchema(out[k]);
  for (const k of SUBSCHEMA_LISTS) if (Array.isArray(out[k])) out[k] = (out[k] as unknown[]).map(normalizeJsonSchema);
  for (const k of SUBSCHEMA_MAPS) {
    if (out[k] && typeof out[k] === 'object') out[k] = Object.fromEntries(Object.entries(out[k] as Obj).map(([n, v]) => [n, normalizeJsonSchema(v)]));
  }
  if (Array.isArray(out.required)) {
    const props = { ...obj(out.properties) };
    for (const name of out.required) if (typeof name === 'string' && !(name in props)) props[name] = {};
    out.properties = props;
  }
  return out;
}

/** The zod schema of a case's json_schema assertion (throws when it cannot be converted). */
export const jsonSchemaValidator = (schema: unknown) => z.fromJSONSchema(normalizeJsonSchema(schema) as never);
