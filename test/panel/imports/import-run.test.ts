import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { promisify } from 'node:util';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { run } from '../../../hosting-node/processes';
import { importWorkflowId } from '../../../domain/panel/workflows';
import { adminSql, settledImport, uploadArchive as upload } from '../../helpers/imports';
import { UNSAFE, writeAccountArchive, type ArchiveOptions } from '../../helpers/legacy-archive';
import { createOrgWithLogin, getFromNode, platformAdmin, startHostingPanel, tablesContaining, unique, type HostingPanel, type PanelClient, type Reply } from '../../helpers/panel';
import { env } from '../../setup/env';

// Legacy import runs over real HTTP into a real panel whose hosting node runs nginx and MariaDB,
// with a real Temporal worker (import-<id>): upload (report, quota check, refusals with the copy
// deleted), run, progress; afterwards the sites serve the imported files, the databases hold the
// imported rows, passwords appear once, the archive copy is gone, pre-existing items are untouched.

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'panel-import-run-'));
const uploads = path.join(dir, 'uploads');

const serve = getFromNode;

export const archiveFor = async (label: string, o: ArchiveOptions = {}) => {
  const user = unique(label).toLowerCase();
  const domain = `${user}.test`;
  const file = await writeAccountArchive(path.join(dir, `cpmove-${user}.tar.gz`), { user, domain, ...o });
  return { user, domain, file };
};

