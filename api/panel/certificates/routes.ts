import Router from '@koa/router';
import { z } from 'zod';
import { attachCertificate, getCertificate, removeCertificate, type CertificateDeps } from '../../../services/panel/certificates/certificates';
import { principalOf } from '../shared/auth';
import { bodyOf } from '../shared/http';

// A website's TLS certificate: attach or replace (PEM chain + unencrypted private key, checked before
// anything changes; the site's next generation goes to its node), read (never the key), remove.

export const certificateBody = z.strictObject({
  certificate: z.string().min(1).max(64 * 1024),
  private_key: z.string().min(1).max(16 * 1024),
});

export function certificateRoutes(deps: CertificateDeps): Router {
  const r = new Router({ prefix: '/v1' });
  r.put('/sites/:id/certificate', async (ctx) => {
    const b = await bodyOf(ctx, certificateBody);
    ctx.body = await attachCertificate(deps, principalOf(ctx), ctx.params.id, b);
  });
  r.get('/sites/:id/certificate', async (ctx) => {
    ctx.body = await getCertificate(deps.db, principalOf(ctx), ctx.params.id);
  });
  r.delete('/sites/:id/certificate', async (ctx) => {
    ctx.body = await removeCertificate(deps, principalOf(ctx), ctx.params.id);
  });
  return r;
}
