import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { nodeGroupBase, openCgroups } from '../../../hosting-node/cgroups';
import { startHostingNode } from '../../../hosting-node';
import { freePort } from '../../../platform/ports';
import { opId, siteSpec, tempNodeRoot } from '../../helpers/hosting-node';
import { createOrgWithLogin, getFromNode, platformAdmin, startHostingPanel, unique, type HostingPanel, type PanelClient } from '../../helpers/panel';
import { runPass, siteActive } from '../../helpers/reconcile';
import { env } from '../../setup/env';
import { until } from '../../helpers/until';

// Issue 34 §1: limits that bind on the node. A real panel with its real hosting node (nginx, one
// PHP-FPM master per site, cgroup v1 on these machines): a site at 64 MB that allocates 256 MB
// fails while the node and the other site answer; a site at 10 processes cannot fork more; a busy
// loop at 20 % of a core gets at most ~25 % by its group's counters over 10 s; limits lowered from
// above reach the group without restarting the node; the console's data says what binds.

const CG = '/sys/fs/cgroup';
const v1 = fs.existsSync(`${CG}/memory/cgroup.procs`);

describe('site limits on a real node (cgroup v1)', function () {
  this.timeout(240_000);
  let panel: HostingPanel;
  let provider: { id: string; client: PanelClient };
  let limited: { id: string; client: PanelClient };
  let a: { id: string; domain: string };
  let b: { id: string; domain: string };
  const group = (controller: string, domain: string) => `${CG}/${controller}/${nodeGroupBase(panel.root)}/${domain}`;
  const read = (controller: string, file: string, domain = a.domain) => fs.readFileSync(`${group(controller, domain)}/${file}`, 'utf8').trim();
  const docroot = (domain: string) => path.join(panel.root, 'sites', domain, 'public_html');
  const put = (domain: string, name: string, php: string) => fs.writeFileSync(path.join(docroot(domain), name), php, { mode: 0o644 });
  const masterPid = (domain: string) => Number(fs.readFileSync(path.join(panel.root, 'run/php', `${domain}.pid`), 'utf8').trim());

  before(async function () {
    if (!v1) throw new Error('these tests need cgroup v1 controllers mounted read-write at /sys/fs/cgroup/<controller> (as CI has them)');
    this.timeout(120_000);
    panel = await startHostingPanel({ flags: ['-reconcile', 'dry-run'], reportEveryMs: 1000, opTimeoutMs: 20_000 });
    const admin = await platformAdmin(panel.url);
    provider = await createOrgWithLogin(admin, { type: 'provider' });
    limited = await createOrgWithLogin(provider.client, { type: 'customer', limits: { cpu_percent: 20, memory_mb: 64, processes: 10 } });
    const free = await createOrgWithLogin(provider.client, { type: 'customer' });
    const create = async (c: { id: string; client: PanelClient }, cron: string[] = []) => {
      const domain = `${unique('lim')}.example.com`;
      const r = await c.client.post(`/v1/orgs/${c.id}/sites`, { domain, php_version: '8.2', cron });
      assert.equal(r.status, 201, JSON.stringify(r.json));
      await siteActive(c.client, r.json.id, 60_000);
      return { id: r.json.id as string, domain };
    };
    // the cron line shows which groups its run was in
    a = await create(limited, ['* * * * * cat /proc/self/cgroup > public_html/cron-cgroup.txt']);
    b = await create(free);
  });
  after(async function () {
    this.timeout(60_000);
    await panel?.close();
  });

  it('the node reports what it enforces; the site says per limit what binds it; its PHP master and workers are in its group', async () => {
    const site = await until(
      'the site view with the node facts',
      async () => {
        const r = await limited.client.get(`/v1/sites/${a.id}`);
        assert.equal(r.status, 200, JSON.stringify(r.json));
        return r.json.limits.cpu_percent.on_node === 'enforced' ? r.json : null;
      },
      15_000,
    );
    assert.deepEqual(site.limits.cpu_percent, { value: 20, on_node: 'enforced' }, 'cpu');
    assert.deepEqual(site.limits.memory_mb, { value: 64, on_node: 'enforced' }, 'memory');
    assert.deepEqual(site.limits.processes, { value: 10, on_node: 'enforced' }, 'processes');
    assert.deepEqual(site.limits.disk_io_bps, { value: null, on_node: 'enforced' }, 'no disk I/O limit set, the node could bind one');
    const node = await env.db('panel_nodes').where({ name: 'hosting' }).first();
    assert.deepEqual(node.facts.limits, { cpu: true, memory: true, pids: true, io: true }, 'the node says what it binds');

    assert.equal(read('cpu', 'cpu.cfs_quota_us'), '20000', '20 % of a 100 ms period');
    assert.equal(read('memory', 'memory.limit_in_bytes'), String(64 * 1048576), '64 MB hard limit');
    assert.equal(read('pids', 'pids.max'), '10', 'processes');
    assert.equal(read('pids', 'pids.max', b.domain), 'max', 'the other account has no process limit');
    // a request makes the master fork a worker: both are in the group of every controller
    put(a.domain, 'pid.php', '<?php echo getmypid();');
    const w = await getFromNode(panel.webPort, a.domain, '/pid.php');
    assert.equal(w.status, 200, w.body);
    for (const c of ['cpu', 'cpuacct', 'memory', 'pids', 'blkio']) {
      const procs = read(c, 'cgroup.procs').split('\n').map(Number);
      assert.ok(procs.includes(masterPid(a.domain)), `the master is in the ${c} group`);
      assert.ok(procs.includes(Number(w.body)), `the worker ${w.body} is in the ${c} group`);
    }
  });

  it('64 MB: PHP allocating 256 MB fails; the node, the site and the other site keep answering', async () => {
    put(a.domain, 'alloc.php', "<?php ini_set('memory_limit', '1024M'); $a = []; for ($i = 0; $i < 256; $i++) { $a[] = str_repeat(chr(65 + $i % 26), 1048576); } echo 'allocated ', count($a), ' MB';");
    put(b.domain, 'alloc.php', "<?php ini_set('memory_limit', '1024M'); $a = []; for ($i = 0; $i < 256; $i++) { $a[] = str_repeat('x', 1048576); } echo 'allocated ', count($a), ' MB';");
    const r = await getFromNode(panel.webPort, a.domain, '/alloc.php');
    assert.notEqual(r.status, 200, `the allocation must fail: ${r.status} ${r.body.slice(0, 200)}`);
    assert.doesNotMatch(r.body, /allocated 256 MB/, 'no 256 MB in a 64 MB group');
    const peakMb = Number(read('memory', 'memory.max_usage_in_bytes')) / 1048576;
    const oom = /oom_kill (\d+)/.exec(read('memory', 'memory.oom_control'))?.[1];
    console.log(`      memory: HTTP ${r.status}; group peak ${peakMb.toFixed(1)} MB of 64; oom kills ${oom}`);
    assert.ok(peakMb <= 64.01, `the group never went past 64 MB: ${peakMb}`);
    assert.ok(Number(oom) >= 1, 'the kernel killed the worker (out of memory in its group)');
    // the same script on the unlimited account gets its 256 MB; the limited site still answers
    const other = await getFromNode(panel.webPort, b.domain, '/alloc.php');
    assert.equal(other.status, 200, other.body);
    assert.match(other.body, /allocated 256 MB/, 'the other site is not bound by this limit');
    const again = await getFromNode(panel.webPort, a.domain, '/pid.php');
    assert.equal(again.status, 200, `the site's master forks a new worker: ${again.body}`);
  });

  it('processes 10: PHP cannot fork past the limit', async () => {
    // each child is reaped (proc_close): a zombie still counts against pids.max
    put(a.domain, 'fork.php', "<?php $p = []; for ($i = 0; $i < 30; $i++) { $h = @proc_open(['sleep', '5'], [], $pipes); if ($h === false) break; $p[] = $h; } echo count($p); foreach ($p as $h) { proc_terminate($h); proc_close($h); }");
    const before = Number(/max (\d+)/.exec(read('pids', 'pids.events'))?.[1] ?? 0);
    const r = await getFromNode(panel.webPort, a.domain, '/fork.php');
    assert.equal(r.status, 200, r.body);
    const started = Number(r.body);
    const refused = Number(/max (\d+)/.exec(read('pids', 'pids.events'))?.[1] ?? 0) - before;
    console.log(`      processes: ${started} of 30 children started with master + worker in a group of 10; forks refused by pids.max: ${refused}`);
    assert.ok(started <= 8, `at most 10 processes in the group (master, worker, children): ${started} children`);
    assert.ok(refused >= 1, 'the kernel refused a fork at pids.max');
    const b2 = await getFromNode(panel.webPort, b.domain, '/pid.php'.replace('pid', 'index'));
    assert.equal(b2.status, 200, 'the other site answers');
  });

  it('20 % CPU: a 10 s busy loop gets at most ~25 % of one core by its group counters', async () => {
    put(a.domain, 'busy.php', '<?php $end = microtime(true) + 10; $n = 0; while (microtime(true) < $end) { $n++; } echo $n;');
    const cpu0 = Number(read('cpuacct', 'cpuacct.usage'));
    const thr0 = Number(/nr_throttled (\d+)/.exec(read('cpu', 'cpu.stat'))?.[1]);
    const t0 = process.hrtime.bigint();
    const r = await getFromNode(panel.webPort, a.domain, '/busy.php');
    const wall = Number(process.hrtime.bigint() - t0) / 1e9;
    assert.equal(r.status, 200, r.body);
    const used = (Number(read('cpuacct', 'cpuacct.usage')) - cpu0) / 1e9;
    const throttled = Number(/nr_throttled (\d+)/.exec(read('cpu', 'cpu.stat'))?.[1]) - thr0;
    console.log(`      cpu: ${used.toFixed(2)} s of CPU in ${wall.toFixed(1)} s = ${((100 * used) / wall).toFixed(1)} % of one core; throttled in ${throttled} periods`);
    assert.ok(used / wall <= 0.25, `≤ 25 % of one core: ${((100 * used) / wall).toFixed(1)} %`);
    assert.ok(used / wall >= 0.1, `the loop ran (not starved): ${((100 * used) / wall).toFixed(1)} %`);
    assert.ok(throttled > 0, 'the CFS quota throttled the group');
    // the node reports the group's counters with its site usage (the hosting node every second here)
    const usage = await until(
      'the group counters in the recorded usage',
      async () => {
        const n = await env.db('panel_nodes').where({ name: 'hosting' }).first();
        const u = (n.site_usage ?? []).find((x: { siteId: string }) => x.siteId === a.id);
        return u?.group?.cpuSeconds >= used ? u.group : null;
      },
      15_000,
    );
    assert.ok(usage.memoryPeakMb > 0 && usage.memoryPeakMb <= 64.01, `memory peak ${usage.memoryPeakMb}`);
  });

  it('limits lowered from above reach the group within a minute, without restarting the node', async () => {
    const master = masterPid(a.domain);
    const t0 = Date.now();
    const r = await provider.client.put(`/v1/orgs/${limited.id}/limits`, { limits: { cpu_percent: 10, memory_mb: 56, processes: 6, php_workers: 2 } });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    await until('the lowered limits in the group', () => read('pids', 'pids.max') === '6' && read('cpu', 'cpu.cfs_quota_us') === '10000' && read('memory', 'memory.limit_in_bytes') === String(56 * 1048576), 60_000);
    console.log(`      lowered limits reached the group in ${Date.now() - t0} ms`);
    await siteActive(limited.client, a.id, 30_000);
    assert.equal(masterPid(a.domain), master, 'the same master (the new generation reloads its pool in place)');
    const fork = await getFromNode(panel.webPort, a.domain, '/fork.php');
    assert.equal(fork.status, 200, fork.body);
    assert.ok(Number(fork.body) <= 4, `6 processes now: ${fork.body} children`);
    const v = await limited.client.get(`/v1/sites/${a.id}`);
    assert.deepEqual(v.json.limits.processes, { value: 6, on_node: 'enforced' }, 'the site shows the new limit');
    assert.equal(v.json.php.workers, 2, 'the lowered PHP workers limit is the site\'s too');
    assert.match(fs.readFileSync(path.join(panel.root, 'etc/php/8.2/pool.d', `${a.domain}.conf`), 'utf8'), /^pm\.max_children = 2$/m, 'and its pool has that many workers at most');
  });

  it("cron runs are in the site's group; reconciliation reports a group changed by hand as drift", async () => {
    const f = path.join(docroot(a.domain), 'cron-cgroup.txt');
    const text = await until('a cron run', () => fs.existsSync(f) && fs.readFileSync(f, 'utf8'), 70_000);
    for (const c of ['cpu', 'memory', 'pids']) assert.match(text, new RegExp(`:${c}:/${nodeGroupBase(panel.root)}/${a.domain.replace(/\./g, '\\.')}\\n`), `the run was in the site's ${c} group: ${text}`);
    fs.writeFileSync(`${group('pids', a.domain)}/pids.max`, '500');
    const admin = await platformAdmin(panel.url);
    await runPass(admin);
    const v = await admin.get(`/v1/reconcile/sites/${a.id}`);
    assert.equal(v.status, 200, JSON.stringify(v.json));
    assert.equal(v.json.status, 'drift', JSON.stringify(v.json));
    const finding = v.json.findings.find((x: { kind?: string }) => x.kind === 'cgroup');
    assert.ok(finding, JSON.stringify(v.json.findings));
    assert.deepEqual(finding.diff.slice(1), ['-processes=6', '+processes=500'], 'the diff names the setting');
  });
});

