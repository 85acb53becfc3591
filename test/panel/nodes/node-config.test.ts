import assert from 'node:assert/strict';
import {
  isSafeRoot,
  phpSocketPath,
  renderCron,
  renderNginxMain,
  renderSiteFpmMain,
  renderPhpPool,
  renderVhost,
  renderWelcomePage,
  sitePaths,
  validateOperation,
  validateSite,
} from '../../../domain/panel/node-config';
import { isSiteCronLine } from '../../../domain/panel/cron';
import type { NodeOperation, SiteSpec } from '../../../domain/panel/node-ops';

// The files a hosting node writes, rendered from a site spec (domain/panel/node-config.ts).

const site = (over: Partial<SiteSpec> = {}): SiteSpec => ({
  id: '0b7f6c1e-9a4e-4a53-8f3e-2d1c7a9b5e11',
  domain: 'shop.example.com',
  aliases: ['www.shop.example.com'],
  phpVersion: '8.2',
  cron: ['*/5 * * * * php /srv/cron.php'],
  suspended: false,
  php: { workers: 4, allowUrlFopen: false, disabledFunctions: ['exec', 'shell_exec'] },
  generation: 3,
  ...over,
});
const root = '/srv/node1';
const listen = '127.0.0.1:8080';

describe('node config rendering', () => {
  it('renders a PHP vhost: names, docroot, PHP upstream, dot files denied', () => {
    const v = renderVhost(site(), { root, listen });
    assert.match(v, /generation 3/, 'the vhost names its generation');
    assert.match(v, /listen 127\.0\.0\.1:8080;/, 'the vhost listens on the node address');
    assert.match(v, /server_name shop\.example\.com www\.shop\.example\.com;/, 'server_name lists the domain and its aliases');
    assert.match(v, /root \/srv\/node1\/sites\/shop\.example\.com\/public_html;/, "the docroot is the site's public_html");
    assert.match(v, /fastcgi_pass unix:\/srv\/node1\/run\/php\/shop\.example\.com\.sock;/, "PHP goes to the site's own FPM socket");
    assert.match(v, /index index\.php index\.html/, 'index.php comes first');
    assert.match(v, /location ~ \/\\\.\(\?!well-known\/\) \{\s+deny all;/, 'dot files are denied, well-known excepted');
    assert.doesNotMatch(v, /503/, 'an active site has no 503 page');
  });

  it('renders a static vhost without PHP and a suspended one with only the 503 page', () => {
    const s = renderVhost(site({ phpVersion: null }), { root, listen });
    assert.doesNotMatch(s, /fastcgi|\.php/, 'a static site has no PHP');
    assert.match(s, /try_files \$uri \$uri\/ =404;/, 'a static site serves files or 404');
    const susp = renderVhost(site({ suspended: true }), { root, listen });
    assert.match(susp, /return 503;/, 'a suspended site answers 503');
    assert.match(susp, /error_page 503 \/suspended\.html;/, 'a suspended site shows the suspended page');
    assert.match(susp, /root \/srv\/node1\/etc\/nginx\/pages;/, 'the suspended page comes from the pages folder');
    assert.doesNotMatch(susp, /public_html|fastcgi_pass/, 'a suspended site serves no files and no PHP');
  });

  it('renders the PHP pool with the operator settings as php_admin values', () => {
    const p = renderPhpPool(site(), { root, user: 'www-data' });
    assert.match(p, /^\[shop\.example\.com\]$/m, 'the pool is named by the domain');
    assert.match(p, /^user = www-data$/m, 'the pool runs as the site user');
    assert.match(p, /^listen = \/srv\/node1\/run\/php\/shop\.example\.com\.sock$/m, "the pool listens on the site's socket");
    assert.match(p, /^pm\.max_children = 4$/m, 'max_children is the workers setting');
    assert.match(p, /^php_admin_flag\[allow_url_fopen\] = off$/m, 'allow_url_fopen off as php_admin_flag');
    assert.match(p, /^php_admin_value\[disable_functions\] = "exec,shell_exec"$/m, 'disabled functions as php_admin_value');
    assert.match(p, /^php_admin_value\[open_basedir\] = \/srv\/node1\/sites\/shop\.example\.com\/$/m, 'open_basedir is the site folder');
    assert.doesNotMatch(p, /^php_value/m, 'no setting a script could override');
    const q = renderPhpPool(site({ php: { workers: null, allowUrlFopen: true, disabledFunctions: ['exec', 'exec'] } }), { root, user: null });
    assert.match(q, /^pm\.max_children = 5$/m, 'a default of 5 workers when none is set');
    assert.match(q, /^php_admin_flag\[allow_url_fopen\] = on$/m, 'allow_url_fopen on when set');
    assert.match(q, /disable_functions\] = "exec"$/m, 'repeated disabled functions listed once');
    assert.doesNotMatch(q, /^user =/m, 'no user line without a user');
  });

  it('renders cron lines in cron.d format, run as the site user', () => {
    const c = renderCron(site({ cron: ['*/5  * * * *   php run.php --x', '0 3 * * mon echo hi'] }), { user: 'www-data' });
    assert.match(c, /^\*\/5 \* \* \* \* www-data php run\.php --x$/m, 'spaces collapsed and the user inserted');
    assert.match(c, /^0 3 \* \* mon www-data echo hi$/m, 'named weekdays kept, the user inserted');
    assert.match(c, /^SHELL=\/bin\/sh$/m, 'cron lines run under /bin/sh');
  });

  it('renders the main configs with everything inside the root', () => {
    const n = renderNginxMain({ root, listen, user: 'www-data' });
    assert.match(n, /^pid \/srv\/node1\/run\/nginx\.pid;$/m, 'the pid file is inside the root');
    assert.match(n, /listen 127\.0\.0\.1:8080 default_server;/, 'the default server listens on the node address');
    // only the vhosts the node wrote, through its site index: never every file of sites/ (issue 32 item 4)
    assert.match(n, /include \/srv\/node1\/etc\/nginx\/sites\.conf;/, 'nginx.conf includes the site index');
    assert.doesNotMatch(n, /sites\/\*\.conf/, 'no wildcard over the sites folder');
    for (const m of n.matchAll(/(?:_path|pid|error_log|access_log|include) (\S+)/g)) assert.ok(m[1].startsWith(root), m[0]);
    const f = renderSiteFpmMain({ root, version: '8.2', domain: 'a.example.com' });
    assert.match(f, /^include = \/srv\/node1\/etc\/php\/8\.2\/pool\.d\/a\.example\.com\.conf$/m, "a site's master includes its own pool only");
    assert.match(f, /^daemonize = no$/m, 'the master stays in the foreground, a child of the node');
  });

  it('names the PHP socket by a hash of the domain when the domain would pass the unix socket limit', () => {
    const long = `${'a'.repeat(60)}.${'b'.repeat(60)}.com`;
    const sock = phpSocketPath('/' + 'r'.repeat(71), site({ domain: long }));
    assert.match(sock, /\/run\/php\/site-[0-9a-f]{16}\.sock$/, 'a long domain gets a hashed socket name');
    assert.ok(sock.length <= 107, `the socket path fits a unix socket's 107 bytes: ${sock.length}`);
    assert.equal(sock, phpSocketPath('/' + 'r'.repeat(71), site({ domain: long, id: 'other' })), 'the socket name depends on the domain only');
    assert.notEqual(sock, phpSocketPath('/' + 'r'.repeat(71), site({ domain: `c${long.slice(1)}` })), 'another domain gets another socket');
    assert.equal(sitePaths(root, 'x.com').pool('8.2'), `${root}/etc/php/8.2/pool.d/x.com.conf`, "the pool file is under the site's PHP version");
  });

  it('refuses every value that could inject into a config', () => {
    assert.equal(validateSite(site()), null, 'a valid site passes');
    const bad: Array<[Partial<SiteSpec>, RegExp]> = [
      [{ domain: 'evil.com;\n}' }, /bad domain/],
      [{ domain: 'Example.COM' }, /bad domain/],
      [{ aliases: ['ok.com', 'x.com include /etc/passwd'] }, /bad alias/],
      [{ aliases: ['shop.example.com'] }, /repeat/],
      [{ cron: ['* * * * * echo ok\n* * * * * root rm -rf /'] }, /bad cron/],
      [{ cron: ['PATH=/tmp * * * * x'] }, /bad cron/],
      [{ cron: ['@sometimes echo'] }, /bad cron/],
      [{ cron: ['0 0 L * * echo'] }, /day of month/],
      [{ php: { workers: 4, allowUrlFopen: false, disabledFunctions: ['exec"\nphp_admin_value[open_basedir] = /'] } }, /bad PHP function/],
      [{ php: { workers: 0, allowUrlFopen: false, disabledFunctions: [] } }, /workers/],
      [{ phpVersion: '8.2;' }, /PHP version/],
      [{ id: '../x' }, /site id/],
      [{ generation: -1 }, /generation/],
    ];
    for (const [over, why] of bad) assert.match(validateSite(site(over)) ?? 'valid', why, JSON.stringify(over));
    assert.ok(isSiteCronLine('0 */2 1-5 jan,feb mon-fri /usr/bin/php x.php'), 'a cron line with ranges, steps and names is accepted');
  });

  it('validates database operations and operation kinds', () => {
    const ok: NodeOperation = { id: 'op-1', kind: 'database.create', database: 'shop_db', user: 'shop', password: 'a long password' };
    assert.equal(validateOperation(ok), null, 'a valid database operation passes');
    assert.match(validateOperation({ ...ok, database: 'x`; DROP' }) ?? '', /database name/, 'a bad database name is refused');
    assert.match(validateOperation({ ...ok, user: "u'@'%" }) ?? '', /database user/, 'a bad database user is refused');
    assert.match(validateOperation({ ...ok, password: 'short' }) ?? '', /password/, 'a short password is refused');
    assert.match(validateOperation({ ...ok, password: 'long enough\npassword' }) ?? '', /password/, 'a password with a newline is refused');
    assert.match(validateOperation({ id: 'op-2', kind: 'site.rename' } as unknown as NodeOperation) ?? '', /unknown operation/, 'an unknown kind is refused');
    assert.match(validateOperation({ id: 'a b', kind: 'site.delete', siteId: 'x', domain: 'x.com' }) ?? '', /operation id/, 'a bad operation id is refused');
  });

  it('accepts only plain absolute roots and escapes nothing in the welcome page', () => {
    assert.ok(isSafeRoot('/var/lib/panel-host/node_1'), 'a plain absolute root is safe');
    for (const r of ['relative/x', '/a b', '/a;b', '/a/../b', '/a/"b', '/', `/${'x'.repeat(72)}`]) assert.ok(!isSafeRoot(r), r);
    assert.match(renderWelcomePage('x.example.com', 'php'), /<\?php echo PHP_VERSION; \?>/, 'the welcome page shows the PHP version');
  });
});
