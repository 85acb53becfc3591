import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import type { PanelRuntime } from '../../../main/panel-api';
import { freePort } from '../../../platform/ports';
import { startHostingNode } from '../../../hosting-node';
import { startAgent } from '../../../hosting-node/agent';
import { createPanelClient } from '../../../hosting-node/panel-client';
import { addNode } from '../../../services/panel/nodes/nodes';
import { queueOperation } from '../../../services/panel/nodes/queue';
import { resumePendingOps, specOf } from '../../../services/panel/sites/sites';
import { createOrgWithLogin, getFromNode, platformAdmin, startPanel, unique, type PanelClient, type Reply } from '../../helpers/panel';
import { env } from '../../setup/env';

// Websites (spec 2 sections 2.3, 2.6, 3, 4.2 "Add website", 4.4.1-4.4.2) over real HTTP: a real
// panel, a real Temporal worker (node-op workflows) and a real hosting node under a temp root,
// serving with nginx: a created site answers by its Host header.

const OP_TIMEOUT_MS = 2500;

interface SitesPanel {
  url: string;
  runtime: PanelRuntime;
  webPort: number;
  root: string;
}

/** A panel process that runs the hosting node and the panel worker (on a task queue of its own). */
async function startSitesPanel(flags: string[], hosting: boolean, taskQueue: string): Promise<SitesPanel> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'panel-sites-'));
  fs.chmodSync(root, 0o755); // nginx and PHP-FPM workers (www-data) read below it
  const webPort = await freePort();
  const runtime = await startPanel({
    flags,
    databaseUrl: env.databaseUrl,
    // the production poll: a result reported by an agent ends the wait by signal, not by this poll
    nodeOps: { taskQueue, timeoutMs: OP_TIMEOUT_MS, pollMs: 1000 },
    ...(hosting ? { hosting: { root, webPort, webHost: '127.0.0.1', workflowBundle: env.bundles.panel } } : {}),
  });
  return { url: runtime.url, runtime, webPort, root };
}

const serve = (p: { webPort: number }, host: string) => getFromNode(p.webPort, host);

