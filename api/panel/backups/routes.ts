import Router from '@koa/router';
import { z } from 'zod';
import { createRestorePoint, deleteBackupSchedule, deleteRestorePoint, getBackupSchedule, getRestorePoint, listRestorePoints, restoreIntoAccount, setBackupSchedule } from '../../../services/panel/backups/backups';
import type { SitesDeps } from '../../../services/panel/sites/sites';
import { principalOf } from '../shared/auth';
import { bodyOf, parse } from '../shared/http';

// Restore points of sites (spec 2 sections 2.6, 4.2 "Backups at platform level", 7): take one now
// (202 pending; ready once the site's node wrote it, refused on a node without -backup-dir), list
// a site's, read, delete (202), restore one into another account (platform level, 202 with the new
// site and the restored databases' passwords, shown once). Off-site copies are PLANNED: every
// answer says so. Schedules per site (hourly or daily, keep the newest N) run as Temporal schedules.

export const restoreBody = z.strictObject({
  into_account: z.string().max(64),
  domain: z.string().max(253).optional(),
  quota_mb: z.number().int().min(1).max(100_000_000).optional(),
  databases: z.record(z.string().max(64), z.string().max(64)).optional(),
});

export const scheduleBody = z.strictObject({ every: z.enum(['hourly', 'daily']), keep: z.number().int().min(1).max(1000) });

export const listQuery = z.strictObject({ all: z.enum(['true', 'false']).optional() });

export function backupRoutes(deps: SitesDeps): Router {
  const r = new Router({ prefix: '/v1' });
  r.post('/sites/:id/restore-points', async (ctx) => {
    ctx.status = 202;
    ctx.body = await createRestorePoint(deps, principalOf(ctx), ctx.params.id);
  });
  r.get('/sites/:id/restore-points', async (ctx) => {
    const q = parse(listQuery, ctx.query);
    ctx.body = await listRestorePoints(deps.db, principalOf(ctx), ctx.params.id, q.all === 'true');
  });
  r.get('/restore-points/:id', async (ctx) => {
    ctx.body = await getRestorePoint(deps.db, principalOf(ctx), ctx.params.id);
  });
  r.delete('/restore-points/:id', async (ctx) => {
    ctx.status = 202;
    ctx.body = await deleteRestorePoint(deps, principalOf(ctx), ctx.params.id);
  });
  r.post('/restore-points/:id/restore', async (ctx) => {
    const b = await bodyOf(ctx, restoreBody);
    const out = await restoreIntoAccount(deps, principalOf(ctx), ctx.params.id, b);
    ctx.status = 202;
    ctx.set('cache-control', 'no-store');
    ctx.body = out;
  });
  r.put('/sites/:id/backup-schedule', async (ctx) => {
    const b = await bodyOf(ctx, scheduleBody);
    ctx.body = await setBackupSchedule(deps, principalOf(ctx), ctx.params.id, b);
  });
  r.get('/sites/:id/backup-schedule', async (ctx) => {
    ctx.body = await getBackupSchedule(deps, principalOf(ctx), ctx.params.id);
  });
  r.delete('/sites/:id/backup-schedule', async (ctx) => {
    await deleteBackupSchedule(deps, principalOf(ctx), ctx.params.id);
    ctx.status = 204;
  });
  return r;
}
