import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { evaluateAlerts } from '../../../services/panel/alerts/evaluate';
import { createOrgWithLogin, getFromNode, platformAdmin, startHostingPanel, unique, type HostingPanel, type PanelClient } from '../../helpers/panel';
import { runPass, siteActive } from '../../helpers/reconcile';
import { env } from '../../setup/env';

// A hand-written file in the node's nginx sites folder (issue 32 item 4), with real nginx: nginx
// loads only the vhosts the panel wrote (listed in etc/nginx/sites.conf), so a stray server block
// (the issue's own, one claiming another site's name, one claiming default_server) captures no
// traffic and breaks no reload; the pass lists each as an orphan and each gets an alert.

describe('panel: a stray vhost cannot take the node over', function () {
  this.timeout(120_000);
  let host: HostingPanel;
  let admin: PanelClient;
  let customer: Awaited<ReturnType<typeof createOrgWithLogin>>;
  const domains: string[] = [];

  const createSite = async () => {
    const domain = `${unique('s-')}.stray.test`;
    const r = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain });
    assert.equal(r.status, 201, JSON.stringify(r.json));
    await siteActive(customer.client, r.json.id);
    domains.push(domain);
    return domain;
  };

  before(async function () {
    this.timeout(90_000);
    host = await startHostingPanel({ flags: ['-reconcile', 'dry-run', '-metrics-interval', '1h'] });
    admin = await platformAdmin(host.url);
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    await createSite();
  });
  after(async function () {
    this.timeout(30_000);
    await host?.close();
  });

  it('stray server blocks are never loaded: every site answers across reloads, the strays are orphans with one alert each', async () => {
    const sitesDir = path.join(host.root, 'etc/nginx/sites');
    const victim = domains[0];
    const strays = {
      [path.join(sitesDir, 'orphan.test.conf')]: `server { listen 127.0.0.1:${host.webPort}; server_name orphan.test; return 200 "orphan\\n"; }\n`,
      // sorted before every site's vhost: the first server_name wins in nginx
      [path.join(sitesDir, '00-capture.conf')]: `server { listen 127.0.0.1:${host.webPort}; server_name ${victim}; return 200 "captured\\n"; }\n`,
      // a second default_server fails nginx -t: every later reload would be refused
      [path.join(sitesDir, 'zz-default.conf')]: `server { listen 127.0.0.1:${host.webPort} default_server; server_name _; return 200 "default\\n"; }\n`,
    };
    for (const [f, text] of Object.entries(strays)) fs.writeFileSync(f, text);

    // a new site reloads nginx with the strays on disk
    const added = await createSite();
    for (const d of domains) {
      const r = await getFromNode(host.webPort, d);
      assert.equal(r.status, 200, `${d} still answers: ${r.status} ${r.body.slice(0, 80)}`);
      assert.ok(!/captured|orphan|default/.test(r.body), `${d} serves its own page, not a stray's`);
    }
    assert.equal((await getFromNode(host.webPort, 'orphan.test')).status, 404, 'the stray name is not served (default 404)');
    assert.equal((await getFromNode(host.webPort, 'unknown.stray.test')).status, 404, 'an unknown host still gets the panel default');
    assert.ok(domains.includes(added), 'the site created with strays on disk is active');

    const pass = await runPass(admin);
    const listed = pass.orphans.files.map((f: { path: string }) => f.path).sort();
    assert.deepEqual(listed, Object.keys(strays).sort(), `every stray is an orphan: ${JSON.stringify(pass.orphans)}`);
    await evaluateAlerts(env.db);
    const alerts = (await admin.get('/v1/alerts?state=unresolved')).json.alerts.filter((a: { rule: string }) => a.rule === 'reconcile_orphan');
    assert.deepEqual(
      alerts.map((a: { subject: string }) => a.subject).sort(),
      Object.keys(strays).map((f) => `orphan:${f}`).sort(),
      `one reconcile_orphan alert per stray: ${JSON.stringify(alerts)}`,
    );
    for (const f of Object.keys(strays)) assert.ok(fs.existsSync(f), `${f}: an orphan is reported, never removed`);

    // removed by the operator: the next pass lists none and the alerts resolve
    for (const f of Object.keys(strays)) fs.rmSync(f);
    await runPass(admin);
    await evaluateAlerts(env.db);
    const left = (await admin.get('/v1/alerts?state=unresolved')).json.alerts.filter((a: { rule: string }) => a.rule === 'reconcile_orphan');
    assert.deepEqual(left, [], 'the orphan alerts resolved');
  });
});