describe('one PHP-FPM master per site: its memory', function () {
  this.timeout(180_000);

  it('measures the masters of 20 idle PHP sites (RSS and PSS) and extrapolates to 200; a restart brings them back in their groups', async () => {
    const root = tempNodeRoot('fpm-cost-');
    const start = async () => startHostingNode({ root, webPort: await freePort(), webHost: '127.0.0.1', logger: env.logger });
    let node = await start();
    try {
      const N = 20;
      for (let i = 0; i < N; i++) {
        const r = await node.apply({ id: opId(), kind: 'site.apply', site: siteSpec({ phpVersion: '8.2' }) });
        assert.equal(r.ok, true, JSON.stringify(r));
      }
      const pids = fs.readdirSync(path.join(root, 'run/php')).filter((f) => f.endsWith('.pid')).map((f) => Number(fs.readFileSync(path.join(root, 'run/php', f), 'utf8')));
      assert.equal(pids.length, N, 'a master per site');
      const kb = (pid: number, field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1]);
      const rss = pids.reduce((n, p) => n + kb(p, 'Rss'), 0) / 1024;
      const pss = pids.reduce((n, p) => n + kb(p, 'Pss'), 0) / 1024;
      console.log(`      ${N} masters: RSS ${rss.toFixed(1)} MB (${(rss / N).toFixed(2)} MB each), PSS ${pss.toFixed(1)} MB (${(pss / N).toFixed(2)} MB each); 200 sites ≈ ${((pss / N) * 200).toFixed(0)} MB PSS`);
      assert.ok(pss / N < 32, `a master's own memory stays small: ${(pss / N).toFixed(2)} MB`);
      // a restart brings every site's master back (a few at a time), each in its group
      await node.stop();
      const t0 = Date.now();
      node = await start();
      const again = fs.readdirSync(path.join(root, 'run/php')).filter((f) => f.endsWith('.pid'));
      console.log(`      restart with ${N} PHP sites: ${Date.now() - t0} ms`);
      assert.equal(again.length, N, 'every master is back');
      for (const f of again) {
        const pid = fs.readFileSync(path.join(root, 'run/php', f), 'utf8').trim();
        assert.ok(fs.readFileSync(`${CG}/pids/${nodeGroupBase(root)}/${f.replace(/\.pid$/, '')}/cgroup.procs`, 'utf8').split('\n').includes(pid), `${f}: the master is in its group`);
      }
    } finally {
      await node.stop();
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('control groups: a node claims only what it can write', function () {
  const none = { cpu: false, memory: false, pids: false, io: false };
  const limits = { cpuPercent: 20, memoryMb: 64, processes: 10, diskIoBps: null, iops: null };

  it("a cgroup v2 tree without the cpu, memory, pids and io controllers (this machine's /sys/fs/cgroup/unified) enforces nothing", () => {
    assert.ok(fs.existsSync('/sys/fs/cgroup/unified/cgroup.controllers'), 'this machine mounts a v2 tree at /sys/fs/cgroup/unified (its controllers are bound to v1)');
    const root = tempNodeRoot('cg2-');
    try {
      const g = openCgroups({ root, logger: env.logger, mount: '/sys/fs/cgroup/unified' });
      assert.equal(g.layout, 'v2', 'detected by cgroup.controllers');
      assert.deepEqual(g.enforced, none, 'the probe group accepted no limit');
      g.apply('a.example.com', limits);
      assert.deepEqual(g.procsFiles('a.example.com'), [], 'nothing is started in a group that binds nothing');
      assert.equal(g.render(limits), '', 'reconciliation compares no settings');
      g.close();
      assert.ok(!fs.existsSync(`/sys/fs/cgroup/unified/${nodeGroupBase(root)}`), 'the base group is removed');
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  it('a folder that is no cgroup mount: no layout, nothing enforced', () => {
    const root = tempNodeRoot('cg0-');
    try {
      const g = openCgroups({ root, logger: env.logger, mount: root });
      assert.equal(g.layout, null, 'no layout');
      assert.deepEqual(g.enforced, none, 'nothing enforced');
      assert.equal(g.read('a.example.com'), null, 'no group to read');
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});
