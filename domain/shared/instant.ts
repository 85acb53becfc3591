import { z } from 'zod';

/**
 * An ISO 8601 instant with an offset, handed on in UTC (…Z). ISO allows offsets PostgreSQL refuses
 * (beyond ±15:59: schemathesis sent +20:46 and got a 500), so no offset reaches SQL.
 */
export const isoInstant = z.iso
  .datetime({ offset: true })
  .refine((s) => !Number.isNaN(Date.parse(s)), 'must be a real instant')
  .transform((s) => new Date(s).toISOString());
