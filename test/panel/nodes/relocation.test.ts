import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { env } from '../../setup/env';
import { createOrgWithLogin, platformAdmin, unique, usePanel, type PanelClient } from '../../helpers/panel';

// GET /v1/cluster/nodes/{node}/relocation-plan (spec 2 section 4.1): read-only advice. The nodes
// and sites are written straight into the tables: the advice is computed from the records alone.

describe('panel: relocation plan', () => {
  const url = usePanel({ flags: ['-controller-state', '-node-api-listen', '127.0.0.1:0'] });
  let admin: PanelClient;
  const names = { from: unique('reloc-from-'), a: unique('reloc-a-'), b: unique('reloc-b-'), eu: unique('reloc-eu-') };
  const node = (name: string, extra: Record<string, unknown> = {}) => ({
    name,
    kind: 'agent',
    state: 'alive',
    roles: ['web'],
    facts: JSON.stringify({ webServer: 'nginx', phpVersions: ['8.2'], mariadb: false, roles: ['web'], webAddress: '127.0.0.1:1' }),
    facts_at: new Date(),
    last_pull_at: new Date(),
    ...extra,
  });
  before(async () => {
    admin = await platformAdmin(url());
    await env.db('panel_nodes').insert([node(names.from, { draining: true }), node(names.a), node(names.b), node(names.eu, { logical_region: 'eu', facts: JSON.stringify({ webServer: 'nginx', phpVersions: [], mariadb: false, roles: ['web'], webAddress: '127.0.0.1:1' }) })]);
  });
  after(async () => {
    await env.db('panel_sites').whereIn('node_name', Object.values(names)).delete();
    await env.db('panel_nodes').whereIn('name', Object.values(names)).delete();
  });

  it('advises a target for every site of a draining node, spreading them, honouring PHP versions and required regions', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const euCustomer = await createOrgWithLogin(provider.client, { type: 'customer', required_region: 'eu' });
    const site = (org: string, php: string | null) => ({ id: randomUUID(), org_id: org, domain: `${unique('s')}.example.com`, php_version: php, node_name: names.from, status: 'active', quota_mb: 100, placement: '{}' });
    const sites = [site(customer.id, '8.2'), site(customer.id, '8.2'), site(euCustomer.id, null), site(euCustomer.id, '8.2')];
    await env.db('panel_sites').insert(sites);

    const plan = await admin.get(`/v1/cluster/nodes/${names.from}/relocation-plan`);
    assert.equal(plan.status, 200, JSON.stringify(plan.json));
    assert.equal(plan.json.reason_to_move, 'the node is draining', 'a draining node\'s plan says why its sites move');
    const to = Object.fromEntries(plan.json.moves.map((m: { site_id: string; to: string | null }) => [m.site_id, m.to]));
    assert.deepEqual(new Set([to[sites[0].id], to[sites[1].id]]), new Set([names.a, names.b]), 'the two PHP sites are spread over the two nodes that qualify');
    assert.equal(to[sites[2].id], names.eu, 'a static site of an eu account goes to the eu node');
    assert.equal(to[sites[3].id], null, 'no eu node has PHP 8.2');
    const blocked = plan.json.moves.find((m: { site_id: string }) => m.site_id === sites[3].id);
    assert.match(blocked.why, /no other node qualifies/, 'the site with no target says no other node qualifies');
    assert.ok(blocked.other_nodes.some((n: { node: string; reasons: string[] }) => n.node === names.eu && n.reasons.some((r) => /PHP 8\.2/.test(r))), `the eu node is listed as lacking PHP 8.2: ${JSON.stringify(blocked.other_nodes)}`);
    // advice only: nothing moved
    assert.equal((await env.db('panel_sites').whereIn('id', sites.map((s) => s.id)).where({ node_name: names.from })).length, 4, 'advice only: all four sites are still on the draining node');
  });

  it('says nothing needs to move for a healthy node, 404 for an unknown one, and is a cluster page', async () => {
    const ok = await admin.get(`/v1/cluster/nodes/${names.a}/relocation-plan`);
    assert.equal(ok.json.reason_to_move, null, 'a healthy node has no reason to move');
    assert.deepEqual(ok.json.moves, [], 'a healthy node\'s plan lists no moves');
    assert.equal((await admin.get('/v1/cluster/nodes/no-such-node/relocation-plan')).status, 404, 'an unknown node\'s plan is 404');
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    assert.equal((await provider.client.get(`/v1/cluster/nodes/${names.from}/relocation-plan`)).status, 404, 'a provider login cannot see the cluster page (404)');
  });
});
