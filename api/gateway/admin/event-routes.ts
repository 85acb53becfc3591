import type Router from '@koa/router';
import { z } from 'zod';
import type { Db } from '../../../platform/db';
import { loadSealingKey } from '../../../platform/secret-box';
import { allowList } from '../../../services/shared/webhook-targets';
import { createEndpoint, deleteEndpoint, listDeliveries, listEndpoints, setLowBalanceThreshold } from '../../../services/accounts/webhooks';
import { credits } from '../../../services/accounts/accounts';
import { readJsonObject } from '../../shared/http';
import { validate } from '../../shared/validate';

// Account webhooks and the low-balance threshold (issue 23, feature 5), the same operations as
// the CLI's `webhook …` and `account threshold` (services/accounts/webhooks.ts).

export const newEndpoint = z.object({ url: z.string().min(1).max(2000) }).strict();
export const threshold = z.object({ low_balance_threshold: credits.nullable() }).strict();

export function accountEventRoutes(r: Router, db: Db, allowTargets: string[]): void {
  const deps = { db, sealingKey: loadSealingKey(), allowed: allowList(allowTargets) };
  r.post('/accounts/:id/webhooks', async (ctx) => {
    const b = validate(newEndpoint, await readJsonObject(ctx));
    ctx.status = 201;
    ctx.body = await createEndpoint(deps, ctx.params.id, b.url);
  });
  r.get('/accounts/:id/webhooks', async (ctx) => {
    ctx.body = await listEndpoints(db, ctx.params.id);
  });
  r.delete('/webhooks/:id', async (ctx) => {
    ctx.body = await deleteEndpoint(db, ctx.params.id);
  });
  r.get('/webhooks/:id/deliveries', async (ctx) => {
    ctx.body = await listDeliveries(db, ctx.params.id);
  });
  r.put('/accounts/:id/low-balance-threshold', async (ctx) => {
    const b = validate(threshold, await readJsonObject(ctx));
    ctx.body = await setLowBalanceThreshold(db, ctx.params.id, b.low_balance_threshold);
  });
}
