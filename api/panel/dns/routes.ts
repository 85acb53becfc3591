import Router from '@koa/router';
import { z } from 'zod';
import { RECORD_TYPES, MAX_RECORDS } from '../../../domain/panel/dns';
import type { Db } from '../../../platform/db';
import { createZone, deleteZone, getZone, listZones, replaceRecords, type DnsSettings } from '../../../services/panel/dns/dns';
import { principalOf } from '../shared/auth';
import { bodyOf } from '../shared/http';

// DNS zones of customer accounts: list per org subtree, create, read, replace records, delete.

const record = z.strictObject({ name: z.string().min(1).max(253), type: z.enum(RECORD_TYPES), ttl: z.number().int().optional(), value: z.string().min(1).max(2000) });
const records = z.array(record).max(MAX_RECORDS);

export const zoneBody = z.strictObject({ name: z.string().min(1).max(253), records: records.default([]) });
export const recordsBody = z.strictObject({ records });

export function dnsRoutes(db: Db, s: DnsSettings): Router {
  const r = new Router({ prefix: '/v1' });
  r.get('/orgs/:id/dns-zones', async (ctx) => {
    ctx.body = { zones: await listZones(db, principalOf(ctx), ctx.params.id) };
  });
  r.post('/orgs/:id/dns-zones', async (ctx) => {
    const b = await bodyOf(ctx, zoneBody);
    ctx.status = 201;
    ctx.body = await createZone(db, s, principalOf(ctx), ctx.params.id, b);
  });
  r.get('/dns-zones/:id', async (ctx) => {
    ctx.body = await getZone(db, principalOf(ctx), ctx.params.id);
  });
  r.put('/dns-zones/:id/records', async (ctx) => {
    const b = await bodyOf(ctx, recordsBody);
    ctx.body = await replaceRecords(db, s, principalOf(ctx), ctx.params.id, b.records);
  });
  r.delete('/dns-zones/:id', async (ctx) => {
    await deleteZone(db, s, principalOf(ctx), ctx.params.id);
    ctx.status = 204;
  });
  return r;
}
