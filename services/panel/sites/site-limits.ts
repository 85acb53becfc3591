import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { siteLimits } from '../../../domain/panel/limits';
import type { SiteLimits } from '../../../domain/panel/node-ops';
import { effectiveLimits, loadChain } from '../shared/chain';
import { queueOperation } from '../nodes/queue';
import { specOf, startOp, type SiteRow, type SitesDeps } from './sites';

// Limits that bind on the node (issue 34 §1): each site row carries its account's effective CPU,
// memory, process and disk I/O limits, which its node writes into the site's control group. When
// limits or a package change above, every site below whose effective limits changed gets them and
// a new generation, and its node operation is queued in the same transaction (started after the
// commit), so every node applies the change within a minute without restarting.

const same = (a: SiteLimits, b: SiteLimits) => (Object.keys(b) as Array<keyof SiteLimits>).every((k) => (a?.[k] ?? null) === b[k]);

/** Re-resolves the limits of every site below the org at `path` and queues the changed ones (in the change's transaction). */
export async function cascadeLimits(trx: Knex.Transaction, path: string): Promise<SiteRow[]> {
  const rows: Array<SiteRow & { org_path: string }> = await trx('panel_sites as s')
    .join('panel_orgs as o', 'o.id', 's.org_id')
    .where('o.path', 'like', `${path}%`)
    .where('s.deleting', false)
    .orderBy('s.id')
    .forUpdate('s')
    .select('s.*', 'o.path as org_path');
  // the group's limits and the pool's workers (pm.max_children), both from the account's effective limits
  const byOrg = new Map<string, { limits: SiteLimits; phpWorkers: number | null }>();
  const out: SiteRow[] = [];
  for (const s of rows) {
    if (!byOrg.has(s.org_path)) {
      const effective = effectiveLimits(await loadChain(trx, s.org_path));
      byOrg.set(s.org_path, { limits: siteLimits(effective), phpWorkers: effective.php_workers.value });
    }
    const { limits, phpWorkers } = byOrg.get(s.org_path)!;
    if (same(s.limits, limits) && s.php_workers === phpWorkers) continue;
    const opId = randomUUID();
    const [row]: SiteRow[] = await trx('panel_sites')
      .where({ id: s.id })
      .update({ limits: JSON.stringify(limits), php_workers: phpWorkers, generation: s.generation + 1, status: 'pending', last_op_id: opId, updated_at: trx.fn.now() })
      .returning('*');
    await queueOperation(trx, row.node_name, { id: opId, kind: 'site.apply', site: specOf(row) });
    out.push(row);
  }
  return out;
}

/**
 * Runs a change of limits (`change` gets the cascade to pass to the orgs service) and, after its
 * commit, starts the node operation of every site the cascade changed.
 */
export async function withLimitsCascade<T>(deps: SitesDeps, change: (cascade: (trx: Knex.Transaction, orgPath: string) => Promise<void>) => Promise<T>): Promise<T> {
  const changed: SiteRow[] = [];
  const result = await change(async (trx, orgPath) => void changed.push(...(await cascadeLimits(trx, orgPath))));
  for (const s of changed) await startOp(deps, s, 'site.apply');
  return result;
}
