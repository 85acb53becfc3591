import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { startAgent } from '../../../hosting-node/agent';
import { startHostingNode, type HostingNode } from '../../../hosting-node';
import { createPanelClient } from '../../../hosting-node/panel-client';
import { findBinary, isAlive, run } from '../../../hosting-node/processes';
import { siteUserName } from '../../../hosting-node/site-users';
import { freePort } from '../../../platform/ports';
import type { NodeOperation, OperationResult } from '../../../domain/panel/node-ops';
import { opId, siteGet, siteSpec, startFakePanel, tempNodeRoot } from '../../helpers/hosting-node';
import { env } from '../../setup/env';
import { until } from '../../helpers/until';

// A hosting node with the real services of PANEL.md section 2: nginx, PHP-FPM 8.2 and (when it
// comes up in time) MariaDB, all under a temp root, serving by Host header on a free port.

const PHP = '8.2';
/** an operation without its id (each kind on its own, so object literals are checked) */
type OpBody = { [K in NodeOperation['kind']]: Omit<Extract<NodeOperation, { kind: K }>, 'id'> }[NodeOperation['kind']];

describe('hosting node: nginx, PHP-FPM and MariaDB under its own root', function () {
  let root: string;
  let port: number;
  let node: HostingNode;
  const apply = (op: OpBody) => node.apply({ id: opId(), ...op } as NodeOperation);

  before(async function () {
    // .ci/run installs nginx, PHP-FPM and MariaDB: a missing one is a broken machine, not a reason to skip.
    assert.ok(findBinary('nginx') && findBinary(`php-fpm${PHP}`), 'nginx and php-fpm are needed (apt-get install nginx php8.2-fpm)');
    root = tempNodeRoot();
    [port] = await Promise.all([freePort()]);
    assert.ok(findBinary('mariadbd'), 'MariaDB is needed (apt-get install mariadb-server)');
    const dbPort = await freePort();
    node = await startHostingNode({ root, webPort: port, webHost: '127.0.0.1', mariadbPort: dbPort, mariadbTimeoutMs: 15_000, logger: env.logger });
  });

  after(async () => {
    await node?.stop();
    if (root) fs.rmSync(root, { recursive: true, force: true });
  });

  it('serves a new site by its domain and aliases and runs its PHP', async () => {
    const s = siteSpec({ aliases: ['www.shop.example.com'], domain: 'shop.example.com', phpVersion: PHP });
    const r = await apply({ kind: 'site.apply', site: s });
    assert.equal(r.ok, true, JSON.stringify(r));
    const docroot = path.join(root, 'sites', s.domain, 'public_html');
    assert.ok(fs.existsSync(path.join(docroot, 'index.html')) && fs.existsSync(path.join(docroot, 'index.php')), `the site's starter index.html and index.php are in ${docroot}`);
    const home = await siteGet(port, s.domain);
    assert.equal(home.status, 200, `the site's home page is served: ${home.body.slice(0, 300)}`);
    assert.match(home.body, /shop\.example\.com works/, 'the starter page names the site');
    assert.match(home.body, new RegExp(`PHP ${PHP.replace('.', '\\.')}\\.\\d+ is running`), "the starter page shows PHP running in the site's version");
    assert.equal((await siteGet(port, 'www.shop.example.com', '/index.html')).status, 200, 'an alias serves the site too');
    fs.writeFileSync(path.join(docroot, 'answer.php'), '<?php echo 6*7;');
    assert.deepEqual([(await siteGet(port, 'www.shop.example.com', '/answer.php')).body], ['42'], 'PHP runs for the alias: 6*7');
    // a Host no site claims gets the default server, never a site
    assert.equal((await siteGet(port, 'other.example.org')).status, 404, "a Host no site claims gets the default server's 404");
    // dot files are not served
    fs.writeFileSync(path.join(docroot, '.env'), 'SECRET=1');
    assert.equal((await siteGet(port, s.domain, '/.env')).status, 403, 'dot files are refused');
    assert.ok(fs.readFileSync(path.join(root, 'etc/php', PHP, 'pool.d', `${s.domain}.conf`), 'utf8').includes(`[${s.domain}]`), `the PHP-FPM pool of ${s.domain} is written`);
  });

  it('applies disable_functions and allow_url_fopen so that the site cannot override them', async () => {
    const s = siteSpec({ phpVersion: PHP, php: { workers: 2, allowUrlFopen: false, disabledFunctions: ['exec', 'shell_exec'] } });
    assert.equal((await apply({ kind: 'site.apply', site: s })).ok, true, 'the site with PHP restrictions is applied');
    const docroot = path.join(root, 'sites', s.domain, 'public_html');
    fs.writeFileSync(
      path.join(docroot, 'check.php'),
      `<?php
try { exec('id'); echo 'exec ran'; } catch (\\Error $e) { echo 'exec disabled'; }
echo '|', ini_get('disable_functions');
echo '|', var_export(ini_set('allow_url_fopen', '1'), true), '|', var_export((bool) ini_get('allow_url_fopen'), true);
echo '|', var_export(ini_set('disable_functions', ''), true);`,
    );
    // a .user.ini cannot change operator settings either
    fs.writeFileSync(path.join(docroot, '.user.ini'), 'allow_url_fopen = On\n');
    const r = await siteGet(port, s.domain, '/check.php');
    assert.equal(r.body, 'exec disabled|exec,shell_exec|false|false|false', 'exec is disabled and neither allow_url_fopen nor disable_functions can be changed by the site');
  });

  it('serves the suspended page (503) while suspended, and the site again once resumed', async () => {
    const s = siteSpec({ phpVersion: PHP });
    await apply({ kind: 'site.apply', site: s });
    assert.equal((await siteGet(port, s.domain)).status, 200, 'the site is served before the suspension');
    assert.equal((await apply({ kind: 'site.apply', site: { ...s, suspended: true, generation: 2 } })).ok, true, 'the suspension is applied');
    for (const p of ['/', '/index.php', '/index.html', '/missing']) {
      const r = await siteGet(port, s.domain, p);
      assert.equal(r.status, 503, p);
      assert.match(r.body, /This site is suspended/, `${p} shows the suspended page`);
    }
    await apply({ kind: 'site.apply', site: { ...s, suspended: false, generation: 3 } });
    assert.match((await siteGet(port, s.domain)).body, /works/, 'the site is served again once resumed');
  });

  it('does nothing for a repeated operation id and reports the same result', async () => {
    const s = siteSpec();
    const id = opId();
    const first = await node.apply({ id, kind: 'site.apply', site: s });
    assert.equal(first.ok, true, `the first apply succeeds: ${JSON.stringify(first)}`);
    fs.rmSync(path.join(root, 'etc/nginx/sites', `${s.domain}.conf`));
    // the same id, even with other content: the recorded result, nothing written
    const again = await node.apply({ id, kind: 'site.apply', site: { ...s, generation: 5 } });
    assert.deepEqual(again, first, 'a repeated operation id reports the recorded result');
    assert.ok(!fs.existsSync(path.join(root, 'etc/nginx/sites', `${s.domain}.conf`)), 'a repeated operation id writes no vhost');
    // recorded on disk
    assert.ok(fs.readFileSync(path.join(root, 'state/applied-ops.json'), 'utf8').includes(id), `the applied operation ${id} is recorded in state/applied-ops.json`);
  });

  it('rewrites the files for a new generation and refuses a stale one', async () => {
    const s = siteSpec({ phpVersion: PHP, cron: ['*/5 * * * * php cron.php'] });
    await apply({ kind: 'site.apply', site: s });
    const pool = path.join(root, 'etc/php', PHP, 'pool.d', `${s.domain}.conf`);
    const cron = path.join(root, 'etc/cron.d', s.domain);
    assert.match(fs.readFileSync(pool, 'utf8'), /pm\.max_children = 2/, 'the pool has the 2 workers of the first generation');
    const next = { ...s, generation: 2, aliases: [`www.${s.domain}`], cron: ['0 3 * * * php nightly.php'], php: { ...s.php, workers: 7 } };
    const r = await apply({ kind: 'site.apply', site: next });
    assert.equal(r.ok, true, `the new generation is applied: ${JSON.stringify(r)}`);
    assert.equal((r as { detail: Record<string, unknown> }).detail.generation, 2, 'the result reports generation 2');
    assert.match(fs.readFileSync(pool, 'utf8'), /generation 2[\s\S]*pm\.max_children = 7/, 'the pool is rewritten for generation 2 with 7 workers');
    // the site's cron lines run as its own system user (a root node)
    assert.match(fs.readFileSync(cron, 'utf8'), new RegExp(`^0 3 \\* \\* \\* ${siteUserName(node.root, s.id)} php nightly\\.php$`, 'm'), "the new cron line runs as the site's own system user");
    assert.doesNotMatch(fs.readFileSync(cron, 'utf8'), /cron\.php/, 'the old cron line is gone');
    assert.equal((await siteGet(port, `www.${s.domain}`)).status, 200, 'the new alias is served');
    // manual edits show as drift, the applied generation is reported
    fs.appendFileSync(pool, '; edited by hand\n');
    const seen = await node.inspectSite(s.id);
    assert.equal(seen?.generation, 2, 'the node reports the applied generation');
    const byKind = Object.fromEntries(seen!.files.map((f) => [f.kind, f.expected === f.actual]));
    assert.deepEqual(byKind, { vhost: true, pool: false, cron: true }, 'only the hand-edited pool shows drift');
    const stale = await apply({ kind: 'site.apply', site: { ...s, generation: 1 } });
    assert.deepEqual([stale.ok, (stale as { refused: boolean }).refused], [false, true], `a stale generation is refused: ${JSON.stringify(stale)}`);
    // static now: the pool goes away
    assert.equal((await apply({ kind: 'site.apply', site: { ...next, phpVersion: null, generation: 3 } })).ok, true, 'the site turned static is applied');
    assert.ok(!fs.existsSync(pool), `a static site has no PHP-FPM pool: ${pool}`);
  });

  it('deletes a site: vhost, pool, cron and docroot', async () => {
    const s = siteSpec({ phpVersion: PHP, cron: ['* * * * * true'] });
    await apply({ kind: 'site.apply', site: s });
    const files = [
      path.join(root, 'etc/nginx/sites', `${s.domain}.conf`),
      path.join(root, 'etc/php', PHP, 'pool.d', `${s.domain}.conf`),
      path.join(root, 'etc/cron.d', s.domain),
      path.join(root, 'sites', s.domain, 'public_html'),
    ];
    for (const f of files) assert.ok(fs.existsSync(f), f);
    const r = await apply({ kind: 'site.delete', siteId: s.id, domain: s.domain });
    assert.deepEqual(r, { ok: true, detail: { existed: true } }, "the site's files existed and are deleted");
    for (const f of files) assert.ok(!fs.existsSync(f), f);
    assert.ok(!fs.existsSync(path.join(root, 'sites', s.domain)), `the deleted site's folder is gone: ${s.domain}`);
    assert.equal((await siteGet(port, s.domain)).status, 404, 'the deleted site is no longer served');
    assert.equal(await node.inspectSite(s.id), null, 'the node no longer knows the deleted site');
    // deleting again is fine
    assert.deepEqual(await apply({ kind: 'site.delete', siteId: s.id, domain: s.domain }), { ok: true, detail: { existed: false } }, 'deleting again is fine and says it did not exist');
  });

  it('refuses a bad domain, cron line or function name and writes nothing', async () => {
    const listing = () => JSON.stringify([fs.readdirSync(path.join(root, 'etc/nginx/sites')), fs.readdirSync(path.join(root, 'etc/cron.d')), fs.readdirSync(path.join(root, 'sites')), fs.readdirSync(path.join(root, 'etc/php', PHP, 'pool.d'))]);
    const before = listing();
    const bad = [
      siteSpec({ domain: 'evil.example.com;\ninclude /etc/passwd' }),
      siteSpec({ cron: ['* * * * * echo hi\n* * * * * root rm -rf /'] }),
      siteSpec({ phpVersion: PHP, php: { workers: 2, allowUrlFopen: false, disabledFunctions: ['exec"\nphp_admin_value[open_basedir]=/'] } }),
      siteSpec({ aliases: ['../../etc'] }),
    ];
    for (const site of bad) {
      const r = await apply({ kind: 'site.apply', site });
      assert.deepEqual([r.ok, (r as { refused: boolean }).refused], [false, true], JSON.stringify(r));
    }
    // a version the node does not run, a domain another site serves
    const other = siteSpec({ phpVersion: '5.6' });
    assert.match((await apply({ kind: 'site.apply', site: other })).ok ? '' : 'refused', /refused/, 'a PHP version the node does not run is refused');
    assert.equal(listing(), before, 'the refused operations wrote nothing');
    const owner = siteSpec();
    await apply({ kind: 'site.apply', site: owner });
    const clash = await apply({ kind: 'site.apply', site: siteSpec({ aliases: [owner.domain] }) });
    assert.match((clash as { error: string }).error, /already served/, 'a domain another site serves is refused');
  });

  it('fails an operation whose config fails nginx -t, keeping the running config and the other sites', async () => {
    const served = siteSpec();
    await apply({ kind: 'site.apply', site: served });
    // a hand-written file in sites/ is never loaded (the site index): break the node's own nginx.conf
    const conf = path.join(root, 'etc/nginx.conf');
    const good = fs.readFileSync(conf, 'utf8');
    fs.writeFileSync(conf, `${good}this is not nginx config\n`);
    try {
      const s = siteSpec();
      const r = (await apply({ kind: 'site.apply', site: s })) as Extract<OperationResult, { ok: false }>;
      assert.deepEqual([r.ok, r.refused], [false, false], `a config that fails nginx -t fails the operation, not refused: ${JSON.stringify(r)}`);
      assert.match(r.error, /config test failed/, 'the error says the config test failed');
      // the new vhost was put back (absent), the running nginx still serves the others
      assert.ok(!fs.existsSync(path.join(root, 'etc/nginx/sites', `${s.domain}.conf`)), `a vhost that fails nginx's config test is removed again: ${s.domain}`);
      assert.equal((await siteGet(port, served.domain)).status, 200, 'the running nginx still serves the other site');
      assert.equal((await siteGet(port, s.domain)).status, 404, 'the new site is not served');
    } finally {
      fs.writeFileSync(conf, good);
    }
  });

  it('reports facts and real metrics and usage', async () => {
    const f = node.facts();
    assert.equal(f.webServer, 'nginx', 'the facts name nginx as the web server');
    assert.ok(f.phpVersions.includes(PHP), `the facts list PHP ${PHP}: ${f.phpVersions.join(', ')}`);
    assert.equal(f.webAddress, `127.0.0.1:${port}`, 'the facts give the web address');
    assert.deepEqual(f.roles, f.mariadb ? ['web', 'db'] : ['web'], 'the roles include db when MariaDB runs');
    const m = await node.metrics();
    assert.equal(m.bootId, fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim(), "the boot id is the kernel's");
    assert.ok(m.uptimeSeconds > 0 && m.memory.totalMb > 0 && m.memory.availableMb <= m.memory.totalMb, `uptime and memory: ${JSON.stringify({ uptime: m.uptimeSeconds, memory: m.memory })}`);
    assert.ok(m.rootFs.totalMb > 0 && m.rootFs.freeMb <= m.rootFs.totalMb, `root file system: ${JSON.stringify(m.rootFs)}`);
    assert.ok(m.cpuPercent >= 0 && m.cpuPercent <= 100 && m.load.length === 3, `cpu ${m.cpuPercent} % and load ${JSON.stringify(m.load)}`);
    assert.ok(m.network.rxBytes >= 0 && m.network.txBytes >= 0, `network counters: ${JSON.stringify(m.network)}`);
    const s = siteSpec();
    await apply({ kind: 'site.apply', site: s });
    fs.mkdirSync(path.join(root, 'sites', s.domain, 'public_html/big'));
    fs.writeFileSync(path.join(root, 'sites', s.domain, 'public_html/big/file.bin'), Buffer.alloc(3 * 1048576, 1));
    const u = (await node.usage()).find((x) => x.siteId === s.id)!;
    assert.ok(u.diskMb >= 3 && u.diskMb < 3.2, String(u.diskMb));
    assert.equal(u.inodes, 4, `the usage counts the site's inodes: public_html, index.html, big, big/file.bin (${u.inodes})`); // public_html, index.html, big, big/file.bin
  });

  it('creates and drops a database with its own user (MariaDB)', async function () {
    assert.equal(node.facts().mariadb, true, 'MariaDB started on the node');
    const password = `pa'ss\\w"rd ${Date.now()}`;
    const r = await apply({ kind: 'database.create', database: 'shop_db', user: 'shop_user', password });
    assert.equal(r.ok, true, JSON.stringify(r));
    const sock = path.join(root, 'run/my.sock');
    const as = (pw: string, sql: string) => run('mariadb', ['--no-defaults', `--socket=${sock}`, '--user=shop_user', `--password=${pw}`, '--batch', '--skip-column-names', '-e', sql]);
    const ok = await as(password, 'CREATE TABLE shop_db.t (x INT); INSERT INTO shop_db.t VALUES (42); SELECT x FROM shop_db.t; SHOW DATABASES;');
    assert.equal(ok.code, 0, ok.stderr);
    assert.deepEqual(ok.stdout.trim().split('\n'), ['42', 'information_schema', 'shop_db'], "the user sees its table's row and only its own database");
    // limited to its database
    const other = await as(password, 'CREATE DATABASE shopXdb');
    assert.notEqual(other.code, 0, `the user cannot create another database: ${other.stderr}`);
    assert.equal((await as('wrong password', 'SELECT 1')).code, 1, 'a wrong password is refused');
    assert.equal((await apply({ kind: 'database.delete', database: 'shop_db', user: 'shop_user' })).ok, true, 'the database is dropped');
    assert.notEqual((await as(password, 'SELECT 1')).code, 0, 'the user is gone with its database');
    const left = await run('mariadb', ['--no-defaults', `--socket=${sock}`, '--batch', '--skip-column-names', '-e', "SHOW DATABASES LIKE 'shop_db'"]);
    assert.equal(left.stdout.trim(), '', 'the dropped database is gone');
  });
});

