import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { queueOperation } from '../nodes/queue';
import { startOp as startDatabaseOp, type DatabaseRow } from '../databases/databases';
import { specOf, startOp as startSiteOp, type SiteRow, type SitesDeps } from './sites';

// Suspension of an org reaches the nodes (spec 2 section 1.4, PANEL.md section 2, issue 32 item 2):
// in the transaction that changes an org's status, every site below it whose path now has (or no
// longer has) a suspended org gets `org_suspended` set (or cleared) and a new generation applied on
// its node, and every database below it gets its user locked (or unlocked) on its node. Only these
// marks change, so reactivation restores exactly what was active before: a site suspended on its
// own stays suspended, and a level still suspended further up keeps everything below it stopped.

export interface Cascade {
  sites: SiteRow[];
  databases: DatabaseRow[];
}

/** Whether any org on the row's path (its own org or one above) is suspended, as SQL over the joined `o`. */
const UNDER_SUSPENDED = `EXISTS (SELECT 1 FROM panel_orgs a WHERE o.path LIKE a.path || '%' AND a.status = 'suspended') AS under_suspended`;

/** Marks what changes below the org of `path` and queues its node operations, in the status change's transaction. */
export async function cascadeOrgStatus(trx: Knex.Transaction, path: string): Promise<Cascade> {
  const sites: Array<SiteRow & { under_suspended: boolean }> = await trx('panel_sites as s')
    .join('panel_orgs as o', 'o.id', 's.org_id')
    .where('o.path', 'like', `${path}%`)
    .where('s.deleting', false)
    .orderBy('s.id')
    .forUpdate('s')
    .select('s.*', trx.raw(UNDER_SUSPENDED));
  const out: Cascade = { sites: [], databases: [] };
  for (const s of sites.filter((x) => x.org_suspended !== x.under_suspended)) {
    const opId = randomUUID();
    const [row]: SiteRow[] = await trx('panel_sites')
      .where({ id: s.id })
      .update({ org_suspended: s.under_suspended, generation: s.generation + 1, status: 'pending', last_op_id: opId, updated_at: trx.fn.now() })
      .returning('*');
    await queueOperation(trx, row.node_name, { id: opId, kind: 'site.apply', site: specOf(row) });
    out.sites.push(row);
  }
  // a database still being created keeps its operation; creation below a suspended org is refused anyway
  const dbs: Array<DatabaseRow & { under_suspended: boolean }> = await trx('panel_databases as d')
    .join('panel_orgs as o', 'o.id', 'd.org_id')
    .where('o.path', 'like', `${path}%`)
    .where('d.deleting', false)
    .whereNot('d.status', 'pending')
    .orderBy('d.id')
    .forUpdate('d')
    .select('d.*', trx.raw(UNDER_SUSPENDED));
  for (const d of dbs.filter((x) => x.locked !== x.under_suspended)) {
    const opId = randomUUID();
    const [row]: DatabaseRow[] = await trx('panel_databases').where({ id: d.id }).update({ locked: d.under_suspended, last_op_id: opId, updated_at: trx.fn.now() }).returning('*');
    await queueOperation(trx, row.node_name, { id: opId, kind: 'database.lock', database: row.name, user: row.db_user, locked: row.locked });
    out.databases.push(row);
  }
  return out;
}

/** After the commit: starts the workflow of every operation the cascade queued (one that cannot start leaves its site failed). */
export async function startCascade(deps: SitesDeps, c: Cascade): Promise<void> {
  for (const s of c.sites) await startSiteOp(deps, s, 'site.apply');
  for (const d of c.databases) await startDatabaseOp(deps, d, 'database.lock');
}
