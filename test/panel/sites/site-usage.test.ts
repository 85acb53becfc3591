import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import Decimal from 'decimal.js';
import { hourName } from '../../../domain/panel/billing';
import { recordHour } from '../../../services/panel/billing/metering';
import { createOrgWithLogin, getFromNode, platformAdmin, startHostingPanel, unique, type HostingPanel, type PanelClient } from '../../helpers/panel';
import { siteActive } from '../../helpers/reconcile';
import { until } from '../../helpers/until';
import { env } from '../../setup/env';

// Issue 34 §1: usage per site from its control group feeds metering and the usage page. A real
// hosting node (nginx, the site's own PHP-FPM master in its group): a busy PHP request raises the
// site's CPU seconds in GET /v1/sites/{id}/usage, the metered site-hour carries them, and a plan whose
// rate line prices CPU-hours bills them exactly.

describe('site usage from its control group', function () {
  this.timeout(180_000);
  let panel: HostingPanel;
  let provider: { id: string; client: PanelClient };
  let customer: { id: string; client: PanelClient };
  let site: { id: string; domain: string };

  before(async function () {
    this.timeout(120_000);
    if (!fs.existsSync('/sys/fs/cgroup/cpuacct/cgroup.procs') && !fs.existsSync('/sys/fs/cgroup/cgroup.controllers')) throw new Error('this test needs cgroups (v1 cpuacct or v2) as CI has them');
    panel = await startHostingPanel({ flags: ['-reconcile', 'dry-run'], reportEveryMs: 500, opTimeoutMs: 20_000 });
    const admin = await platformAdmin(panel.url);
    provider = await createOrgWithLogin(admin, { type: 'provider' });
    customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const domain = `${unique('use')}.example.com`;
    const r = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain, php_version: '8.2' });
    assert.equal(r.status, 201, JSON.stringify(r.json));
    await siteActive(customer.client, r.json.id, 60_000);
    site = { id: r.json.id, domain };
  });
  after(async function () {
    this.timeout(60_000);
    await panel?.close();
  });

  const usage = async (c: PanelClient = customer.client) => {
    const r = await c.get(`/v1/sites/${site.id}/usage`);
    assert.equal(r.status, 200, JSON.stringify(r.json));
    return r.json;
  };

  it('a busy PHP request raises CPU seconds in the API, the metered hour and a CPU-priced statement line', async () => {
    const before = await until('the first report of the site group', async () => {
      const u = await usage();
      return u.group ? u : null;
    }, 15_000);
    const cpuBefore: number = before.hours[0]?.cpu_seconds ?? 0;
    fs.writeFileSync(path.join(panel.root, 'sites', site.domain, 'public_html', 'busy.php'), '<?php $cpu = function () { $r = getrusage(); return $r["ru_utime.tv_sec"] + $r["ru_utime.tv_usec"] / 1e6 + $r["ru_stime.tv_sec"] + $r["ru_stime.tv_usec"] / 1e6; }; $c = $cpu(); $t = microtime(true); while (microtime(true) - $t < 1.5) {} echo $cpu() - $c;', { mode: 0o644 });
    const busy = await getFromNode(panel.webPort, site.domain, '/busy.php');
    assert.equal(busy.status, 200, busy.body);
    // the CPU time the request itself used, by its own count (the box may be busy: less than the 1.5 s it ran)
    const spent = Number(busy.body);
    assert.ok(spent >= 0.2, `the busy loop used CPU: ${busy.body} s`);

    const after = await until(`CPU seconds to rise by the ${spent} s the request used`, async () => {
      const u = await usage();
      return u.hours[0] && u.hours[0].cpu_seconds >= cpuBefore + spent * 0.95 ? u : null;
    }, 20_000);
    console.log(`      request CPU ${spent.toFixed(3)} s; site CPU this hour: ${cpuBefore.toFixed(3)} s → ${after.hours[0].cpu_seconds.toFixed(3)} s; group ${after.group.cpu_seconds.toFixed(3)} s, memory peak ${after.hours[0].memory_peak_mb} MB, processes ${after.hours[0].processes_max}`);
    // the group's counter and the process's own rusage tick apart: within 5 % (the same bound as above)
    assert.ok(after.group.cpu_seconds >= spent * 0.95, `the group counted the busy loop (${spent} s by its own count): ${JSON.stringify(after.group)}`);
    assert.ok(after.hours[0].memory_peak_mb > 0, `the hour has a memory peak: ${JSON.stringify(after.hours[0])}`);
    assert.ok(after.hours[0].processes_max >= 1, `the hour saw the PHP processes: ${JSON.stringify(after.hours[0])}`);
    assert.equal((await provider.client.get(`/v1/sites/${site.id}/usage`)).status, 200, 'the level above reads it');
    const stranger = await createOrgWithLogin(provider.client, { type: 'customer' });
    assert.equal((await stranger.client.get(`/v1/sites/${site.id}/usage`)).status, 404, 'another account does not see it');

    // a plan whose rate line prices CPU-hours (0.36 EUR: 0.0001 per CPU second) and memory GiB-hours, billed from the site's hour
    const plan = await provider.client.post(`/v1/orgs/${provider.id}/billing-plans`, { name: 'usage', currency: 'EUR', base_price: '0', account_price: '0', rates: 'default 0 0 0 0.36 0.5' });
    assert.equal(plan.status, 201, JSON.stringify(plan.json));
    assert.equal((await provider.client.put(`/v1/orgs/${customer.id}/billing-plan`, { plan_id: plan.json.id })).status, 200, 'assigned');
    const hour = new Date(after.hours[0].hour);
    await env.db('panel_billing_assignments').where({ org_id: customer.id }).update({ effective_from: new Date(hour.getTime() - 3_600_000) });
    await new Promise((r) => setTimeout(r, 1200)); // the last report of the hour is in
    const metered = await recordHour(env.db, hourName(hour));
    assert.ok(metered.sites >= 1, `the hour metered the site: ${JSON.stringify(metered)}`);
    const row = await env.db('panel_meter_sites').where({ site_id: site.id, hour }).first();
    const counted = await env.db('panel_site_usage_hours').where({ site_id: site.id, hour }).first();
    assert.ok(Number(row.cpu_us) >= spent * 0.95e6, `the metered site-hour carries the CPU microseconds: ${row.cpu_us}`);
    assert.equal(row.cpu_us, counted.cpu_us, 'as the site counted them in that hour');
    assert.ok(Number(row.memory_peak_bytes) > 0, 'and its memory peak');

    const st = await provider.client.get(`/v1/orgs/${customer.id}/billing/statement?period=${hourName(hour).slice(0, 7)}`);
    assert.equal(st.status, 200, JSON.stringify(st.json));
    const cpu = st.json.lines.find((l: { kind: string }) => l.kind === 'cpu');
    assert.ok(cpu, `a cpu line: ${JSON.stringify(st.json.lines)}`);
    const cpuUs = new Decimal(row.cpu_us);
    assert.equal(cpu.quantity_hours, cpuUs.dividedBy(3_600_000_000).toFixed(), 'CPU-hours from the integer microseconds');
    assert.equal(cpu.amount, cpuUs.times('0.36').dividedBy(3_600_000_000).toFixed(2, Decimal.ROUND_HALF_UP), 'priced once, rounded once');
    const memory = st.json.lines.find((l: { kind: string }) => l.kind === 'memory');
    assert.equal(memory?.quantity_hours, new Decimal(row.memory_peak_bytes).dividedBy(1024 ** 3).toFixed(), `memory GiB-hours from the hour's peak: ${JSON.stringify(memory)}`);
  });
});
