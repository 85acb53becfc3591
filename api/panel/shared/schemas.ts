import { z } from 'zod';
import { LIMIT_NAMES, type LimitName } from '../../../domain/panel/limits';
import { DELEGABLE_POWERS } from '../../../domain/panel/tree';

// Request shapes shared by several panel routes.

const limitValue = z.number().int('must be a whole number').min(0, 'must be 0 or more').max(1e15, 'is too large');

/** Every limit of spec 2.3, each a whole number ≥ 0; an absent (or null) value inherits. */
export const limitsSchema = z
  .strictObject(Object.fromEntries(LIMIT_NAMES.map((n) => [n, limitValue.nullable().optional()])) as Record<LimitName, z.ZodOptional<z.ZodNullable<typeof limitValue>>>)
  .transform((l) => Object.fromEntries(Object.entries(l).filter(([, v]) => v !== null && v !== undefined)) as Partial<Record<LimitName, number>>);

export const regionSchema = z.string().trim().min(1).max(64).regex(/^[a-z0-9][a-z0-9-]*$/, 'must be lower-case letters, digits and dashes');

export const powersSchema = z.array(z.enum(DELEGABLE_POWERS)).max(DELEGABLE_POWERS.length);

export const pageLimit = z.coerce.number().int().min(1).max(500).default(50);
