import { z } from 'zod';

// Schema helpers for the vendor request schemas: unions keyed by `type` that zod-openapi can render
// (it cannot render z.discriminatedUnion) and that name the accepted types when refusing one.

/** A union keyed by `type`: an unknown type is refused naming the accepted ones, a known one is checked by its own schema. */
export function byType<const O extends Record<string, z.ZodType>>(options: O) {
  return z
    .object({ type: z.enum(Object.keys(options) as [string, ...string[]]) })
    .loose()
    .transform((v, ctx) => {
      const r = options[v.type].safeParse(v);
      if (r.success) return r.data as z.output<O[keyof O]>;
      for (const issue of r.error.issues) ctx.addIssue(issue as never);
      return z.NEVER;
    });
}

/** An object schema with a literal `type`; other fields pass loosely. */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export const typed = <T extends string, S extends z.ZodRawShape = {}>(type: T, shape?: S) => z.object({ type: z.literal(type), ...shape } as { type: z.ZodLiteral<T> } & S).loose();
/** `typed(t)` for each of `types`, by type (the members of a byType union checked by type alone) */
export const each = <T extends readonly string[]>(types: T) => Object.fromEntries(types.map((t) => [t, typed(t)])) as { [K in T[number]]: ReturnType<typeof typed<K>> };