/** Waits until the site leaves `pending` (or reaches one of `statuses`), as its owner reads it. */
async function settled(c: PanelClient, id: string, statuses = ['active', 'suspended', 'failed'], timeoutMs = 30_000): Promise<Reply> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await c.get(`/v1/sites/${id}`);
    if (r.status !== 200) throw new Error(`site ${id}: ${r.status} ${JSON.stringify(r.json)}`);
    if (statuses.includes(r.json.status)) return r;
    if (Date.now() > deadline) throw new Error(`site ${id} still ${r.json.status} after ${timeoutMs} ms`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

async function gone(c: PanelClient, id: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await c.get(`/v1/sites/${id}`);
    if (r.status === 404) return;
    if (Date.now() > deadline) throw new Error(`site ${id} still there (${r.json.status}) after ${timeoutMs} ms`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

function refused(r: Reply, status: number, code: string) {
  assert.equal(r.status, status, JSON.stringify(r.json));
  assert.equal(r.json.error.code, code, JSON.stringify(r.json));
}

const domain = (label = 'site') => `${unique(label)}.example.com`;

describe('panel: websites on the hosting node', function () {
  this.timeout(90_000);
  const taskQueue = `panel-test-${randomUUID()}`;
  let panel: SitesPanel;
  let admin: PanelClient;
  let provider: Awaited<ReturnType<typeof createOrgWithLogin>>;
  let reseller: Awaited<ReturnType<typeof createOrgWithLogin>>;

  before(async function () {
    this.timeout(60_000);
    panel = await startSitesPanel([], true, taskQueue);
    admin = await platformAdmin(panel.url);
    provider = await createOrgWithLogin(admin, { type: 'provider' });
    reseller = await createOrgWithLogin(provider.client, { type: 'reseller' });
  });
  after(async () => {
    await panel?.runtime.close();
    if (panel) fs.rmSync(panel.root, { recursive: true, force: true });
  });

  it('creates a site on the hosting node: 201 pending at once, then active and served by its domain and aliases', async () => {
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const d = domain();
    const alias = `www.${d}`;
    const t0 = Date.now();
    const r = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: d.toUpperCase(), aliases: [alias], cron: ['*/5 * * * * echo hi'] });
    assert.equal(r.status, 201, JSON.stringify(r.json));
    assert.equal(r.json.status, 'pending', 'a new site is pending at once');
    assert.equal(r.json.domain, d, 'the domain is stored in lower case');
    assert.deepEqual(r.json.aliases, [alias], 'the alias is kept');
    assert.equal(r.json.node, 'hosting', 'the site is placed on the hosting node');
    assert.equal(r.json.quota_mb, 1024, 'the default quota is 1024 MB');
    assert.equal(r.json.generation, 1, 'a new site is generation 1');
    const s = await settled(customer.client, r.json.id);
    assert.equal(s.json.status, 'active', JSON.stringify(s.json));
    assert.equal(s.json.applied_generation, 1, 'the node applied generation 1');
    assert.equal(s.json.error, null, 'an active site has no error');
    env.logger.info({ ms: Date.now() - t0 }, 'site active');

    for (const host of [d, alias]) {
      const page = await serve(panel, host);
      assert.equal(page.status, 200, host);
    }
    assert.ok(fs.existsSync(path.join(panel.root, 'etc/nginx/sites', `${d}.conf`)), `the vhost of ${d} is written`);
    assert.match(fs.readFileSync(path.join(panel.root, 'etc/cron.d', d), 'utf8'), /echo hi/, "the cron line is written to the site's cron file");

    // the operation ran as a node-op workflow with the search attributes of the site
    const op = await panel.runtime.hostingNode!.inspectSite(r.json.id);
    assert.equal(op?.generation, 1, "the node's record of the site is generation 1");

    // the recorded placement, the listings, the audit log
    const placement = await customer.client.get(`/v1/sites/${r.json.id}/placement`);
    assert.equal(placement.status, 200, `the owner reads the placement: ${JSON.stringify(placement.json)}`);
    assert.equal(placement.json.mode, 'hosting', 'the placement was the hosting mode');
    assert.equal(placement.json.node, 'hosting', 'the placement names the hosting node');
    assert.equal(placement.json.decided_by, customer.username, 'the placement names who decided it');
    const own = await customer.client.get(`/v1/orgs/${customer.id}/sites`);
    assert.deepEqual(own.json.sites.map((x: { id: string }) => x.id), [r.json.id], 'the customer lists its one site');
    const below = await provider.client.get(`/v1/orgs/${provider.id}/sites?subtree=true`);
    assert.ok(below.json.sites.some((x: { id: string }) => x.id === r.json.id), `the provider sees its customer's site ${r.json.id} in the subtree`);
    assert.equal((await provider.client.get(`/v1/orgs/${provider.id}/sites`)).json.sites.length, 0, 'without subtree the provider lists no site of its own');
    const log = await reseller.client.get(`/v1/orgs/${customer.id}/audit`);
    const entry = log.json.entries.find((e: { action: string }) => e.action === 'site.create');
    assert.equal(entry.target_id, r.json.id, 'the audit entry names the created site');
    assert.equal(entry.actor_username, customer.username, 'the audit entry names the customer as actor');
    const usage = await customer.client.get(`/v1/orgs/${customer.id}`);
    assert.equal(usage.json.counts.websites, 1, "the customer's usage counts one website");
    assert.equal(usage.json.counts.domains, 2, 'the domain and the alias count as two domains');

    // outside the caller's subtree: 404; only customer accounts hold websites
    const other = await createOrgWithLogin(reseller.client, { type: 'customer' });
    refused(await other.client.get(`/v1/sites/${r.json.id}`), 404, 'not_found');
    refused(await other.client.post(`/v1/orgs/${customer.id}/sites`, { domain: domain() }), 404, 'not_found');
    refused(await reseller.client.post(`/v1/orgs/${reseller.id}/sites`, { domain: domain() }), 409, 'conflict');
    refused(await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: '*.example.com' }), 400, 'validation_failed');
    refused(await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: domain(), cron: ['not a cron line'] }), 400, 'validation_failed');
  });

  it('refuses a domain or alias used anywhere on the platform with 409 naming it', async () => {
    const a = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const b = await createOrgWithLogin(provider.client, { type: 'customer' });
    const d = domain();
    const alias = domain('alias');
    const first = await a.client.post(`/v1/orgs/${a.id}/sites`, { domain: d, aliases: [alias] });
    assert.equal(first.status, 201, `the first account gets the domain: ${JSON.stringify(first.json)}`);
    for (const body of [{ domain: d }, { domain: alias }, { domain: domain(), aliases: [d] }, { domain: domain(), aliases: [alias.toUpperCase()] }]) {
      const r = await b.client.post(`/v1/orgs/${b.id}/sites`, body);
      refused(r, 409, 'conflict');
      assert.ok([d, alias].includes(r.json.error.details.domain), JSON.stringify(r.json));
      assert.match(r.json.error.message, new RegExp(r.json.error.details.domain.replace(/\./g, '\\.')), 'the conflict message names the taken domain');
    }
    refused(await a.client.post(`/v1/orgs/${a.id}/sites`, { domain: d }), 409, 'conflict');
    // an alias repeated in one request is a validation error
    refused(await b.client.post(`/v1/orgs/${b.id}/sites`, { domain: `x.${d}`, aliases: [`y.${d}`, `y.${d}`] }), 400, 'validation_failed');
    // the same new domain created by two accounts at once: exactly one gets it
    const race = domain('race');
    const both = await Promise.all([a.client.post(`/v1/orgs/${a.id}/sites`, { domain: race }), b.client.post(`/v1/orgs/${b.id}/sites`, { domain: race })]);
    assert.deepEqual(both.map((r) => r.status).sort(), [201, 409], 'two accounts creating one domain at once: one 201, one 409');
    await settled(a.client, first.json.id);
  });

  it('counted limits (websites, domains) hold under 10 parallel creates', async () => {
    const r1 = await createOrgWithLogin(provider.client, { type: 'reseller', limits: { websites: 3 } });
    const c1 = await createOrgWithLogin(r1.client, { type: 'customer' });
    const c2 = await createOrgWithLogin(r1.client, { type: 'customer' });
    const creates = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? c1 : c2).client.post(`/v1/orgs/${(i % 2 ? c1 : c2).id}/sites`, { domain: domain('par') })));
    const ok = creates.filter((r) => r.status === 201);
    assert.equal(ok.length, 3, JSON.stringify(creates.map((r) => r.status)));
    for (const r of creates.filter((x) => x.status !== 201)) {
      refused(r, 409, 'limit_reached');
      assert.equal(r.json.error.details.limit, 'websites', 'the limit reached is websites');
      assert.equal(r.json.error.details.org_id, r1.id, "the limit is the reseller's");
    }
    assert.equal((await provider.client.get(`/v1/orgs/${r1.id}`)).json.counts.websites, 3, 'the reseller counts exactly 3 websites');

    // domains: each site takes its domain and every alias
    const c3 = await createOrgWithLogin(provider.client, { type: 'customer', limits: { domains: 5 } });
    const withAlias = await Promise.all(Array.from({ length: 10 }, () => c3.client.post(`/v1/orgs/${c3.id}/sites`, { domain: domain('dom'), aliases: [domain('dal')] })));
    assert.equal(withAlias.filter((r) => r.status === 201).length, 2, JSON.stringify(withAlias.map((r) => r.status)));
    for (const r of withAlias.filter((x) => x.status !== 201)) assert.equal(r.json.error.details.limit, 'domains', 'the limit reached is domains');
    const one = await c3.client.post(`/v1/orgs/${c3.id}/sites`, { domain: domain('dom') });
    assert.equal(one.status, 201, `a site without alias fits the last domain: ${JSON.stringify(one.json)}`);
    refused(await c3.client.post(`/v1/orgs/${c3.id}/sites`, { domain: domain('dom') }), 409, 'limit_reached');
    await Promise.all([...ok, ...withAlias.filter((r) => r.status === 201), one].map((r) => settled(admin, r.json.id)));
  });

  it('refuses a site whose quota does not fit the disk limit (soft quota); a delete frees it', async () => {
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    assert.equal((await reseller.client.put(`/v1/orgs/${customer.id}/limits`, { limits: { disk_mb: 1000 } })).status, 200, "the reseller sets the customer's disk limit");
    const big = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: domain(), quota_mb: 600 });
    assert.equal(big.status, 201, `a 600 MB site fits the 1000 MB disk limit: ${JSON.stringify(big.json)}`);
    const over = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: domain(), quota_mb: 600 });
    refused(over, 409, 'limit_reached');
    assert.equal(over.json.error.details.limit, 'disk_mb', 'the limit reached is disk_mb');
    assert.equal(over.json.error.details.used, 600, 'the refusal says 600 MB are used');
    assert.equal(over.json.error.details.field, 'quota_mb', 'the refusal names the quota_mb field');
    const fits = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: domain(), quota_mb: 400 });
    assert.equal(fits.status, 201, `a 400 MB site fits the rest: ${JSON.stringify(fits.json)}`);
    refused(await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: domain(), quota_mb: 1 }), 409, 'limit_reached');
    await settled(customer.client, big.json.id);

    // delete: the node removes it, then the rows go and the quota is free again
    const d = big.json.domain;
    assert.equal((await serve(panel, d)).status, 200, 'the site is served before the delete');
    const del = await customer.client.del(`/v1/sites/${big.json.id}`);
    assert.equal(del.status, 202, JSON.stringify(del.json));
    assert.equal(del.json.status, 'pending', 'a deleting site is pending');
    assert.equal(del.json.deleting, true, 'the site says it is being deleted');
    // while deleting, the quota still counts and the site takes no other change
    refused(await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: domain(), quota_mb: 600 }), 409, 'limit_reached');
    await gone(customer.client, big.json.id);
    assert.notEqual((await serve(panel, d)).status, 200, 'the deleted site is no longer served');
    assert.ok(!fs.existsSync(path.join(panel.root, 'etc/nginx/sites', `${d}.conf`)), `the vhost of the deleted site ${d} is removed`);
    const again = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: d, quota_mb: 600 });
    assert.equal(again.status, 201, JSON.stringify(again.json));
    const log = await reseller.client.get(`/v1/orgs/${customer.id}/audit`);
    assert.ok(log.json.entries.some((e: { action: string; target_id: string }) => e.action === 'site.delete' && e.target_id === big.json.id), `the customer's deletion of site ${big.json.id} is audited`);
    assert.ok(log.json.entries.some((e: { action: string; target_id: string; actor_username: string }) => e.action === 'site.deleted' && e.target_id === big.json.id && e.actor_username === 'system'), `the system's completion of the deletion of site ${big.json.id} is audited`);
    await settled(customer.client, again.json.id);
  });

  it('suspends from above (the node answers 503) and unsuspends, each a new generation applied on the node', async () => {
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const d = domain();
    const r = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: d });
    await settled(customer.client, r.json.id);
    refused(await customer.client.post(`/v1/sites/${r.json.id}/suspend`), 403, 'forbidden');
    const s = await reseller.client.post(`/v1/sites/${r.json.id}/suspend`);
    assert.equal(s.status, 200, JSON.stringify(s.json));
    assert.equal(s.json.status, 'pending', 'a suspend is pending at once');
    assert.equal(s.json.suspended, true, 'the site is marked suspended');
    assert.equal(s.json.generation, 2, 'the suspend is generation 2');
    const done = await settled(customer.client, r.json.id);
    assert.equal(done.json.status, 'suspended', 'the node applied the suspension');
    assert.equal(done.json.applied_generation, 2, 'the node applied generation 2');
    assert.equal((await serve(panel, d)).status, 503, 'a suspended site answers 503');
    // repeating it changes nothing
    assert.equal((await reseller.client.post(`/v1/sites/${r.json.id}/suspend`)).json.generation, 2, 'suspending again makes no new generation');
    const u = await reseller.client.post(`/v1/sites/${r.json.id}/unsuspend`);
    assert.equal(u.json.generation, 3, 'the unsuspend is generation 3');
    assert.equal((await settled(customer.client, r.json.id)).json.status, 'active', 'the unsuspended site is active again');
    assert.equal((await serve(panel, d)).status, 200, 'the unsuspended site is served again');
    const log = await reseller.client.get(`/v1/orgs/${customer.id}/audit`);
    const actions = log.json.entries.filter((e: { target_id: string }) => e.target_id === r.json.id).map((e: { action: string }) => e.action);
    assert.deepEqual(actions.slice(0, 3), ['site.unsuspend', 'site.suspend', 'site.create'], 'suspend and unsuspend are audited after the create');
  });

  it('changes in quick succession end with the last generation applied', async () => {
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const d = domain();
    const r = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: d });
    await reseller.client.post(`/v1/sites/${r.json.id}/suspend`);
    await reseller.client.post(`/v1/sites/${r.json.id}/unsuspend`);
    const last = await reseller.client.post(`/v1/sites/${r.json.id}/suspend`);
    assert.equal(last.json.generation, 4, 'three changes after the create make generation 4');
    const done = await settled(customer.client, r.json.id, ['suspended', 'failed']);
    assert.equal(done.json.status, 'suspended', JSON.stringify(done.json));
    // the older operations' workflows may finish later: they change nothing
    await new Promise((res) => setTimeout(res, 500));
    const after = await customer.client.get(`/v1/sites/${r.json.id}`);
    assert.equal(after.json.status, 'suspended', 'older operations finishing later leave the site suspended');
    assert.equal(after.json.applied_generation, 4, 'the last generation stays applied');
    assert.equal((await serve(panel, d)).status, 503, 'the site stays suspended on the node');
  });

  it('placement on a named node needs site.place: customers and resellers 403, the platform admin places it', async () => {
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const p1 = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: domain(), node: 'hosting' });
    refused(p1, 403, 'power_missing');
    assert.equal(p1.json.error.details.power, 'site.place', 'the refusal names the site.place power');
    refused(await reseller.client.post(`/v1/orgs/${customer.id}/sites`, { domain: domain(), node: 'hosting' }), 403, 'power_missing');
    refused(await provider.client.post(`/v1/orgs/${customer.id}/sites`, { domain: domain(), node: 'hosting' }), 403, 'power_missing');
    const ok = await admin.post(`/v1/orgs/${customer.id}/sites`, { domain: domain(), node: 'hosting' });
    assert.equal(ok.status, 201, JSON.stringify(ok.json));
    assert.equal((await settled(customer.client, ok.json.id)).json.status, 'active', "the admin's placed site becomes active");
    const placement = await customer.client.get(`/v1/sites/${ok.json.id}/placement`);
    assert.equal(placement.json.mode, 'named', 'the placement was on a named node');
    assert.equal(placement.json.decided_by, 'admin', 'the placement names the admin');

    refused(await admin.post(`/v1/orgs/${customer.id}/sites`, { domain: domain(), node: 'no-such-node' }), 400, 'validation_failed');
    const name = unique('n-');
    await addNode(env.db, null, name);
    const dead = await admin.post(`/v1/orgs/${customer.id}/sites`, { domain: domain(), node: name });
    refused(dead, 409, 'conflict');
    assert.match(dead.json.error.message, /dead, not alive/, `the refusal says the node is dead: ${dead.json.error.message}`);
    await env.db('panel_nodes').where({ name }).update({ state: 'alive', draining: true, roles: ['db'] });
    const drained = await admin.post(`/v1/orgs/${customer.id}/sites`, { domain: domain(), node: name });
    refused(drained, 409, 'conflict');
    assert.deepEqual(drained.json.error.details.reasons.map((x: { code: string }) => x.code), ['draining', 'no_web_role'], 'a draining db-only node is refused for both reasons');
  });

  it('operator PHP settings need php.admin and are applied to the pool', async () => {
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const d = domain('php');
    const r = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: d, php_version: '8.2' });
    assert.equal(r.status, 201, `a PHP 8.2 site is created: ${JSON.stringify(r.json)}`);
    assert.equal((await settled(customer.client, r.json.id)).json.status, 'active', 'the PHP 8.2 site becomes active');
    refused(await customer.client.patch(`/v1/sites/${r.json.id}/php`, { allow_url_fopen: true }), 403, 'power_missing');
    refused(await provider.client.patch(`/v1/sites/${r.json.id}/php`, { allow_url_fopen: true }), 403, 'power_missing');
    const tooMany = Array.from({ length: 65 }, (_, i) => `f${i}`).join(',');
    refused(await admin.patch(`/v1/sites/${r.json.id}/php`, { disabled_functions: tooMany }), 400, 'validation_failed');
    refused(await admin.patch(`/v1/sites/${r.json.id}/php`, { disabled_functions: 'exec, system()' }), 400, 'validation_failed');
    refused(await admin.patch(`/v1/sites/${r.json.id}/php`, {}), 400, 'validation_failed');
    const set = await admin.patch(`/v1/sites/${r.json.id}/php`, { allow_url_fopen: true, disabled_functions: 'exec, shell_exec,exec' });
    assert.equal(set.status, 200, JSON.stringify(set.json));
    assert.deepEqual(set.json.php.disabled_functions, ['exec', 'shell_exec'], 'disabled functions are trimmed and deduplicated');
    assert.equal(set.json.php.allow_url_fopen, true, 'allow_url_fopen is set');
    assert.equal((await settled(customer.client, r.json.id)).json.applied_generation, 2, 'the PHP settings are applied as generation 2');
    const pool = fs.readFileSync(path.join(panel.root, 'etc/php/8.2/pool.d', `${d}.conf`), 'utf8');
    assert.match(pool, /allow_url_fopen\]?\s*=\s*on/i, 'the pool allows url fopen');
    assert.match(pool, /exec,\s*shell_exec|shell_exec/, 'the pool disables the functions');
    const log = await admin.get(`/v1/orgs/${customer.id}/audit`);
    const entry = log.json.entries.find((e: { action: string }) => e.action === 'site.set_php');
    assert.deepEqual(entry.after, { allow_url_fopen: true, disabled_functions: ['exec', 'shell_exec'] }, 'the audit entry holds the new PHP settings');
  });

  it('an operation whose workflow start was lost (the API process died after its commit) is resumed', async () => {
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const d = domain();
    const r = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: d });
    await settled(customer.client, r.json.id);
    // what a suspend leaves when its process dies between the commit and the workflow start
    const opId = randomUUID();
    await env.db.transaction(async (trx) => {
      const [row] = await trx('panel_sites')
        .where({ id: r.json.id })
        .update({ suspended: true, generation: 2, status: 'pending', last_op_id: opId, updated_at: new Date(Date.now() - 120_000) })
        .returning('*');
      await queueOperation(trx, 'hosting', { id: opId, kind: 'site.apply', site: specOf(row) });
    });
    const connection = await Connection.connect({ address: env.temporalAddress });
    try {
      const deps = { db: env.db, temporal: new Client({ connection }), nodeOps: { taskQueue, timeoutMs: OP_TIMEOUT_MS, pollMs: 200 }, logger: env.logger };
      // every pending site of the shared test database is looked at (other suites leave hundreds), and a message keeps Node's assert from parsing the transpiled source
      // the panel's own resume pass (every minute) may have been first: then the site is no longer pending
      const resumed = (await resumePendingOps(deps, 60_000, 100_000)).includes(r.json.id);
      const row = await env.db('panel_sites').where({ id: r.json.id }).first('status');
      assert.ok(resumed || row.status !== 'pending', `the lost start is resumed (by this pass or the panel's own): ${row.status}`);
      const s = await settled(customer.client, r.json.id);
      assert.equal(s.json.status, 'suspended', 'the resumed suspend is applied');
      assert.equal(s.json.applied_generation, 2, "the resumed operation's generation 2 is applied");
      assert.equal((await serve(panel, d)).status, 503, 'the resumed suspension is served as 503');
      // a second pass finds nothing to start again
      assert.ok(!(await resumePendingOps(deps, 60_000, 100_000)).includes(r.json.id), 'nothing is started again');
    } finally {
      await connection.close();
    }
  });

  it('a site the node refuses (PHP version not installed) becomes failed with the node’s error and keeps its quota until deleted', async () => {
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer', limits: { disk_mb: 100 } });
    // The panel refuses a version the node's facts lack (site-php-version.test.ts); facts can be
    // stale between two reports, so make them claim 5.6: the node itself must still refuse it.
    await env.db('panel_nodes').where({ name: 'hosting' }).update({ facts: env.db.raw(`jsonb_set(coalesce(facts, '{}'), '{phpVersions}', coalesce(facts->'phpVersions', '[]') || '["5.6"]')`) });
    const r = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: domain(), php_version: '5.6', quota_mb: 100 });
    assert.equal(r.status, 201, 'stale facts: the panel takes it');
    const s = await settled(customer.client, r.json.id);
    assert.equal(s.json.status, 'failed', 'the refused site becomes failed');
    assert.match(s.json.error, /PHP 5\.6 is not available/, `the error is the node's: ${s.json.error}`);
    assert.equal(s.json.applied_generation, 0, 'the node applied no generation');
    refused(await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: domain(), quota_mb: 1 }), 409, 'limit_reached');
    const log = await reseller.client.get(`/v1/orgs/${customer.id}/audit`);
    const failed = log.json.entries.find((e: { action: string }) => e.action === 'site.failed');
    assert.equal(failed.after.refused, true, 'the audit entry says the node refused it');
    assert.equal((await customer.client.del(`/v1/sites/${r.json.id}`)).status, 202, 'the failed site can be deleted');
    await gone(customer.client, r.json.id);
    assert.equal((await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: domain(), quota_mb: 100 })).status, 201, "the failed site's quota is free after the delete");
  });
});

