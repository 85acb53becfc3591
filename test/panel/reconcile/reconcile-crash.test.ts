import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { freePort } from '../../../platform/ports';
import { startPanelChild, type ChildHosting, type PanelChild } from '../../helpers/panel-child';
import { createOrgWithLogin, platformAdmin, unique } from '../../helpers/panel';
import { env } from '../../setup/env';
import { setPolicy, siteActive, waitPass } from '../../helpers/reconcile';

// A reconciliation pass whose panel process dies mid-way (SIGKILL: nothing is stopped, the worker
// holds a batch) is finished by the next panel process on the same hosting node; no site is
// rewritten twice (the node's own log of overwrites has one line per site) and every site ends in
// sync.

describe('panel: a reconciliation pass survives its worker being killed', function () {
  this.timeout(240_000);
  const SITES = 16;
  let root: string;
  let hosting: ChildHosting;
  let first: PanelChild | null = null;
  let second: PanelChild | null = null;
  const ids: string[] = [];

  before(async function () {
    this.timeout(120_000);
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'panel-rc-'));
    fs.chmodSync(root, 0o755);
    hosting = { root, webPort: await freePort(), taskQueue: `panel-test-${randomUUID()}`, reconcile: { batchSize: 2, heartbeatTimeoutMs: 3000 } };
    first = await startPanelChild({ flags: ['-reconcile', 'on'], child: hosting });
  });
  after(async function () {
    this.timeout(30_000);
    await first?.kill('SIGKILL');
    await second?.close();
    if (ids.length) await env.db('panel_sites').whereIn('id', ids).delete();
    fs.rmSync(root, { recursive: true, force: true });
  });

  it('kill -9 during a remediating pass: the next process resumes it, each drifted site is rewritten exactly once', async () => {
    const admin = await platformAdmin(first!.url);
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const domains: string[] = [];
    for (let i = 0; i < SITES; i++) {
      const domain = `${unique('k')}.crash.test`;
      const r = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain });
      assert.equal(r.status, 201, JSON.stringify(r.json));
      ids.push(r.json.id);
      domains.push(domain);
    }
    for (const id of ids) await siteActive(customer.client, id);
    const vhost = (d: string) => path.join(root, 'etc/nginx/sites', `${d}.conf`);
    const original = domains.map((d) => fs.readFileSync(vhost(d), 'utf8'));
    for (const id of ids) await setPolicy(admin, id, 'remediate');
    for (const d of domains) fs.appendFileSync(vhost(d), '# edited by hand\n');

    const run = await admin.post('/v1/reconcile/run');
    assert.equal(run.status, 202, JSON.stringify(run.json));
    const passId: string = run.json.pass.id;
    // kill the process once some batches are done and others are not
    for (const deadline = Date.now() + 60_000; ; ) {
      if ((await env.db('panel_reconcile_results').where({ pass_id: passId })).length >= 4) break;
      if (Date.now() > deadline) throw new Error('the pass made no progress');
      await new Promise((res) => setTimeout(res, 5));
    }
    await first!.kill('SIGKILL');
    const atKill = await env.db('panel_reconcile_results').where({ pass_id: passId, phase: 'done' });
    assert.ok(atKill.length < SITES, `the pass was still under way when killed (${atKill.length} of ${SITES} done)`);

    second = await startPanelChild({ flags: ['-reconcile', 'on'], child: hosting });
    const admin2 = await platformAdmin(second.url);
    const pass = await waitPass(admin2, passId, 120_000);
    assert.equal(pass.status, 'done', JSON.stringify(pass));
    // (other suites' sites of the same database may be in the pass too: count ours)
    const ours = await env.db('panel_reconcile_results').where({ pass_id: passId }).whereIn('site_id', ids);
    assert.equal(ours.length, SITES, 'every one of our sites has a result in the resumed pass');
    assert.ok(ours.every((r) => r.phase === 'done' && r.status === 'drift' && r.remediation.ok === true), JSON.stringify(ours.map((r) => [r.phase, r.status, r.remediation?.ok])));

    const log = fs.readFileSync(path.join(root, 'state/reconcile.log'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    assert.ok(log.every((l) => !l.failed), 'no rewrite failed');
    const perSite = new Map<string, number>();
    for (const l of log) perSite.set(l.site, (perSite.get(l.site) ?? 0) + 1);
    assert.equal(perSite.size, SITES, 'every site was rewritten');
    for (const [site, n] of perSite) assert.equal(n, 1, `site ${site} was rewritten ${n} times`);
    domains.forEach((d, i) => assert.equal(fs.readFileSync(vhost(d), 'utf8'), original[i], d));
    const events = await env.db('panel_reconcile_events').whereIn('site_id', ids).where({ pass_id: passId, kind: 'remediated' });
    assert.equal(events.length, SITES, 'one overwrite recorded per site');
    for (const id of ids) assert.equal((await admin2.get(`/v1/reconcile/sites/${id}`)).json.status, 'in_sync', `site ${id} is in sync after the resumed pass`);
  });
});
