import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { BrowserContext } from 'playwright-core';
import { renderSshdConfig, sftpOverQuota } from '../../../domain/panel/sftp';
import { findBinary, run } from '../../../hosting-node/processes';
import { pruneSiteUsers, siteOwner, siteUserName } from '../../../hosting-node/site-users';
import { launchChromium, newConsolePage, screenshot } from '../../helpers/console';
import { connections, sftp, sftpArgs } from '../../helpers/sftp';
import { until } from '../../helpers/until';
import { consoleSignIn, createOrgWithLogin, platformAdmin, startHostingPanel, unique, type HostingPanel } from '../../helpers/panel';

// SFTP against the soft quota (issue 34 §2) with the real OpenSSH client: files written over SFTP
// count at the node's next measurement (every 300 ms here: the panel's report interval); at or over
// the quota a `put` is refused while `get` still works, a session opened before is ended, the API
// and the console say read-only and why, and freeing space with the panel's file API brings writes back.

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'sftp-quota-'));
const MB = 1024 * 1024;

describe('panel: SFTP read-only over the soft quota', function () {
  this.timeout(120_000);
  let panel: HostingPanel;
  let owner: Awaited<ReturnType<typeof createOrgWithLogin>>;
  let site: { id: string; domain: string; user: string; docroot: string };
  let key: string;

  const login = (commands: string[]) => sftp(key, panel.sftpPort!, site.user, commands);
  const sftpView = async () => (await owner.client.get(`/v1/sites/${site.id}/sftp`)).json;

  before(async function () {
    this.timeout(90_000);
    assert.equal(process.getuid?.(), 0, 'SFTP needs a root node (CI runs as root)');
    assert.ok(findBinary('sshd') && findBinary('sftp') && findBinary('ssh-keygen'), 'openssh-server and openssh-client are installed');
    panel = await startHostingPanel({ sftp: true, reportEveryMs: 300 });
    const admin = await platformAdmin(panel.url);
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const reseller = await createOrgWithLogin(provider.client, { type: 'reseller' });
    owner = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const domain = `${unique('sftpq')}.example.com`;
    const r = await owner.client.post(`/v1/orgs/${owner.id}/sites`, { domain, quota_mb: 1 });
    assert.equal(r.status, 201, JSON.stringify(r.json));
    site = { id: r.json.id, domain, user: siteUserName(panel.root, r.json.id), docroot: path.join(panel.root, 'sites', domain, 'public_html') };
    key = path.join(tmp, 'ed');
    assert.equal((await run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', key])).code, 0, 'ssh-keygen');
    const added = await owner.client.post(`/v1/sites/${site.id}/sftp/keys`, { label: 'laptop', public_key: fs.readFileSync(`${key}.pub`, 'utf8').trim() });
    assert.equal(added.status, 201, JSON.stringify(added.json));
    await until('the site active with its key', async () => (await owner.client.get(`/v1/sites/${site.id}`)).json.status === 'active' && (await sftpView()).endpoint?.user === site.user, 30_000);
  });
  after(async () => {
    await panel?.close();
    if (panel) await pruneSiteUsers({ root: panel.root, keep: () => false });
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('refuses puts once a file written over SFTP takes the site over its quota, still serves gets, and writes again after space is freed', async () => {
    const big = path.join(tmp, 'big.bin');
    fs.writeFileSync(big, Buffer.alloc(2 * MB, 7));
    const small = path.join(tmp, 'small.txt');
    fs.writeFileSync(small, 'small\n');
    // a session opened while writable: its batch stays open
    const open = spawn('sftp', sftpArgs(key, panel.sftpPort!, site.user), { stdio: ['pipe', 'pipe', 'pipe'] });
    let openOut = '';
    open.stdout.on('data', (d) => (openOut += String(d)));
    open.stderr.on('data', (d) => (openOut += String(d)));
    const openClosed = new Promise<number>((resolve) => open.on('close', (code) => resolve(code ?? -1)));
    open.stdin.on('error', () => {});
    open.stdin.write('pwd\n');
    const uid = siteOwner(panel.root, site.id)!.uid;
    await until('the session open on the node', () => connections(uid) === 1, 20_000);
    const before = await sftpView();
    assert.deepEqual([before.read_only, before.read_only_reason], [false, null], 'writable under the quota');

    const put = await login(['cd public_html', `put ${big} big.bin`]);
    assert.equal(put.code, 0, `the upload under the quota is accepted: ${put.out}`);
    assert.equal(fs.statSync(path.join(site.docroot, 'big.bin')).size, 2 * MB, 'the file is on the node');

    // the node's next measurement counts it: 2 MB over a 1 MB quota
    await until('read-only in the API', async () => (await sftpView()).read_only === true, 20_000);
    const view = await sftpView();
    assert.match(view.read_only_reason, /over quota: .* quota of 1 MB/, `the reason: ${view.read_only_reason}`);
    assert.match(fs.readFileSync(path.join(panel.root, 'etc/ssh/sshd_config'), 'utf8'), new RegExp(`Match User ${site.user}\\n\\s+ForceCommand internal-sftp -R`), 'the node renders the read-only login');
    // the session opened before would keep writing: the node ended it
    await until('the session opened before ended on the node', () => connections(uid) === 0, 10_000);
    open.stdin.end(`put ${small} early.txt\n`);
    assert.notEqual(await openClosed, 0, `the ended session cannot write: ${openOut}`);
    assert.ok(!fs.existsSync(path.join(site.docroot, 'early.txt')), 'nothing written by it');

    const refused = await login(['cd public_html', `-put ${small} small.txt`, `-rm big.bin`, `-mkdir newdir`]);
    assert.equal((refused.out.match(/Permission denied/g) ?? []).length, 3, `put, rm and mkdir are refused: ${refused.out}`);
    assert.ok(!fs.existsSync(path.join(site.docroot, 'small.txt')) && !fs.existsSync(path.join(site.docroot, 'newdir')), 'nothing written');
    assert.ok(fs.existsSync(path.join(site.docroot, 'big.bin')), 'nothing removed');
    const back = path.join(tmp, 'back.bin');
    const get = await login(['cd public_html', `get big.bin ${back}`]);
    assert.equal(get.code, 0, `get still works: ${get.out}`);
    assert.ok(fs.readFileSync(back).equals(fs.readFileSync(big)), 'the same bytes come back');

    // the console's SFTP tab says it with the reason
    const browser = await launchChromium();
    const contexts: BrowserContext[] = [];
    const errors: string[] = [];
    try {
      const page = await newConsolePage(browser, panel.url, contexts, errors);
      await consoleSignIn(page, owner.username, owner.id);
      await page.goto(`/sites/${site.id}/sftp`);
      const note = page.getByTestId('sftp-read-only');
      await note.waitFor();
      assert.match((await note.textContent()) ?? '', /Read-only: over quota/, 'the console says read-only and why');
      await screenshot(page, 'site-sftp-read-only');
      assert.deepEqual(errors, [], 'no console errors');
    } finally {
      for (const c of contexts) await c.close();
      await browser.close();
    }

    // the panel's file API frees the space (rm over SFTP is a write): writes come back at the next measurement
    const rm = await owner.client.del(`/v1/sites/${site.id}/files?path=big.bin`);
    assert.equal(rm.status, 200, JSON.stringify(rm.json));
    await until('writable again in the API', async () => (await sftpView()).read_only === false, 20_000);
    assert.equal((await sftpView()).read_only_reason, null, 'no reason when writable');
    assert.doesNotMatch(fs.readFileSync(path.join(panel.root, 'etc/ssh/sshd_config'), 'utf8'), /Match User/, 'no read-only login rendered');
    const again = await login(['cd public_html', `put ${small} small.txt`]);
    assert.equal(again.code, 0, `put works again: ${again.out}`);
    assert.equal(fs.readFileSync(path.join(site.docroot, 'small.txt'), 'utf8'), 'small\n', 'written');
  });
});

describe('panel: the read-only SFTP rule and its config', () => {
  it('is read-only at or over the quota, never without a measurement or a quota; the Match block comes last', () => {
    assert.deepEqual([sftpOverQuota(0.99, 1), sftpOverQuota(1, 1), sftpOverQuota(2.5, 1), sftpOverQuota(undefined, 1), sftpOverQuota(5, undefined)], [false, true, true, false, false], 'under, at, over, unmeasured, no quota');
    const plain = renderSshdConfig({ root: '/srv/n', host: '127.0.0.1', port: 2222 });
    assert.doesNotMatch(plain, /Match/, 'no block without read-only users');
    const ro = renderSshdConfig({ root: '/srv/n', host: '127.0.0.1', port: 2222, readOnlyUsers: ['s_bbbbbbbbbbbb', 's_aaaaaaaaaaaa'] });
    assert.ok(ro.startsWith(plain.trimEnd()), 'the same config before the block');
    assert.match(ro, /\nMatch User s_aaaaaaaaaaaa,s_bbbbbbbbbbbb\n {4}ForceCommand internal-sftp -R\n$/, `one sorted block at the end: ${ro}`);
  });
});