describe('hosting node: restarted on the same root', function () {
  it('serves its sites again and still knows the operations it applied', async function () {
    assert.ok(findBinary('nginx'), 'nginx is needed');
    const root = tempNodeRoot();
    const port = await freePort();
    const start = () => startHostingNode({ root, webPort: port, webHost: '127.0.0.1', phpFpm: false, logger: env.logger });
    let node = await start();
    try {
      assert.deepEqual(node.facts().phpVersions, [], 'without PHP-FPM no PHP version is reported');
      const s = siteSpec();
      const op: NodeOperation = { id: opId(), kind: 'site.apply', site: s };
      const first = await node.apply(op);
      await node.stop();
      assert.notEqual((await siteGet(port, s.domain).catch((e: Error) => ({ status: e.message }))).status, 200, 'the stopped node serves nothing');
      node = await start();
      assert.match((await siteGet(port, s.domain)).body, /works/, 'the restarted node serves the site again');
      assert.deepEqual(await node.apply(op), first, 'the restarted node answers a known operation from its record');
      assert.equal((await node.usage())[0].siteId, s.id, "the restarted node reports the site's usage");
    } finally {
      await node.stop();
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('hosting node: built-in web server (no nginx)', function () {
  let root: string;
  let port: number;
  let node: HostingNode;

  before(async () => {
    root = tempNodeRoot();
    port = await freePort();
    node = await startHostingNode({ root, webPort: port, webHost: '127.0.0.1', builtinWebServer: true, logger: env.logger });
  });
  after(async () => {
    await node?.stop();
    fs.rmSync(root, { recursive: true, force: true });
  });

  it('serves static docroots by Host header, never outside them, no PHP', async () => {
    assert.deepEqual(node.facts(), { webServer: 'builtin', phpVersions: [], mariadb: false, roles: ['web'], webAddress: `127.0.0.1:${port}`, backups: false, tls: false, siteUsers: true, limits: node.facts().limits }, 'facts');
    const s = siteSpec({ aliases: ['alias.example.net'] });
    assert.equal((await node.apply({ id: opId(), kind: 'site.apply', site: s })).ok, true, 'the site is applied by the built-in server');
    assert.ok(!fs.existsSync(path.join(root, 'etc/nginx/sites', `${s.domain}.conf`)), 'the built-in web server writes no nginx vhost');
    assert.match((await siteGet(port, s.domain)).body, /works/, 'the built-in server serves the site by its domain');
    assert.equal((await siteGet(port, 'alias.example.net:8080', '/index.html')).status, 200, 'an alias with a port in Host is served');
    assert.equal((await siteGet(port, 'unknown.example.net')).status, 404, 'an unknown Host gets 404');
    fs.writeFileSync(path.join(root, 'secret.txt'), 'root secret');
    fs.writeFileSync(path.join(root, 'sites', s.domain, 'public_html', 'x.php'), '<?php echo 1;');
    fs.symlinkSync(path.join(root, 'secret.txt'), path.join(root, 'sites', s.domain, 'public_html', 'link.txt'));
    for (const p of ['/../../secret.txt', '/%2e%2e/%2e%2e/secret.txt', '/..%2f..%2fsecret.txt', '/link.txt', '/x.php', '/.%2e/x']) {
      const r = await siteGet(port, s.domain, p);
      assert.ok(r.status >= 400 && !r.body.includes('root secret'), `${p}: ${r.status}`);
    }
    const refused = await node.apply({ id: opId(), kind: 'site.apply', site: siteSpec({ phpVersion: '8.2' }) });
    assert.deepEqual([refused.ok, (refused as { refused: boolean }).refused], [false, true], `a PHP site is refused by the built-in server: ${JSON.stringify(refused)}`);
    await node.apply({ id: opId(), kind: 'site.apply', site: { ...s, suspended: true, generation: 2 } });
    const susp = await siteGet(port, s.domain);
    assert.equal(susp.status, 503, 'the suspended site answers 503');
    assert.match(susp.body, /suspended/, 'the suspended page is shown');
    const db = await node.apply({ id: opId(), kind: 'database.create', database: 'a', user: 'b', password: 'long password' });
    assert.match((db as { error: string }).error, /no MariaDB/, 'no database without MariaDB');
  });
});

describe('panel-host agent', function () {
  it('enrols, pulls, applies, reports each result until accepted, heartbeats and counts reconnects', async () => {
    const panel = await startFakePanel();
    const root = tempNodeRoot();
    const node = await startHostingNode({ root, webPort: await freePort(), webHost: '127.0.0.1', builtinWebServer: true, logger: env.logger });
    const agent = startAgent({ node: 'web-2', client: createPanelClient({ url: panel.url, token: 'tok-1' }), hostingNode: node, logger: env.logger, heartbeatMs: 100, pollWaitSeconds: 1, backoffMs: { min: 20, max: 100 } });
    try {
      await agent.enrolled;
      assert.deepEqual(panel.enrolments, [{ node: 'web-2', facts: node.facts(), agentStartedAt: agent.agentStartedAt }], "the agent enrolled once with the node's facts");
      panel.failResults = 2;
      const s = siteSpec();
      panel.queue.push({ id: 'op-a', kind: 'site.apply', site: s }, { id: 'op-b', kind: 'site.apply', site: siteSpec({ domain: 'bad_domain' }) });
      await until('both results', () => panel.results.size === 2);
      assert.deepEqual(panel.results.get('op-a'), { ok: true, detail: { generation: 1, files: { cron: (panel.results.get('op-a') as { detail: { files: { cron: string } } }).detail.files.cron } } }, 'op-a applied as generation 1');
      assert.equal((panel.results.get('op-b') as { refused: boolean }).refused, true, `the bad domain is refused: ${JSON.stringify(panel.results.get('op-b'))}`);
      // two refused posts, then accepted (a post whose answer is lost under load is sent again: at least 3)
      const attempts = panel.resultAttempts.get('op-a')!;
      assert.ok(attempts >= 3, `op-a result posted ${attempts} times`);
      assert.ok(fs.existsSync(path.join(root, 'sites', s.domain, 'public_html/index.html')), `the site was applied after the refused result posts: ${s.domain}`);
      // a re-sent operation is answered from the record
      panel.queue.push({ id: 'op-a', kind: 'site.apply', site: { ...s, generation: 9 } });
      await until('re-sent result', () => panel.resultAttempts.get('op-a')! > attempts);
      // heartbeats carry facts, metrics and usage; the panel going away and back is one reconnect
      await until('heartbeat with usage', () => panel.heartbeats.some((h) => (h.usage as unknown[]).length > 0) || panel.heartbeats.length > 0);
      const hb = panel.heartbeats.at(-1)!;
      assert.deepEqual(Object.keys(hb).sort(), ['agentStartedAt', 'cronRuns', 'facts', 'metrics', 'reconnects', 'usage'], 'heartbeat fields');
      // the 503s to the result posts were a failure too: at least one reconnect already
      const before = agent.reconnects();
      assert.ok(before >= 1, `the refused result posts count as reconnects: ${before}`);
      panel.down = true;
      await new Promise((r) => setTimeout(r, 300));
      panel.down = false;
      await until('a heartbeat after the reconnect', () => panel.heartbeats.some((h) => h.reconnects === before + 1));
      assert.equal(agent.reconnects(), before + 1, "one outage is one reconnect, however many calls were in flight");
      assert.deepEqual([...panel.authorizations], ['Bearer tok-1'], 'the agent sends its bearer token, and only it');
    } finally {
      await agent.stop();
      await node.stop();
      await panel.close();
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  it('panel-host serve: a bad flag exits 2 naming it; SIGTERM stops nginx and PHP-FPM and exits 0', async function () {
    const bin = path.join(__dirname, '../../../bin/panel-host.cjs');
    const exec = (args: string[]) => run(process.execPath, [bin, ...args]);
    const root = tempNodeRoot();
    const tokenFile = path.join(root, 'token');
    fs.writeFileSync(tokenFile, 'tok-2\n');
    const bad = await exec(['serve', '-node', 'Bad_Name', '-root', '/tmp/x', '-panel', 'http://p', '-token-file', '/nonexistent']);
    assert.equal(bad.code, 2, `a bad -node flag exits 2: ${bad.stderr}`);
    assert.match(bad.stderr, /-node "Bad_Name"/, 'the error names the -node flag and its value');
    const badPort = await exec(['serve', '--node=web-1', '-root', '/tmp/x', '-panel', 'http://p', '-token-file', tokenFile, '--mariadb-port', '99999']);
    assert.deepEqual([badPort.code, /-mariadb-port "99999"/.test(badPort.stderr)], [2, true], badPort.stderr);
    const noToken = await exec(['serve', '-node', 'web-1', '-root', '/tmp/x', '-panel', 'http://p', '-token-file', '/nonexistent']);
    assert.match(noToken.stderr, /-token-file "\/nonexistent": cannot be read/, 'the error names the unreadable token file');
    assert.ok(findBinary('nginx'), 'nginx is needed');
    const panel = await startFakePanel();
    const child = spawn(process.execPath, [bin, 'serve', '-node', 'web-3', '-root', path.join(root, 'node'), '-panel', panel.url, '-token-file', tokenFile, '-web-listen', `127.0.0.1:${await freePort()}`], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, LOG_LEVEL: 'warn' },
    });
    let stderr = '';
    child.stderr!.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    try {
      await until('enrolment', () => panel.enrolments.length === 1 || child.exitCode !== null, 20_000);
      assert.equal(child.exitCode, null, stderr);
      assert.equal((panel.enrolments[0] as { facts: { webServer: string } }).facts.webServer, 'nginx', 'the agent enrolled with nginx as its web server');
      const nginxPid = Number(fs.readFileSync(path.join(root, 'node/run/nginx.pid'), 'utf8'));
      assert.ok(isAlive(nginxPid), `nginx runs under the agent: pid ${nginxPid}`);
      child.kill('SIGTERM');
      assert.equal(await exited, 0, stderr);
      assert.ok(!isAlive(nginxPid), `SIGTERM stops the agent's nginx: pid ${nginxPid}`);
      assert.ok(!fs.readdirSync(path.join(root, 'node/run/php')).some((f) => f.endsWith('.pid')), 'php-fpm removed its pid file');
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      await panel.close();
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});