describe('panel: scheduled placement and agent nodes', function () {
  this.timeout(90_000);
  const taskQueue = `panel-test-${randomUUID()}`;
  let panel: SitesPanel;
  let admin: PanelClient;
  let factsFile: string;
  let writeFacts: (extra?: Array<Record<string, unknown>>) => void;
  let drained: string[] = [];
  const region = unique('eu-');
  const nodes = { staleFacts: unique('n-'), wrongRegion: unique('n-'), noPhp: unique('n-'), staleAgent: unique('n-'), good: unique('n-') };

  before(async function () {
    this.timeout(60_000);
    const now = Date.now();
    const day = 86_400_000;
    const fresh = new Date(now - day).toISOString();
    factsFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'panel-facts-')), 'facts.json');
    const entry = (node: string, o: Record<string, unknown> = {}) => ({ node, preflight_passed: true, checked_at: fresh, php_versions: ['8.2'], ...o });
    // read at every scheduled placement, so a test can add a node to it
    writeFacts = (extra = []) =>
      fs.writeFileSync(
        factsFile,
        JSON.stringify({
          nodes: [
            entry('hosting', { checked_at: new Date(now - 8 * day).toISOString() }),
            entry(nodes.staleFacts, { checked_at: new Date(now - 8 * day).toISOString() }),
            entry(nodes.wrongRegion),
            entry(nodes.noPhp, { php_versions: ['7.4'] }),
            entry(nodes.staleAgent),
            entry(nodes.good),
            ...extra,
          ],
        }),
      );
    writeFacts();
    panel = await startSitesPanel(['-placement', 'scheduled', '-placement-node-facts', factsFile, '-node-api-listen', '127.0.0.1:0'], true, taskQueue);
    admin = await platformAdmin(panel.url);
    // Nodes of other suites are taken out of the picture while this suite runs (draining), then put back.
    drained = (await env.db('panel_nodes').whereNot('name', 'hosting').where({ draining: false }).update({ draining: true }).returning('name')).map((r: { name: string }) => r.name);
    for (const name of Object.values(nodes)) {
      await addNode(env.db, null, name);
      await env.db('panel_nodes').where({ name }).update({ state: 'alive', roles: ['web'], logical_region: region, last_pull_at: new Date(), draining: name === nodes.good });
    }
    await env.db('panel_nodes').where({ name: nodes.wrongRegion }).update({ logical_region: 'elsewhere' });
    await env.db('panel_nodes').where({ name: nodes.staleAgent }).update({ last_pull_at: new Date(now - 5 * 60_000) });
  });
  after(async () => {
    await panel?.runtime.close();
    if (panel) fs.rmSync(panel.root, { recursive: true, force: true });
    await env.db('panel_nodes').whereIn('name', Object.values(nodes)).update({ draining: true });
    await env.db('panel_nodes').whereIn('name', drained).update({ draining: false });
  });

  it('no qualifying node: not created; the platform admin sees each node’s reason, a customer only that no node can take it (and the region)', async () => {
    const provider = await createOrgWithLogin(admin, { type: 'provider', required_region: region });
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const d = domain('sched');
    const mine = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: d, php_version: '8.2' });
    refused(mine, 409, 'conflict');
    assert.deepEqual(mine.json.error.details, { detail: `no node can take it in the required region "${region}"`, required_region: region }, 'the customer only reads that no node can take it, and the region');
    refused(await provider.client.post(`/v1/orgs/${customer.id}/sites`, { domain: d, php_version: '8.2' }), 409, 'conflict');

    const r = await admin.post(`/v1/orgs/${customer.id}/sites`, { domain: d, php_version: '8.2' });
    refused(r, 409, 'conflict');
    const reasons = Object.fromEntries(r.json.error.details.nodes.map((n: { node: string; reasons: Array<{ code: string }> }) => [n.node, n.reasons.map((x) => x.code)]));
    assert.deepEqual(reasons[nodes.staleFacts], ['facts_stale'], 'the node with stale facts is refused for them');
    assert.deepEqual(reasons[nodes.wrongRegion], ['wrong_region'], 'the node in another region is refused for it');
    assert.deepEqual(reasons[nodes.noPhp], ['php_missing'], 'the node without the PHP version is refused for it');
    assert.deepEqual(reasons[nodes.staleAgent], ['agent_stale'], 'the node whose agent stopped pulling is refused for it');
    assert.deepEqual(reasons[nodes.good], ['draining'], 'the draining node is refused for it');
    assert.ok(reasons.hosting.includes('facts_stale') && reasons.hosting.includes('wrong_region'), JSON.stringify(reasons.hosting));
    assert.equal(r.json.error.details.required_region, region, 'the admin reads the required region too');
    // nothing was created
    assert.equal((await admin.get(`/v1/orgs/${customer.id}/sites`)).json.sites.length, 0, 'nothing was created');
  });

  it('places on the least loaded qualifying node; an agent that never pulls leaves the site failed after the timeout', async () => {
    await env.db('panel_nodes').where({ name: nodes.good }).update({ draining: false, last_pull_at: new Date() });
    const provider = await createOrgWithLogin(admin, { type: 'provider', required_region: region });
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const t0 = Date.now();
    const r = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: domain('agent'), php_version: '8.2' });
    assert.equal(r.status, 201, JSON.stringify(r.json));
    assert.equal(r.json.node, nodes.good, 'the site is placed on the one qualifying node');
    assert.equal(r.json.status, 'pending', 'a site on an agent node is pending at once');
    // the customer reads why, without the other nodes; the platform admin with them
    const mine = await customer.client.get(`/v1/sites/${r.json.id}/placement`);
    assert.equal(mine.json.mode, 'scheduled', 'the placement was scheduled');
    assert.equal(mine.json.node, nodes.good, 'the placement names the chosen node');
    assert.match(mine.json.reason, /least loaded/, `the customer reads why: ${mine.json.reason}`);
    assert.equal(mine.json.nodes, undefined, 'the customer does not see the other nodes');
    const full = await admin.get(`/v1/sites/${r.json.id}/placement`);
    assert.equal(full.json.nodes[0].node, nodes.good, 'the admin sees the chosen node first');
    assert.equal(full.json.nodes[0].qualifies, true, 'the chosen node qualifies');
    assert.deepEqual(full.json.nodes.find((n: { node: string }) => n.node === nodes.noPhp).reasons.map((x: { code: string }) => x.code), ['php_missing'], 'the admin sees why the node without PHP was not taken');

    // the operation waits in the node's queue; nobody pulls it
    const op = await env.db('panel_node_ops').where({ id: r.json.operation_id }).first();
    assert.equal(op.node_name, nodes.good, "the operation waits in the chosen node's queue");
    assert.equal(op.status, 'queued', 'the operation is queued, not pulled');
    const s = await settled(customer.client, r.json.id, ['failed', 'active'], 20_000);
    assert.equal(s.json.status, 'failed', `the site fails when no agent reports: ${JSON.stringify(s.json)}`);
    assert.match(s.json.error, /did not report the operation within 2\.5 s/, `the error names the operation timeout: ${s.json.error}`);
    assert.ok(Date.now() - t0 >= OP_TIMEOUT_MS, `the site failed only after the operation timeout: ${Date.now() - t0} ms`);
    assert.equal((await env.db('panel_node_ops').where({ id: r.json.operation_id }).first()).status, 'expired', 'the unreported operation is expired');
  });

  it('a node with a real agent: the scheduler places the site there, the agent applies it, suspends it and deletes it', async function () {
    this.timeout(90_000);
    const name = unique('agent-');
    const added = await addNode(env.db, null, name);
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'panel-agent-'));
    fs.chmodSync(root, 0o755);
    const webPort = await freePort();
    const node = await startHostingNode({ root, webPort, webHost: '127.0.0.1', logger: env.logger });
    const agent = startAgent({ node: name, client: createPanelClient({ url: panel.runtime.nodeApiUrl!, token: added.token }), hostingNode: node, logger: env.logger, pollWaitSeconds: 5 });
    try {
      await agent.enrolled;
      // the controller (not run here) would mark it alive from its heartbeats; the operator labels its region
      await env.db('panel_nodes').where({ name }).update({ state: 'alive', logical_region: region });
      writeFacts([{ node: name, preflight_passed: true, checked_at: new Date().toISOString(), php_versions: node.facts().phpVersions }]);
      const deadline = Date.now() + 10_000;
      while (!(await env.db('panel_nodes').where({ name }).first()).last_pull_at && Date.now() < deadline) await new Promise((res) => setTimeout(res, 100));

      const provider = await createOrgWithLogin(admin, { type: 'provider', required_region: region });
      const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
      const d = domain('agent');
      const r = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: d, php_version: '8.2', aliases: [`www.${d}`] });
      assert.equal(r.status, 201, JSON.stringify(r.json));
      assert.equal(r.json.node, name, 'the site is placed on the agent node');
      const s = await settled(customer.client, r.json.id);
      assert.equal(s.json.status, 'active', JSON.stringify(s.json));
      assert.equal((await serve({ webPort }, `www.${d}`)).status, 200, 'the agent node serves the alias');
      assert.equal((await env.db('panel_node_ops').where({ id: r.json.operation_id }).first()).status, 'done', 'the agent reported the operation done');
      // the node API signalled the waiting workflow when the agent's result was recorded
      const connection = await Connection.connect({ address: env.temporalAddress });
      try {
        const history = await new Client({ connection }).workflow.getHandle(`node-op-${r.json.operation_id}`).fetchHistory();
        assert.ok(history.events!.some((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'nodeOpReported'), 'the workflow got the nodeOpReported signal');
      } finally {
        await connection.close();
      }

      assert.equal((await provider.client.post(`/v1/sites/${r.json.id}/suspend`)).status, 200, 'the provider suspends the site on the agent node');
      assert.equal((await settled(customer.client, r.json.id)).json.status, 'suspended', 'the agent applies the suspension');
      assert.equal((await serve({ webPort }, d)).status, 503, 'the agent node answers 503 for the suspended site');

      assert.equal((await customer.client.del(`/v1/sites/${r.json.id}`)).status, 202, 'the site on the agent node is deleted');
      await gone(customer.client, r.json.id);
      assert.notEqual((await serve({ webPort }, d)).status, 503, 'the deleted site is no longer served as suspended');
      assert.equal(await node.inspectSite(r.json.id), null, 'the agent node no longer knows the site');
    } finally {
      await agent.stop();
      await node.stop();
      await env.db('panel_nodes').where({ name }).update({ draining: true });
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});
