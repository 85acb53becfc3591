import type { Knex } from 'knex';
import { PanelError } from '../../../domain/panel/errors';
import type { LimitName } from '../../../domain/panel/limits';
import { countedUsage, loadChain, ownLimits } from '../shared/chain';
import { allocatedQuotaMb, measuredUse } from '../sites/quotas';

// The quota check of a legacy import (spec 2 section 4.4.4 step "quota check"): before anything
// runs, would the import exceed any effective limit of the target account — websites, domains,
// databases, DNS zones (counted at the account and every level above), disk (the website quotas the
// run allocates, as site creation checks them) or inodes (measured use plus the archive's files)?
// Each limit is reported with its numbers; the upload and every run check it before anything is made.

type Q = Knex | Knex.Transaction;

export const IMPORT_QUOTA_LIMITS = ['websites', 'domains', 'databases', 'dns_zones', 'disk_mb', 'inodes'] as const satisfies readonly LimitName[];
export type ImportQuotaLimit = (typeof IMPORT_QUOTA_LIMITS)[number];

export interface QuotaLine {
  limit: ImportQuotaLimit;
  /** the org whose limit binds */
  level: string;
  org_id: string;
  value: number;
  used: number;
  adding: number;
  fits: boolean;
}

/** Every limit along the account's chain the import touches, with use and what the import adds. */
export async function quotaCheck(q: Q, org: { path: string }, adding: Record<ImportQuotaLimit, number>): Promise<{ fits: boolean; lines: QuotaLine[] }> {
  const lines: QuotaLine[] = [];
  for (const level of await loadChain(q, org.path)) {
    const own = ownLimits(level);
    const limited = IMPORT_QUOTA_LIMITS.filter((l) => own[l] !== undefined && own[l] !== null);
    if (!limited.length) continue;
    const counted = await countedUsage(q, level);
    const measured = limited.some((l) => l === 'disk_mb' || l === 'inodes') ? await measuredUse(q, level.path) : { diskMb: 0, inodes: 0 };
    // disk: the quotas allocated below the level, or the measured use where it is higher (a new website is refused at either)
    const disk = limited.includes('disk_mb') ? Math.max(await allocatedQuotaMb(q, level.path), Math.ceil(measured.diskMb)) : 0;
    for (const limit of limited) {
      const used = limit === 'disk_mb' ? disk : limit === 'inodes' ? measured.inodes : counted[limit];
      const value = own[limit]!;
      lines.push({ limit, level: `${level.type} "${level.name}"`, org_id: level.id, value, used, adding: adding[limit], fits: adding[limit] === 0 || used + adding[limit] <= value });
    }
  }
  return { fits: lines.every((l) => l.fits), lines };
}

/** Refuses with limit_reached naming the first limit the import would exceed, all numbers in details. */
export function refuseOverQuota(check: { fits: boolean; lines: QuotaLine[] }): void {
  const over = check.lines.filter((l) => !l.fits);
  if (!over.length) return;
  const first = over[0];
  throw new PanelError('limit_reached', {
    limit: first.limit,
    level: first.level,
    value: first.value,
    detail: over.map((l) => `${l.limit}: ${l.used} used + ${l.adding} imported > ${l.value} at ${l.level}`).join('; '),
    over,
  });
}
