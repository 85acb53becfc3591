import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { evaluateAlerts } from '../../../services/panel/alerts/evaluate';
import { createOrgWithLogin, getFromNode, platformAdmin, startHostingPanel, unique, type HostingPanel, type PanelClient } from '../../helpers/panel';
import { runPass, setPolicy, siteActive } from '../../helpers/reconcile';
import { env } from '../../setup/env';

// A deleted site folder on the hosting node (issue 32 item 3), with real nginx: the pass says
// `missing` (not in sync), the reconcile_missing alert opens at the next evaluation; a remediate
// pass recreates the docroot empty (files come back only from a restore point) and the alert resolves.

describe('panel: reconciliation sees a deleted docroot', function () {
  this.timeout(120_000);
  let host: HostingPanel;
  let admin: PanelClient;
  let site: { id: string; domain: string };

  before(async function () {
    this.timeout(90_000);
    host = await startHostingPanel({ flags: ['-reconcile', 'on', '-metrics-interval', '1h'], reconcile: { batchSize: 5, heartbeatTimeoutMs: 10_000 } });
    admin = await platformAdmin(host.url);
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const domain = `${unique('gone-')}.reconcile.test`;
    const r = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain });
    assert.equal(r.status, 201, JSON.stringify(r.json));
    site = { id: r.json.id, domain };
    await siteActive(customer.client, site.id);
  });
  after(async function () {
    this.timeout(30_000);
    await host?.close();
  });

  const alertsOf = async () => {
    const r = await admin.get('/v1/alerts?state=unresolved');
    assert.equal(r.status, 200, JSON.stringify(r.json));
    return (r.json.alerts as Array<{ rule: string; site_id: string | null; state: string; summary: string }>).filter((a) => a.rule === 'reconcile_missing' && a.site_id === site.id);
  };

  it('rm -rf of the site folder is `missing` with an alert; remediation recreates the docroot empty and the alert resolves', async () => {
    const siteDir = path.join(host.root, 'sites', site.domain);
    const docroot = path.join(siteDir, 'public_html');
    assert.equal((await getFromNode(host.webPort, site.domain)).status, 200, 'the new site answers');
    const first = await runPass(admin);
    assert.equal(first.counts.missing ?? 0, 0, `nothing missing yet: ${JSON.stringify(first.counts)}`);

    fs.rmSync(siteDir, { recursive: true, force: true });
    const found = await runPass(admin);
    assert.equal(found.counts.missing, 1, `the pass counts the site missing: ${JSON.stringify(found.counts)}`);
    const view = (await admin.get(`/v1/reconcile/sites/${site.id}`)).json;
    assert.equal(view.status, 'missing', JSON.stringify(view));
    assert.deepEqual(view.findings, [{ problem: 'docroot_missing', path: docroot }], 'the finding names the docroot');
    assert.ok(!fs.existsSync(docroot), 'an observed site is not touched');

    await evaluateAlerts(env.db);
    const open = await alertsOf();
    assert.equal(open.length, 1, `one reconcile_missing alert for the site: ${JSON.stringify(open)}`);
    assert.match(open[0].summary, new RegExp(site.domain.replace(/\./g, '\\.')), 'the summary names the site');

    await setPolicy(admin, site.id, 'remediate');
    const fixed = await runPass(admin);
    assert.equal(fixed.remediated, 1, `one site rewritten: ${JSON.stringify(fixed)}`);
    assert.ok(fs.statSync(docroot).isDirectory(), 'the docroot is back');
    assert.deepEqual(fs.readdirSync(docroot), [], 'empty: files come back only from a restore point');
    const after = (await admin.get(`/v1/reconcile/sites/${site.id}`)).json;
    assert.equal(after.status, 'in_sync', JSON.stringify(after));
    const remediated = after.events.find((e: { kind: string }) => e.kind === 'remediated');
    assert.match(remediated?.detail?.docroot ?? '', /recreated empty/, `the event says the docroot came back empty: ${JSON.stringify(after.events)}`);
    const served = await getFromNode(host.webPort, site.domain, '/missing.html');
    assert.equal(served.status, 404, 'nginx serves the empty docroot again');

    await evaluateAlerts(env.db);
    assert.deepEqual(await alertsOf(), [], 'the alert resolved once the site is in sync');
  });
});
