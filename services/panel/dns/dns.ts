import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { nextSerial, recordProblem, renderZone, zoneProblem, type DnsRecord } from '../../../domain/panel/dns';
import { invalid, notFound, PanelError } from '../../../domain/panel/errors';
import { isDomain } from '../../../domain/panel/node-ops';
import { isBelow } from '../../../domain/panel/tree';
import type { Db } from '../../../platform/db';
import { removeZoneFile, writeZoneFile, ZoneRefused } from '../../../platform/zone-files';
import type { Actor } from '../shared/actor';
import { audit } from '../shared/audit';
import { checkCounted, findInScope, isUuid, loadChain } from '../shared/chain';

// DNS zones of customer accounts: created under a customer in the caller's subtree (a counted item:
// dns_zones), records validated, the zone file rendered and checked on the hosting node inside the
// same transaction, so the panel's record and the node's file change together or not at all.

export interface DnsSettings {
  /** the hosting node's zone directory; null: zones are kept in the panel only (no named-checkzone) */
  zonesDir: string | null;
  /** the NS names every zone lists (PANEL_DNS_NAMESERVERS) */
  nameservers: string[];
}

function checkRecords(records: DnsRecord[]): void {
  records.forEach((r, i) => {
    const problem = recordProblem(r);
    if (problem) throw invalid(`records.${i}`, problem);
  });
  const zone = zoneProblem(records);
  if (zone) throw invalid('records', zone);
}

const view = (z: { id: string; org_id: string; name: string; records: DnsRecord[]; serial: number; created_at: Date; updated_at: Date }) => ({
  id: z.id,
  org_id: z.org_id,
  name: z.name,
  serial: z.serial,
  records: z.records,
  created_at: z.created_at,
  updated_at: z.updated_at,
});

async function publish(s: DnsSettings, name: string, serial: number, records: DnsRecord[]): Promise<void> {
  if (!s.zonesDir) return;
  try {
    await writeZoneFile(s.zonesDir, name, renderZone(name, serial, s.nameservers, records));
  } catch (err) {
    if (err instanceof ZoneRefused) throw invalid('records', `the zone is refused by named-checkzone: ${err.message}`);
    throw err;
  }
}

export async function createZone(db: Db, s: DnsSettings, actor: Actor, orgId: string, input: { name: string; records: DnsRecord[] }) {
  const name = input.name.toLowerCase().replace(/\.$/, '');
  if (!isDomain(name)) throw invalid('name', 'must be a domain name such as example.com');
  checkRecords(input.records);
  return db.transaction(async (trx) => {
    const org = await findInScope(trx, actor, orgId);
    if (org.type !== 'customer') throw invalid('org', 'DNS zones belong to customer accounts');
    const chain = await loadChain(trx, org.path, true);
    if (await trx('panel_dns_zones').where({ name }).first('id')) throw new PanelError('conflict', { field: 'name', detail: `the zone ${name} exists already` });
    await checkCounted(trx, chain, 'dns_zones');
    const serial = nextSerial(null, new Date());
    const [zone] = await trx('panel_dns_zones').insert({ id: randomUUID(), org_id: org.id, name, records: JSON.stringify(input.records), serial }).returning('*');
    await audit(trx, actor, { org, action: 'dns_zone.create', target: { type: 'dns_zone', id: zone.id }, after: { name, records: input.records } });
    await publish(s, name, serial, input.records);
    return view(zone);
  });
}

/** A zone in the caller's subtree, locked when asked; 404 otherwise. */
async function zoneInScope(q: Knex | Knex.Transaction, actor: Actor, id: string, lock = false) {
  if (!isUuid(id)) throw notFound('DNS zone');
  const query = q('panel_dns_zones as z').join('panel_orgs as o', 'o.id', 'z.org_id').where('z.id', id).first('z.*', 'o.path as org_path');
  if (lock) query.forUpdate('z');
  const zone = await query;
  if (!zone || !(zone.org_id === actor.orgId || isBelow(zone.org_path, actor.orgPath))) throw notFound('DNS zone');
  return zone;
}

export async function getZone(db: Db, actor: Actor, id: string) {
  return view(await zoneInScope(db, actor, id));
}

export async function listZones(db: Db, actor: Actor, orgId: string) {
  const org = await findInScope(db, actor, orgId);
  const rows = await db('panel_dns_zones as z').join('panel_orgs as o', 'o.id', 'z.org_id').where('o.path', 'like', `${org.path}%`).orderBy('z.name').select('z.*');
  return rows.map(view);
}

/** Replaces a zone's records (a new serial; the file is checked before the change commits). */
export async function replaceRecords(db: Db, s: DnsSettings, actor: Actor, id: string, records: DnsRecord[]) {
  checkRecords(records);
  return db.transaction(async (trx) => {
    const zone = await zoneInScope(trx, actor, id, true);
    const serial = nextSerial(zone.serial, new Date());
    const [updated] = await trx('panel_dns_zones').where({ id: zone.id }).update({ records: JSON.stringify(records), serial, updated_at: trx.fn.now() }).returning('*');
    await audit(trx, actor, { org: { id: zone.org_id, path: zone.org_path }, action: 'dns_zone.update', target: { type: 'dns_zone', id: zone.id }, before: { records: zone.records }, after: { records } });
    await publish(s, zone.name, serial, records);
    return view(updated);
  });
}

export async function deleteZone(db: Db, s: DnsSettings, actor: Actor, id: string) {
  await db.transaction(async (trx) => {
    const zone = await zoneInScope(trx, actor, id, true);
    await trx('panel_dns_zones').where({ id: zone.id }).delete();
    await audit(trx, actor, { org: { id: zone.org_id, path: zone.org_path }, action: 'dns_zone.delete', target: { type: 'dns_zone', id: zone.id }, before: { name: zone.name } });
    if (s.zonesDir) await removeZoneFile(s.zonesDir, zone.name);
  });
}