describe('panel: legacy import runs (upload, quota check, import-<id> workflow)', function () {
  this.timeout(180_000);
  let panel: HostingPanel;
  let provider: { id: string; client: PanelClient };
  let connection: Connection;

  before(async function () {
    this.timeout(120_000);
    panel = await startHostingPanel({ mariadb: true, opTimeoutMs: 30_000, imports: { dir: uploads, limits: { maxRatio: 1000 } } });
    const admin = await platformAdmin(panel.url);
    provider = await createOrgWithLogin(admin, { type: 'provider' });
    connection = await Connection.connect({ address: env.temporalAddress });
  });
  after(async () => {
    await connection?.close();
    await panel?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('refuses an unsafe archive with 422 and deletes the uploaded copy', async () => {
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const { file } = await archiveFor('uns', { extra: UNSAFE.symlink_outside });
    const r = await upload(provider.client, customer.id, file);
    assert.equal(r.status, 422, JSON.stringify(r.json));
    assert.equal(r.json.error.code, 'unsafe_archive', 'the refusal\'s code is unsafe_archive');
    assert.match(r.json.error.details.refused[0].note, /symbolic link to the absolute path \/etc\/passwd/, 'the refusal names the symbolic link to /etc/passwd');
    assert.deepEqual(fs.readdirSync(uploads), [], 'the uploaded copy of the refused archive is deleted');
    const row = await env.db('panel_imports').where({ id: r.json.error.details.import_id }).first();
    assert.equal(row.status, 'refused', 'the import is recorded as refused');
    assert.equal(row.archive_path, null, 'the refused import keeps no archive path');
  });

  it('refuses an import over the account limits with the numbers, copy deleted', async () => {
    const customer = await createOrgWithLogin(provider.client, { type: 'customer', limits: { websites: 2, dns_zones: 5 } });
    const { file } = await archiveFor('quo');
    const r = await upload(provider.client, customer.id, file);
    assert.equal(r.status, 409, JSON.stringify(r.json));
    assert.equal(r.json.error.code, 'limit_reached', 'the refusal\'s code is limit_reached');
    assert.equal(r.json.error.details.limit, 'websites', 'the websites limit binds');
    assert.match(r.json.error.details.detail, /websites: 0 used \+ 3 imported > 2 at customer/, 'the refusal gives the numbers: 3 websites imported over a limit of 2');
    assert.deepEqual(fs.readdirSync(uploads), [], 'the uploaded copy of the refused archive is deleted');
  });

  it('issue 32 item 6: counts the website quotas the run allocates (1024 MB each), not the archive bytes', async () => {
    const customer = await createOrgWithLogin(provider.client, { type: 'customer', limits: { disk_mb: 2000 } });
    const { file } = await archiveFor('dsk');
    const r = await upload(provider.client, customer.id, file);
    assert.equal(r.status, 409, `three new websites of 1024 MB do not fit 2000 MB: ${JSON.stringify(r.json)}`);
    assert.equal(r.json.error.code, 'limit_reached', 'the error code');
    assert.equal(r.json.error.details.limit, 'disk_mb', 'the disk limit binds');
    assert.match(r.json.error.details.detail, /disk_mb: 0 used \+ 3072 imported > 2000 at customer/, 'the numbers are the website quotas');
    assert.equal(await env.db('panel_sites').where({ org_id: customer.id }).count('* as n').first().then((x) => Number(x?.n)), 0, 'no site was created');
  });

  it('needs migration.run: an account owner cannot upload', async () => {
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const { file } = await archiveFor('pow');
    const r = await upload(customer.client, customer.id, file);
    assert.equal(r.status, 403, `an account owner lacks migration.run: ${JSON.stringify(r.json)}`);
    assert.equal(r.json.error.code, 'power_missing', 'the refusal\'s code is power_missing');
  });

  it('imports a whole account: zones, sites serving the files, databases holding the rows, passwords once, pre-existing items untouched', async () => {
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const { user, domain, file } = await archiveFor('imp', { rows: 321 });
    // the blog exists already in the account: reported pre-existing and left as it is
    const blog = `blog.${domain}`;
    const pre = await provider.client.post(`/v1/orgs/${customer.id}/sites`, { domain: blog });
    assert.equal(pre.status, 201, JSON.stringify(pre.json));

    const up = await upload(provider.client, customer.id, file);
    assert.equal(up.status, 201, JSON.stringify(up.json));
    assert.equal(up.json.status, 'ready', 'the uploaded import is ready to run');
    assert.equal(up.json.quota.fits, true, 'the import fits the account\'s quotas');
    assert.equal(fs.readdirSync(uploads).length, 1, 'the uploaded copy is kept until the run');
    const states = (r: Reply) => Object.fromEntries(r.json.items.map((i: { step: string; name: string; state: string }) => [`${i.step}:${i.name}`, i.state]));
    assert.equal(states(up)[`websites:${blog}`], 'pre_existing', 'the existing blog website is reported pre-existing');
    assert.equal(states(up)[`site_files:${blog}`], 'pre_existing', 'the existing blog\'s files are reported pre-existing');
    assert.deepEqual(up.json.items.map((i: { step: string }) => i.step), ['dns_zones', 'dns_zones', 'websites', 'websites', 'websites', 'certificates', 'databases', 'databases', 'site_files', 'site_files', 'site_files', 'sql_loads', 'sql_loads'], 'the report lists the items in the order of their steps');

    const started = await provider.client.post(`/v1/imports/${up.json.id}/run`);
    assert.equal(started.status, 202, JSON.stringify(started.json));
    const handle = new Client({ connection }).workflow.getHandle(importWorkflowId(up.json.id));
    const done = await settledImport(provider.client, up.json.id);
    assert.equal(done.json.status, 'done', JSON.stringify(done.json.items.filter((i: { error: string | null }) => i.error)));
    assert.deepEqual(done.json.progress.counts, { total: 13, done: 11, pre_existing: 2, pending: 0, running: 0, failed: 0 }, '11 items done, the 2 pre-existing ones left alone, none failed');
    assert.equal((await handle.result()).status, 'done', 'the import workflow ends done');
    assert.deepEqual(await handle.query('progress'), { total: 11, finished: 11, current: null, failed: null }, 'the workflow\'s progress query counts 11 of 11 finished');

    // passwords: once, then never again
    assert.deepEqual(done.json.passwords.map((p: { database: string; user: string }) => [p.database, p.user]).sort(), [[`${user}_shop`, `${user}_shopuser`], [`${user}_wp`, `${user}_wpuser`]], 'the two database passwords are shown once, with their databases and users');
    assert.equal((await provider.client.get(`/v1/imports/${up.json.id}`)).json.passwords, undefined, 'a second read of the import shows no passwords');
    // for a password nobody saw, each database item names its reset (test/panel/databases/database-password.test.ts)
    const wpItem = done.json.items.find((i: { step: string; name: string }) => i.step === 'databases' && i.name === `${user}_wp`);
    assert.match(wpItem.detail.password_reset, new RegExp(`POST /v1/databases/${wpItem.detail.database_id}/password \\{"confirm":"${wpItem.detail.database_id}"\\}`), 'the database item names its password reset call');
    const wp = done.json.passwords.find((p: { database: string }) => p.database === `${user}_wp`);
    const count = await run('mariadb', ['--no-defaults', `--socket=${path.join(panel.root, 'run/my.sock')}`, `--user=${wp.user}`, `--password=${wp.password}`, '--batch', '--skip-column-names', '-e', `SELECT count(*), max(post_title) FROM \`${user}_wp\`.wp_posts`]);
    assert.equal(count.stdout.trim(), "321\tPost 99; it's -- not a comment", 'the imported wp database holds the 321 posts, quotes and comment-like text intact');
    assert.equal(await adminSql(panel.root, `SELECT count(*) FROM \`${user}_shop\`.orders; SELECT count(*) FROM \`${user}_shop\`.big_orders`), '3\n1', 'the shop database holds its imported orders (3) and big orders (1)');
    for (const p of done.json.passwords) assert.deepEqual(await tablesContaining(p.password), [], `no table holds the password of ${p.database} in clear`);

    // the sites serve the imported files through nginx
    assert.match((await serve(panel.webPort, domain, '/')).body, new RegExp(`Imported ${domain.replace(/\./g, '\\.')}`), 'the main site serves the imported page through nginx');
    assert.match((await serve(panel.webPort, `www.${domain.replace(/\.test$/, '.example')}`, '/css/site.css')).body, /sans-serif/, 'the www alias serves the imported stylesheet');
    assert.equal((await serve(panel.webPort, `addon-${domain}`, '/')).body, `<h1>addon-${domain}</h1>\n`, 'the addon domain serves its own imported page');
    const docroot = path.join(panel.root, 'sites', domain, 'public_html');
    assert.equal(fs.readlinkSync(path.join(docroot, 'style.css')), 'css/site.css', 'the imported symbolic link within the docroot is kept');
    assert.equal(fs.existsSync(path.join(docroot, '.bashrc')), false, 'no .bashrc lands in the site\'s docroot');
    // the pre-existing site keeps its own page
    assert.doesNotMatch((await serve(panel.webPort, blog, '/')).body, /blog of/, 'the pre-existing blog keeps its own page, not the imported one');

    const zones = await env.db('panel_dns_zones').where({ org_id: customer.id }).orderBy('name').pluck('name');
    assert.deepEqual(zones, [`addon-${domain}`, domain].sort(), 'both imported DNS zones belong to the customer');
    const site = await env.db('panel_sites').where({ domain }).first();
    assert.deepEqual(site.cron, [`*/15 * * * * php /home/${user}/public_html/wp-cron.php >/dev/null 2>&1`, `0 3 * * * /home/${user}/bin/backup.sh`], 'the site\'s cron jobs are imported');
    assert.equal(site.php_version, '8.2', 'the site\'s PHP version is imported');
    assert.deepEqual(site.php_values, { memory_limit: 256, upload_max_filesize: 64 }, 'the .htaccess php_value lines are the site\'s PHP values');
    const pool = fs.readFileSync(path.join(panel.root, 'etc/php/8.2/pool.d', `${domain}.conf`), 'utf8');
    assert.match(pool, /php_admin_value\[memory_limit\] = 256M\n/, 'the pool applies the carried memory limit');
    // the uploaded copy is gone; a done import does not run again
    assert.deepEqual(fs.readdirSync(uploads), [], 'the uploaded copy is deleted after the run');
    assert.equal((await provider.client.post(`/v1/imports/${up.json.id}/run`)).status, 409, 'a done import does not run again (409)');
  });

  it('panelctl import-legacy -account -api -token-file -run -yes performs the import through the API', async () => {
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const { user, domain, file } = await archiveFor('cli');
    const token = await provider.client.post('/v1/account/tokens', { name: 'import' });
    assert.equal(token.status, 201, `an API token is made for the CLI: ${JSON.stringify(token.json)}`);
    const tokenFile = path.join(dir, 'token');
    fs.writeFileSync(tokenFile, token.json.token + '\n');
    const cli = (...extra: string[]) =>
      run_(process.execPath, [path.join(__dirname, '../../../bin/panelctl.cjs'), 'import-legacy', '-archive', file, '-account', customer.id, '-api', panel.url, '-token-file', tokenFile, ...extra]).then(
        (r) => ({ code: 0, ...r }),
        (e: { code: number; stdout: string; stderr: string }) => e,
      );
    const noYes = await cli('-run');
    assert.equal(noYes.code, 2, '-run without -yes is a usage error (exit 2)');
    assert.match(noYes.stderr, /confirm with -yes/, `the CLI asks for -yes: ${noYes.stderr}`);
    const r = await cli('-run', '-yes');
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /: done\. 13 item\(s\) done, 0 pre-existing/, 'the CLI reports all 13 items done, none pre-existing');
    assert.match(r.stdout, new RegExp(`${user}_wp user ${user}_wpuser: \\S{20,}`), 'the CLI shows the wp database\'s new password');
    assert.match((await serve(panel.webPort, domain, '/')).body, /Imported/, 'the imported site serves its page');
    // the same archive again: everything exists now, so the quota check has nothing to add and the run finds all pre-existing
    const again = await cli('-json');
    assert.equal(again.code, 0, again.stdout);
    assert.ok(JSON.parse(again.stdout).items.every((i: { state: string }) => i.state === 'pre_existing'), `a second run finds every item pre-existing: ${again.stdout}`);
  });

  it('issue 32 item 6: the run checks the quotas again and refuses before anything is created', async () => {
    const customer = await createOrgWithLogin(provider.client, { type: 'customer', limits: { disk_mb: 3500, databases: 5 } });
    const { domain, file } = await archiveFor('rck');
    const up = await upload(provider.client, customer.id, file);
    assert.equal(up.status, 201, `3072 MB fit 3500 MB at upload: ${JSON.stringify(up.json)}`);
    // between the upload and the run, the account takes another website: 1024 MB more are allocated
    const other = await provider.client.post(`/v1/orgs/${customer.id}/sites`, { domain: `other.${domain}` });
    assert.equal(other.status, 201, JSON.stringify(other.json));
    const r = await provider.client.post(`/v1/imports/${up.json.id}/run`);
    assert.equal(r.status, 409, `the run is refused: ${JSON.stringify(r.json)}`);
    assert.equal(r.json.error.code, 'limit_reached', 'the error code');
    assert.match(r.json.error.details.detail, /disk_mb: 1024 used \+ 3072 imported > 3500 at customer/, 'the numbers at run time');
    const row = await env.db('panel_imports').where({ id: up.json.id }).first();
    assert.equal(row.status, 'ready', 'the import stays ready (it can run once there is room)');
    assert.equal(row.runs, 0, 'no run was started');
    // (last in the file: its archive copy stays kept, as the import stays ready)
    const sites = await env.db('panel_sites').where({ org_id: customer.id }).pluck('domain');
    assert.deepEqual(sites, [`other.${domain}`], 'nothing of the import was created');
  });
});

const run_ = promisify(execFile);

