import Router from '@koa/router';
import { backupMetrics, cleanupBackups, getInspection, listInspections, listSiteArchives, removeInspectionNow, restoreDeletedSite, startInspection, type BackupAdminDeps } from '../../../services/panel/backups/admin';
import { principalOf } from '../shared/auth';

// Backups at platform level on the panel's hosting node (spec 2 sections 4.1, 4.2, 4.4.5, 8), for
// the platform's own logins: deleted-site archives and their restore, Extract for inspection (202,
// a workflow extracts and later removes it), the inspections not yet removed and Remove now,
// cleanup of leftovers, recovery metrics.

export function backupAdminRoutes(deps: BackupAdminDeps): Router {
  const r = new Router({ prefix: '/v1' });
  r.get('/site-archives', async (ctx) => {
    ctx.body = listSiteArchives(deps, principalOf(ctx));
  });
  r.post('/sites/:id/restore', async (ctx) => {
    ctx.body = await restoreDeletedSite(deps, principalOf(ctx), ctx.params.id);
  });
  r.post('/restore-points/:id/inspection', async (ctx) => {
    ctx.status = 202;
    ctx.body = await startInspection(deps, principalOf(ctx), ctx.params.id);
  });
  r.get('/inspections', async (ctx) => {
    ctx.body = await listInspections(deps.db, principalOf(ctx));
  });
  r.get('/inspections/:id', async (ctx) => {
    ctx.body = await getInspection(deps.db, principalOf(ctx), ctx.params.id);
  });
  r.delete('/inspections/:id', async (ctx) => {
    ctx.status = 202;
    ctx.body = await removeInspectionNow(deps, principalOf(ctx), ctx.params.id);
  });
  r.post('/backups/cleanup', async (ctx) => {
    ctx.body = await cleanupBackups(deps, principalOf(ctx));
  });
  r.get('/backups/metrics', async (ctx) => {
    ctx.body = await backupMetrics(deps, principalOf(ctx));
  });
  return r;
}
