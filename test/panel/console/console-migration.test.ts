import assert from 'node:assert/strict';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { run } from '../../../hosting-node/processes';
import { env } from '../../setup/env';
import { measurePageWeight } from '../../helpers/console';
import { adminSql, uploadArchive } from '../../helpers/imports';
import { runImportWorker, startImportWorkerChild, type ImportWorkerChild } from '../../helpers/import-worker-child';
import { UNSAFE, writeAccountArchive, type ArchiveOptions } from '../../helpers/legacy-archive';
import { createOrgWithLogin, getFromNode, PASSWORD, platformAdmin, startHostingPanel, unique, type HostingPanel, type PanelClient } from '../../helpers/panel';
import { until } from '../../helpers/until';

// The console's Migration page (spec 2 section 4.2 "Migration of a customer account") in Debian's
// chromium against a real panel with its hosting node (nginx, MariaDB): upload with progress, the
// report by class and the quota check, confirm and run with the import worker in a process of its
// own, kill -9 of that worker mid-run, the worker started again, "Run again", the run completing
// and the new database passwords shown once; then the site serves the imported files and the
// database holds the rows. Refusals (unsafe, over quota, too large) show no way to run.
//
// The worker started again runs in this process, next to the panel API: new passwords live only
// in the memory of the process that created them, and the API shows them from its own.

const ARTIFACTS = path.join(__dirname, '..', '..', '..', 'test-artifacts', 'console');
const MAX_UPLOAD = 32 * 1024 * 1024;
/** what the slow link of the upload test carries per second (browser to panel) */
const UPLINK_BYTES_PER_S = 4 * 1024 * 1024;

/** A TCP relay to `port` whose browser-to-panel direction carries at most `rate` bytes a second: a slow uplink. */
function slowUplink(port: number, rate: number): Promise<{ url: string; close(): void }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const panel = net.connect(port, '127.0.0.1');
    for (const s of [client, panel]) {
      sockets.add(s);
      s.on('error', () => [client, panel].forEach((x) => x.destroy()));
      s.on('close', () => [client, panel].forEach((x) => x.destroy()));
    }
    client.on('data', (chunk: Buffer) => {
      panel.write(chunk);
      client.pause();
      setTimeout(() => client.resume(), (chunk.length / rate) * 1000);
    });
    panel.pipe(client);
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({
        url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
        close: () => {
          for (const s of sockets) s.destroy();
          server.close();
        },
      }),
    ),
  );
}

