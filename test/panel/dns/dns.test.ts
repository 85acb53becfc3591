import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { nextSerial, recordProblem, renderZone } from '../../../domain/panel/dns';
import { env } from '../../setup/env';
import { createOrgWithLogin, platformAdmin, usePanel, unique, type PanelClient } from '../../helpers/panel';

const zonesDir = fs.mkdtempSync(path.join(os.tmpdir(), 'panel-zones-'));

describe('panel: DNS zones', () => {
  const url = usePanel({ dns: { zonesDir, nameservers: ['ns1.example.net', 'ns2.example.net'] } });
  let admin: PanelClient;
  before(async () => {
    admin = await platformAdmin(url());
  });
  after(() => fs.rmSync(zonesDir, { recursive: true, force: true }));

  it('creates a zone under a customer, writes the checked zone file, replaces records with a new serial, deletes it', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const name = `${unique('z')}.example.com`;
    const records = [
      { name: '@', type: 'A', value: '192.0.2.10' },
      { name: 'www', type: 'CNAME', value: `${name}.` },
      { name: '@', type: 'MX', value: `10 mail.${name}.` },
      { name: 'mail', type: 'AAAA', value: '2001:db8::25' },
      { name: '@', type: 'TXT', value: 'v=spf1 -all', ttl: 300 },
    ];
    const created = await customer.client.post(`/v1/orgs/${customer.id}/dns-zones`, { name: name.toUpperCase(), records });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    assert.equal(created.json.name, name, 'the zone name is stored lower-cased');
    const file = fs.readFileSync(path.join(zonesDir, `${name}.db`), 'utf8');
    assert.match(file, /IN SOA ns1\.example\.net\. hostmaster\./, 'the zone file has the SOA with the first nameserver');
    assert.match(file, /www IN CNAME/, 'the zone file has the CNAME record');
    assert.match(file, /@ 300 IN TXT "v=spf1 -all"/, 'the TXT record carries its own TTL');

    const listed = await provider.client.get(`/v1/orgs/${provider.id}/dns-zones`);
    assert.deepEqual(listed.json.zones.map((z: { name: string }) => z.name), [name], "the provider lists its customer's zone");
    const stranger = await createOrgWithLogin(admin, { type: 'provider' });
    assert.equal((await stranger.client.get(`/v1/dns-zones/${created.json.id}`)).status, 404, 'another provider cannot see the zone');

    const replaced = await customer.client.put(`/v1/dns-zones/${created.json.id}/records`, { records: [{ name: '@', type: 'A', value: '192.0.2.11' }] });
    assert.equal(replaced.status, 200, `the records are replaced: ${JSON.stringify(replaced.json)}`);
    assert.ok(replaced.json.serial > created.json.serial, `replacing the records raises the serial: ${created.json.serial} → ${replaced.json.serial}`);
    assert.match(fs.readFileSync(path.join(zonesDir, `${name}.db`), 'utf8'), /192\.0\.2\.11/, 'the zone file holds the new record');

    assert.equal((await customer.client.del(`/v1/dns-zones/${created.json.id}`)).status, 204, 'the zone is deleted');
    assert.equal(fs.existsSync(path.join(zonesDir, `${name}.db`)), false, 'the zone file is removed with the zone');
    assert.equal(await env.db('panel_dns_zones').where({ id: created.json.id }).first(), undefined, 'the zone row is gone');
  });

  it('refuses bad records, naming the record, and a zone anywhere but under a customer; a taken name is a conflict', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const name = `${unique('z')}.example.org`;
    const bad: Array<[unknown, string]> = [
      [{ name: '@', type: 'A', value: '300.1.1.1' }, 'records.0'],
      [{ name: 'bad name', type: 'A', value: '192.0.2.1' }, 'records.0'],
      [{ name: '@', type: 'CNAME', value: 'example.com.' }, 'records'],
      [{ name: '@', type: 'TXT', value: 'a "quoted" text' }, 'records.0'],
      [{ name: '@', type: 'MX', value: 'mail.example.com.' }, 'records.0'],
      [{ name: '@', type: 'SPF', value: 'x' }, 'records.0.type'],
    ];
    for (const [record, field] of bad) {
      const r = await customer.client.post(`/v1/orgs/${customer.id}/dns-zones`, { name, records: [record] });
      assert.equal(r.status, 400, JSON.stringify(r.json));
      assert.equal(r.json.error.details.field, field, JSON.stringify(r.json));
    }
    assert.equal((await customer.client.post(`/v1/orgs/${customer.id}/dns-zones`, { name: 'not_a_domain', records: [] })).json.error.details.field, 'name', 'a name that is not a domain is refused, naming the name');
    assert.equal((await provider.client.post(`/v1/orgs/${provider.id}/dns-zones`, { name, records: [] })).json.error.details.field, 'org', 'a zone under a provider is refused, naming the org');
    assert.equal((await customer.client.post(`/v1/orgs/${customer.id}/dns-zones`, { name, records: [] })).status, 201, 'a valid empty zone is created');
    assert.equal((await customer.client.post(`/v1/orgs/${customer.id}/dns-zones`, { name, records: [] })).status, 409, 'the same name again is a conflict');
    // valid record by record, but BIND refuses the zone (an in-zone NS without an address): nothing changes
    const before = await env.db('panel_dns_zones').where({ name }).first();
    const refused = await customer.client.put(`/v1/dns-zones/${before.id}/records`, { records: [{ name: '@', type: 'NS', value: 'ns3' }] });
    assert.equal(refused.status, 400, 'a zone BIND refuses is a 400');
    assert.match(refused.json.error.message, /named-checkzone/, "the error gives named-checkzone's word");
    assert.deepEqual((await env.db('panel_dns_zones').where({ name }).first()).records, [], 'the refused records changed nothing');
    assert.equal(fs.readdirSync(zonesDir).filter((f) => f.endsWith('.tmp')).length, 0, 'no temporary zone files are left');
  });

  it('counts zones against the dns_zones limit of the account and every level above', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const customer = await createOrgWithLogin(provider.client, { type: 'customer', limits: { dns_zones: 1 } });
    assert.equal((await customer.client.post(`/v1/orgs/${customer.id}/dns-zones`, { name: `${unique('a')}.example.com` })).status, 201, 'the first zone fits the limit of 1');
    const second = await customer.client.post(`/v1/orgs/${customer.id}/dns-zones`, { name: `${unique('b')}.example.com` });
    assert.equal(second.status, 409, 'a second zone past the limit is a conflict');
    assert.equal(second.json.error.code, 'limit_reached', 'the conflict is limit_reached');
    assert.equal(second.json.error.details.limit, 'dns_zones', 'the conflict names the dns_zones limit');
    assert.equal((await provider.client.get(`/v1/orgs/${customer.id}/limits`)).json.usage.dns_zones.used, 1, 'the usage counts the one zone');
    const refused = await provider.client.del(`/v1/orgs/${customer.id}`, { confirm: customer.id });
    assert.equal(refused.status, 409, 'an org with a DNS zone cannot be deleted');
    assert.match(refused.json.error.message, /1 DNS zone/, 'the refusal names the DNS zone');
  });

  it('renders zones named-checkzone accepts and gives serials that always grow', () => {
    assert.equal(nextSerial(null, new Date('2026-11-25T10:00:00Z')), 2026112500, "the first serial is the day's 00");
    assert.equal(nextSerial(2026112500, new Date('2026-11-25T11:00:00Z')), 2026112501, 'a second change the same day counts up');
    assert.equal(nextSerial(2026112407, new Date('2026-11-25T11:00:00Z')), 2026112500, 'a new day starts at 00 even after a high count');
    assert.equal(recordProblem({ name: '_sip._tcp', type: 'SRV', value: '10 5 5060 sip.example.com.' }), null, 'an SRV record is valid');
    assert.equal(recordProblem({ name: '@', type: 'CAA', value: '0 issue "letsencrypt.org"' }), null, 'a CAA record is valid');
    assert.match(renderZone('example.com', 1, ['ns1.example.net'], [{ name: '@', type: 'TXT', value: 'x'.repeat(300) }]), /"x{255}" "x{45}"/, 'a TXT value past 255 characters is split into strings');
  });
});
