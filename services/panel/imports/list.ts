import type { Db } from '../../../platform/db';
import type { Actor } from '../shared/actor';
import { findInScope } from '../shared/chain';
import type { ImportRow, ImportsDeps } from './imports';

// The imports of one account, newest first (the console's Migration page lists them): what each
// archive was, where it stands and how far its items got; GET /v1/imports/{id} has the rest. The
// upload limit comes along so a page can refuse a file too large before sending it.

const LIST_LIMIT = 100;

export async function listImports(deps: Pick<ImportsDeps, 'db' | 'maxUploadBytes'>, actor: Actor, orgId: string) {
  const db: Db = deps.db;
  const org = await findInScope(db, actor, orgId);
  const rows: ImportRow[] = await db('panel_imports').where({ org_id: org.id }).orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id' }]).limit(LIST_LIMIT);
  const counts: Array<{ import_id: string; state: string; n: string }> = rows.length
    ? await db('panel_import_items').whereIn('import_id', rows.map((r) => r.id)).groupBy('import_id', 'state').select('import_id', 'state', db.raw('count(*) as n'))
    : [];
  const countsOf = (id: string) => {
    const c: Record<string, number> = { total: 0, done: 0, pre_existing: 0, pending: 0, running: 0, failed: 0 };
    for (const x of counts.filter((k) => k.import_id === id)) {
      c[x.state] = Number(x.n);
      c.total += Number(x.n);
    }
    return c;
  };
  return {
    imports: rows.map((r) => ({ id: r.id, archive: r.archive_name, status: r.status, runs: r.runs, error: r.error, report_counts: r.report.counts, counts: countsOf(r.id), created_at: r.created_at, updated_at: r.updated_at })),
    max_upload_bytes: deps.maxUploadBytes,
  };
}