describe('panel: console Migration page in chromium', function () {
  this.timeout(120_000);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'console-migration-'));
  const importQueue = `panel-imports-${randomUUID()}`;
  let panel: HostingPanel;
  let browser: Browser;
  let provider: { id: string; client: PanelClient; username: string };
  const contexts: BrowserContext[] = [];
  const children: ImportWorkerChild[] = [];
  const stops: Array<() => Promise<void>> = [];
  const pageErrors: string[] = [];

  before(async function () {
    this.timeout(120_000);
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    [panel, browser] = await Promise.all([
      startHostingPanel({ mariadb: true, opTimeoutMs: 30_000, imports: { dir: path.join(dir, 'uploads'), taskQueue: importQueue, maxUploadBytes: MAX_UPLOAD, limits: { maxRatio: 100_000 } } }),
      chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] }),
    ]);
    provider = await createOrgWithLogin(await platformAdmin(panel.url), { type: 'provider' });
  });
  after(async () => {
    for (const c of children) await c.close();
    for (const stop of stops) await stop();
    await browser?.close();
    await panel?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  afterEach(async () => {
    for (const c of contexts.splice(0)) await c.close();
    assert.deepEqual(pageErrors.splice(0), [], 'uncaught errors in the console');
  });

  async function newPage(base = panel.url): Promise<Page> {
    const context = await browser.newContext({ baseURL: base });
    contexts.push(context);
    const page = await context.newPage();
    page.setDefaultTimeout(20_000);
    page.on('pageerror', (e) => pageErrors.push(e.message));
    return page;
  }
  async function signedIn(username: string, orgId: string, base?: string): Promise<Page> {
    const page = await newPage(base);
    await page.goto('/sign-in');
    await page.getByLabel('Username').fill(username);
    await page.getByLabel('Password', { exact: true }).fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`**/orgs/${orgId}`);
    return page;
  }
  const shot = (page: Page, name: string) => page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
  const archive = async (label: string, o: ArchiveOptions = {}) => {
    const user = unique(label).toLowerCase();
    const domain = `${user}.test`;
    return { user, domain, file: await writeAccountArchive(path.join(dir, `cpmove-${user}.tar.gz`), { user, domain, ...o }) };
  };
  /** The provider's browser on the customer's Migration tab, the archive chosen and sent. */
  async function uploadInPage(customerId: string, file: string): Promise<Page> {
    const page = await signedIn(provider.username, provider.id);
    await page.goto(`/orgs/${customerId}/migration`);
    await page.getByLabel('Account archive', { exact: true }).setInputFiles(file);
    await page.getByRole('button', { name: 'Upload and check' }).click();
    return page;
  }
  const status = (page: Page) => page.getByTestId('import-status');
  const reportClass = (page: Page, label: string) => page.getByRole('region', { name: label, exact: true });
  const items = (importId: string) => env.db('panel_import_items').where({ import_id: importId }).orderBy('seq');

  it('a full migration with a resume: upload, report, confirm and run, kill -9 of the worker, run again, passwords once, site and rows in place', async function () {
    this.timeout(400_000);
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const big = randomBytes(256 * 1024);
    const { user, domain, file } = await archive('mig', { rows: 321, extraFiles: 300, extraFileBytes: 2048, extra: [{ path: 'homedir/public_html/big.bin', body: big }] });
    children.push(await startImportWorkerChild({ taskQueue: importQueue, nodeOpsQueue: panel.taskQueue, root: panel.root }));

    const page = await signedIn(provider.username, provider.id);
    await page.goto(`/orgs/${customer.id}`);
    await page.getByRole('link', { name: 'Migration' }).click();
    await page.waitForURL(`**/orgs/${customer.id}/migration`);
    await page.getByLabel('Account archive', { exact: true }).setInputFiles(file);
    await page.getByRole('button', { name: 'Upload and check' }).click();
    await status(page).filter({ hasText: 'not run yet' }).waitFor({ timeout: 60_000 });
    const importId = new URL(page.url()).searchParams.get('import')!;

    // the report by class, with the change or the reason; the quota check with its numbers
    await reportClass(page, 'Migrated with changes').getByText(`parked domains become aliases (${user}.example)`).waitFor();
    await reportClass(page, 'Not migrated').getByText('PostgreSQL dumps are not importable yet').waitFor();
    await reportClass(page, 'Migrated').getByText('statement(s) checked').first().waitFor();
    assert.equal(await reportClass(page, 'Refused as unsafe').count(), 0, 'a safe archive has nothing refused as unsafe');
    await page.getByRole('heading', { name: 'Quota check: fits' }).waitFor();
    await shot(page, 'migration-report');

    // confirm and run; the worker process dies (kill -9) while the websites are being created
    const confirmAndRun = page.getByRole('button', { name: 'Confirm and run' });
    assert.equal(await confirmAndRun.isDisabled(), true, 'not before the report is confirmed');
    await page.getByLabel('I have read the report and the quota check').check();
    await confirmAndRun.click();
    await until('a website being created', async () => (await items(importId)).some((i) => i.step === 'websites' && i.state === 'running'), 60_000, 25);
    await children[0].kill();
    const atKill = await items(importId);
    assert.ok(atKill.filter((i) => i.step === 'databases').every((i) => i.state === 'pending'), 'killed before the databases: their passwords are created by the next worker');
    await page.getByTestId('import-current').filter({ hasText: 'Websites' }).waitFor();
    await shot(page, 'migration-killed');

    // the worker comes back; the page offers "Run again" once the progress stands still
    const worker = await runImportWorker({ db: env.db, temporalAddress: env.temporalAddress, taskQueue: importQueue, nodeOpsQueue: panel.taskQueue, root: panel.root, workflowBundle: env.bundles.panel });
    stops.push(worker.stop);
    await page.getByRole('button', { name: 'Run again' }).click({ timeout: 60_000 });
    await status(page).filter({ hasText: 'done' }).waitFor({ timeout: 240_000 });
    await page.getByTestId('import-counts').filter({ hasText: `${atKill.length} done, 0 already in the account, 0 running, 0 pending, 0 failed` }).waitFor();
    // every step of the run is named, the certificates step too
    for (const step of ['DNS zones', 'Websites', 'Certificates', 'Databases and users', 'Website files', 'SQL loads']) assert.equal(await page.getByRole('progressbar', { name: step, exact: true }).count(), 1, step);

    // the passwords, once
    const shown = page.getByRole('region', { name: 'New database passwords' });
    await shown.getByText('they will not be shown again').waitFor();
    const passwords = await shown.getByTestId('import-password').allTextContents();
    const users = await shown.locator('tbody tr td:nth-child(2)').allTextContents();
    assert.deepEqual([...users].sort(), [`${user}_shopuser`, `${user}_wpuser`], 'the passwords shown are for the two imported database users');
    assert.equal(passwords.length, 2, 'one password is shown per database user');
    await shot(page, 'migration-done');
    await page.reload();
    await status(page).filter({ hasText: 'done' }).waitFor();
    assert.equal(await page.getByRole('region', { name: 'New database passwords' }).count(), 0, 'shown once');
    await page.getByText('The new database passwords were shown once').waitFor();

    // "Run again" was a second run of the import; nothing repeated: the cut website ran twice, every other item once
    assert.equal((await env.db('panel_imports').where({ id: importId }).first('runs')).runs, 2, 'the import ran twice: the first run and the run again');
    const after = await items(importId);
    for (const i of after) assert.equal(i.attempts, i.seq === atKill.find((k) => k.state === 'running')!.seq ? 2 : 1, `${i.step}:${i.name}`);
    assert.equal(await env.db('panel_sites').where({ org_id: customer.id }).count<{ n: string }[]>('* as n').then((r) => Number(r[0].n)), 3, 'the three imported websites are in the account');
    // the site serves the imported files; the database holds the rows, read with the password the page showed
    assert.match((await getFromNode(panel.webPort, domain, '/')).body, new RegExp(`Imported ${domain.replace(/\./g, '\\.')}`), 'the site serves the imported index page');
    assert.equal((await getFromNode(panel.webPort, domain, '/files/0/f7.txt')).body.length, 2048, 'the site serves an imported file whole');
    const served = path.join(panel.root, 'sites', domain, 'public_html', 'big.bin');
    assert.equal(createHash('sha256').update(fs.readFileSync(served)).digest('hex'), createHash('sha256').update(big).digest('hex'), 'the big file is served byte for byte');
    const wp = passwords[users.indexOf(`${user}_wpuser`)];
    const rows = await run('mariadb', ['--no-defaults', `--socket=${path.join(panel.root, 'run/my.sock')}`, `--user=${user}_wpuser`, `--password=${wp}`, '--batch', '--skip-column-names', '-e', `SELECT count(*) FROM \`${user}_wp\`.wp_posts`]);
    assert.equal(rows.stdout.trim(), '321', rows.stderr);
    assert.equal(await adminSql(panel.root, `SELECT count(*) FROM \`${user}_shop\`.orders`), '3', 'the shop database holds its 3 imported orders');

    // the account's imports list it
    await page.getByRole('button', { name: 'All imports of this account' }).click();
    await page.getByRole('table', { name: /Imports into/ }).getByRole('row').filter({ hasText: `cpmove-${user}.tar.gz` }).filter({ hasText: `${after.length} of ${after.length} imported` }).waitFor();
    await shot(page, 'migration-list');
  });

  it('an unsafe archive shows "Refused as unsafe" with the reason and no run button', async () => {
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const { file } = await archive('uns', { extra: UNSAFE.symlink_outside });
    const page = await uploadInPage(customer.id, file);
    await status(page).filter({ hasText: 'refused' }).waitFor();
    await page.getByRole('alert').filter({ hasText: 'The archive is refused as unsafe: 1 item(s) are refused; the uploaded copy is deleted' }).waitFor();
    await reportClass(page, 'Refused as unsafe').getByText('symbolic link to the absolute path /etc/passwd').waitFor();
    await page.getByText('This archive holds entries refused as unsafe: nothing can run, and the uploaded copy is deleted').waitFor();
    assert.equal(await page.getByRole('button', { name: /Confirm and run|Run again/ }).count(), 0, 'an unsafe archive offers no run button');
    const row = await env.db('panel_imports').where({ org_id: customer.id }).first('status', 'archive_path');
    assert.deepEqual(row, { status: 'refused', archive_path: null }, 'the unsafe import is refused and its archive deleted');
    await shot(page, 'migration-unsafe');
  });

  it('an import over a limit shows the numbers and a disabled "Confirm and run"', async () => {
    const customer = await createOrgWithLogin(provider.client, { type: 'customer', limits: { websites: 2 } });
    const { file } = await archive('quo');
    const page = await uploadInPage(customer.id, file);
    await page.getByRole('heading', { name: 'Quota check: over a limit' }).waitFor();
    await page.getByRole('alert').filter({ hasText: "The limit 'websites' of customer" }).filter({ hasText: 'websites: 0 used + 3 imported > 2' }).waitFor();
    await page.getByRole('row').filter({ hasText: 'websites' }).getByText('no: 0 + 3 > 2').waitFor();
    assert.equal(await page.getByRole('button', { name: 'Confirm and run' }).isDisabled(), true, 'an import over a limit cannot be confirmed');
    await shot(page, 'migration-over-quota');
  });

  it('the upload shows its progress; an archive the panel cannot read is refused with the API message', async () => {
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    // bytes that are no archive, big enough to outlast the sockets' buffers on a slow link
    const junk = path.join(dir, 'cpmove-junk.tar.gz');
    fs.writeFileSync(junk, randomBytes(MAX_UPLOAD - 1024));
    const link = await slowUplink(Number(new URL(panel.url).port), UPLINK_BYTES_PER_S);
    stops.push(async () => link.close());
    const page = await signedIn(provider.username, provider.id, link.url);
    await page.goto(`/orgs/${customer.id}/migration`);
    await page.getByLabel('Account archive', { exact: true }).setInputFiles(junk);
    await page.getByRole('button', { name: 'Upload and check' }).click();
    // part of the archive sent: the upload's own progress events
    await page.getByText(/^Uploading cpmove-junk\.tar\.gz: [1-9]\d? % \(/).waitFor({ timeout: 30_000 });
    await shot(page, 'migration-uploading');
    await page.getByRole('alert').filter({ hasText: 'could not be read within the safety limits' }).waitFor({ timeout: 60_000 });
    await shot(page, 'migration-unreadable');
  });

  it('a file over the upload limit is refused with the API message before it is sent', async () => {
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const big = path.join(dir, 'cpmove-big.tar.gz');
    fs.writeFileSync(big, Buffer.alloc(MAX_UPLOAD + 1));
    const page = await uploadInPage(customer.id, big);
    await page.getByRole('alert').filter({ hasText: `The request is not valid: archive: larger than ${MAX_UPLOAD} bytes` }).waitFor();
    assert.equal(await env.db('panel_imports').where({ org_id: customer.id }).count<{ n: string }[]>('* as n').then((r) => Number(r[0].n)), 0, 'an archive over the upload limit creates no import');
    // the API refuses it the same way when a client sends it anyway
    const r = await uploadArchive(provider.client, customer.id, big);
    assert.equal(r.status, 400, JSON.stringify(r.json));
    assert.equal(r.json.error.message, `The request is not valid: archive: larger than ${MAX_UPLOAD} bytes`, 'the API gives the same message the page showed');
  });

  it('GET /v1/orgs/{id}/imports lists an account\'s imports newest first, in scope only; the tab needs migration.run', async () => {
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const first = await uploadArchive(provider.client, customer.id, (await archive('ls1')).file);
    const second = await uploadArchive(provider.client, customer.id, (await archive('ls2', { extra: UNSAFE.fifo })).file);
    assert.equal(first.status, 201, `the readable archive is accepted: ${JSON.stringify(first.json)}`);
    assert.equal(second.status, 422, `the unsafe archive is refused 422: ${JSON.stringify(second.json)}`);
    const list = await provider.client.get(`/v1/orgs/${customer.id}/imports`);
    assert.equal(list.status, 200, JSON.stringify(list.json));
    assert.equal(list.json.max_upload_bytes, MAX_UPLOAD, 'the list says the upload limit');
    assert.deepEqual(list.json.imports.map((i: { id: string; status: string }) => [i.id, i.status]), [[second.json.error.details.import_id, 'refused'], [first.json.id, 'ready']], 'the imports are listed newest first with their statuses');
    assert.deepEqual(list.json.imports[1].counts, { total: 13, done: 0, pre_existing: 0, pending: 13, running: 0, failed: 0 }, 'the ready import counts 13 items, all pending');
    assert.equal(list.json.imports[0].report_counts.refused, 1, 'the refused import counts its one refused item');
    // the account owner reads its own list; another provider does not see the account; a bad id is 404
    assert.equal((await customer.client.get(`/v1/orgs/${customer.id}/imports`)).json.imports.length, 2, 'the account owner reads its own two imports');
    const other = await createOrgWithLogin(await platformAdmin(panel.url), { type: 'provider' });
    assert.equal((await other.client.get(`/v1/orgs/${customer.id}/imports`)).status, 404, "another provider does not see the account's imports");
    assert.equal((await provider.client.get('/v1/orgs/not-an-id/imports')).status, 404, 'a bad org id is 404');
    // issue 32 item 16: the list says what is true — the ready one never ran, the refused one ran nothing; the limit reads as people write it
    const listed = await signedIn(provider.username, provider.id);
    await listed.goto(`/orgs/${customer.id}/migration`);
    const rows = listed.getByRole('table', { name: /Imports into/ }).getByRole('row');
    await rows.filter({ hasText: 'cpmove-ls1' }).filter({ hasText: 'not run yet' }).filter({ hasText: '13 to import' }).waitFor();
    await rows.filter({ hasText: 'cpmove-ls2' }).filter({ hasText: 'refused' }).filter({ hasText: 'none: the import was refused' }).waitFor();
    await listed.getByText('At most 32 MB. The panel reads it').waitFor();
    assert.equal(await listed.getByText(/finished|ready to run|32\.0 MB/).count(), 0, 'no untrue label is left');
    await shot(listed, 'migration-list-labels');
    // the owner (no migration.run) has no Migration tab
    const page = await signedIn(customer.username, customer.id);
    await page.getByRole('link', { name: 'Websites' }).waitFor();
    assert.equal(await page.getByRole('link', { name: 'Migration' }).count(), 0, 'an owner without migration.run has no Migration tab');
  });

  it('measures page weight and time to interactive of the Migration page', async () => {
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    // a browser that never loaded the console, holding the provider's session cookie
    const page = await newPage();
    const [name, value] = provider.client.cookie!.split('=');
    await page.context().addCookies([{ name, value, url: panel.url, httpOnly: true, sameSite: 'Strict' }]);
    await measurePageWeight(page, 'migration', '/orgs/{id}/migration', async () => {
      await page.goto(`/orgs/${customer.id}/migration`);
      await page.getByRole('button', { name: 'Upload and check' }).waitFor();
    });
    await shot(page, 'migration-empty');
  });
});
