import Router from '@koa/router';
import { z } from 'zod';
import { addSftpKey, getSftp, removeSftpKey } from '../../../services/panel/sites/sftp';
import type { SitesDeps } from '../../../services/panel/sites/sites';
import { principalOf } from '../shared/auth';
import { bodyOf } from '../shared/http';

// SFTP for site owners (issue 34 §2, docs/panel/sites.md "SFTP"): the site's endpoint and keys;
// adding or removing a key is a node operation of the site (202 with the site, pending).

export const sftpKeyBody = z.strictObject({
  label: z.string().max(200),
  public_key: z.string().max(20_000),
});

export function sftpRoutes(deps: SitesDeps): Router {
  const r = new Router({ prefix: '/v1' });
  r.get('/sites/:id/sftp', async (ctx) => {
    ctx.body = await getSftp(deps.db, principalOf(ctx), ctx.params.id);
  });
  r.post('/sites/:id/sftp/keys', async (ctx) => {
    const b = await bodyOf(ctx, sftpKeyBody);
    ctx.status = 201;
    ctx.body = await addSftpKey(deps, principalOf(ctx), ctx.params.id, b);
  });
  r.delete('/sites/:id/sftp/keys/:keyId', async (ctx) => {
    ctx.body = await removeSftpKey(deps, principalOf(ctx), ctx.params.id, ctx.params.keyId);
  });
  return r;
}
