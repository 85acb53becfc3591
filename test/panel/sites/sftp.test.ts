import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { BrowserContext } from 'playwright-core';
import { startHostingNode } from '../../../hosting-node';
import { nodeGroupBase } from '../../../hosting-node/cgroups';
import { sftpUnavailable } from '../../../hosting-node/sftp';
import { freePort } from '../../../platform/ports';
import { tempNodeRoot } from '../../helpers/hosting-node';
import { env } from '../../setup/env';
import { findBinary, run } from '../../../hosting-node/processes';
import { pruneSiteUsers, siteOwner, siteUserName } from '../../../hosting-node/site-users';
import { launchChromium, newConsolePage, screenshot } from '../../helpers/console';
import { connections, sessionProcs, sftp, sftpArgs } from '../../helpers/sftp';
import { until } from '../../helpers/until';
import { consoleSignIn, createOrgWithLogin, getFromNode, platformAdmin, startHostingPanel, unique, type HostingPanel, type PanelClient, type Reply } from '../../helpers/panel';

// SFTP for site owners (issue 34 §2) with the real OpenSSH client and keys from ssh-keygen: keys
// over the API (weak ones refused, other orgs get 404), uploads served over HTTP, the chroot that
// `cd /`, `..`, absolute paths and planted symlinks cannot leave, a removed key refused at once
// (its open session ended, another key's kept) and suspension refusing logins until reactivation.

type Org = Awaited<ReturnType<typeof createOrgWithLogin>>;

const keyDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sftp-keys-'));

/** A new key pair from ssh-keygen: its private key file and public line. */
async function keyPair(name: string, type: string, bits?: number): Promise<{ file: string; pub: string }> {
  const file = path.join(keyDir, name);
  const r = await run('ssh-keygen', ['-q', '-t', type, ...(bits ? ['-b', String(bits)] : []), '-N', '', '-C', `${name}@test`, '-f', file]);
  assert.equal(r.code, 0, `ssh-keygen ${type}: ${r.stderr}`);
  return { file, pub: fs.readFileSync(`${file}.pub`, 'utf8').trim() };
}


/** A session kept open (its batch not ended) until `finish` sends the last commands. */
function openSession(key: string, port: number, user: string) {
  const child: ChildProcess = spawn('sftp', sftpArgs(key, port, user), { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += String(d)));
  child.stderr!.on('data', (d) => (out += String(d)));
  const closed = new Promise<number>((resolve) => child.on('close', (code) => resolve(code ?? -1)));
  let ended = false;
  void closed.then(() => (ended = true));
  child.stdin!.on('error', () => {});
  child.stdin!.write('pwd\n');
  return {
    ended: () => ended,
    closed,
    output: () => out,
    finish(commands: string[]) {
      child.stdin!.end(commands.map((c) => `${c}\n`).join(''));
      return closed;
    },
    kill: () => child.kill('SIGKILL'),
  };
}



function refused(r: Reply, status: number, code: string) {
  assert.equal(r.status, status, JSON.stringify(r.json));
  assert.equal(r.json.error.code, code, JSON.stringify(r.json));
}

describe('panel: SFTP for site owners', function () {
  this.timeout(120_000);
  let panel: HostingPanel;
  let reseller: Org;
  let owner: Org;
  let stranger: Org;
  let site: { id: string; domain: string; user: string; docroot: string };
  let other: { id: string; domain: string; docroot: string };
  let ed1: { file: string; pub: string };
  let ed2: { file: string; pub: string };
  const sessions: Array<ReturnType<typeof openSession>> = [];

  const settled = async (c: PanelClient, id: string, status = 'active') => {
    await until(`site ${id} ${status}`, async () => (await c.get(`/v1/sites/${id}`)).json.status === status, 30_000);
  };
  const createSite = async (org: Org) => {
    const domain = `${unique('sftp')}.example.com`;
    const r = await org.client.post(`/v1/orgs/${org.id}/sites`, { domain, php_version: '8.2' });
    assert.equal(r.status, 201, JSON.stringify(r.json));
    await settled(org.client, r.json.id);
    return { id: r.json.id as string, domain, docroot: path.join(panel.root, 'sites', domain, 'public_html') };
  };
  const addKey = (c: PanelClient, label: string, publicKey: string) => c.post(`/v1/sites/${site.id}/sftp/keys`, { label, public_key: publicKey });
  const login = (key: string, commands: string[]) => sftp(key, panel.sftpPort!, site.user, commands);

  before(async function () {
    this.timeout(90_000);
    assert.equal(process.getuid?.(), 0, 'SFTP needs a root node (CI runs as root)');
    assert.ok(findBinary('sshd') && findBinary('sftp') && findBinary('ssh-keygen'), 'openssh-server and openssh-client are installed');
    panel = await startHostingPanel({ sftp: true, reportEveryMs: 300 });
    const admin = await platformAdmin(panel.url);
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    reseller = await createOrgWithLogin(provider.client, { type: 'reseller' });
    owner = await createOrgWithLogin(reseller.client, { type: 'customer' });
    stranger = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const s = await createSite(owner);
    site = { ...s, user: siteUserName(panel.root, s.id) };
    other = await createSite(stranger);
    fs.writeFileSync(path.join(other.docroot, 'secret.txt'), 'the other site');
    [ed1, ed2] = await Promise.all([keyPair('ed1', 'ed25519'), keyPair('ed2', 'ed25519')]);
  });
  after(async () => {
    for (const s of sessions) s.kill();
    await panel?.close();
    // this panel's site users only (others' tests add and remove theirs at the same time)
    if (panel) await pruneSiteUsers({ root: panel.root, keep: () => false });
    fs.rmSync(keyDir, { recursive: true, force: true });
  });

  it('adds, lists and refuses keys over the API; another org gets 404 as for an unknown id', async () => {
    const [rsa1024, dsa, rsa2048] = await Promise.all([keyPair('rsa1024', 'rsa', 1024), keyPair('dsa', 'dsa'), keyPair('rsa2048', 'rsa', 2048)]);
    const bad = await addKey(owner.client, 'junk', 'hello world');
    refused(bad, 400, 'validation_failed');
    assert.equal(bad.json.error.details.field, 'public_key', 'the field is named');
    const damaged = await addKey(owner.client, 'damaged', `ssh-ed25519 ${'A'.repeat(68)}`);
    refused(damaged, 400, 'validation_failed');
    const weak = await addKey(owner.client, 'old rsa', rsa1024.pub);
    refused(weak, 400, 'validation_failed');
    assert.match(weak.json.error.message, /RSA keys of 1024 bits are refused: at least 2048/, 'RSA-1024 says why');
    const d = await addKey(owner.client, 'dsa', dsa.pub);
    refused(d, 400, 'validation_failed');
    assert.match(d.json.error.message, /DSA keys are refused/, 'DSA says why');
    refused(await addKey(owner.client, '', ed1.pub), 400, 'validation_failed');

    const added = await addKey(owner.client, 'laptop', ed1.pub);
    assert.equal(added.status, 201, JSON.stringify(added.json));
    const expected = (await run('ssh-keygen', ['-l', '-E', 'sha256', '-f', `${ed1.file}.pub`])).stdout.split(' ')[1];
    assert.deepEqual([added.json.key.label, added.json.key.type, added.json.key.bits, added.json.key.fingerprint], ['laptop', 'ED25519', 256, expected], 'the key as ssh-keygen reads it');
    refused(await addKey(owner.client, 'again', ed1.pub), 400, 'validation_failed');
    const rsa = await reseller.client.post(`/v1/sites/${site.id}/sftp/keys`, { label: 'reseller rsa', public_key: rsa2048.pub });
    assert.equal(rsa.status, 201, `the level above adds a key too: ${JSON.stringify(rsa.json)}`);
    assert.equal(rsa.json.key.bits, 2048, 'RSA bits');
    await settled(owner.client, site.id);

    const list = await owner.client.get(`/v1/sites/${site.id}/sftp`);
    assert.equal(list.status, 200, JSON.stringify(list.json));
    assert.deepEqual(list.json.keys.map((k: { label: string }) => k.label), ['laptop', 'reseller rsa'], 'both keys listed');
    assert.ok(list.json.keys.every((k: Record<string, unknown>) => typeof k.added_at === 'string' && !('public_key' in k)), 'added at, no key material');
    await until('the endpoint in the node facts', async () => (await owner.client.get(`/v1/sites/${site.id}/sftp`)).json.endpoint?.user === site.user, 20_000);
    const ep = (await owner.client.get(`/v1/sites/${site.id}/sftp`)).json;
    assert.deepEqual(ep.endpoint, { host: '127.0.0.1', port: panel.sftpPort, user: site.user }, 'host, port, user');
    assert.equal(ep.login_allowed, true, 'logins are allowed');

    // another org: 404 like an unknown id, for reading, adding and removing
    refused(await stranger.client.get(`/v1/sites/${site.id}/sftp`), 404, 'not_found');
    refused(await stranger.client.post(`/v1/sites/${site.id}/sftp/keys`, { label: 'x', public_key: ed2.pub }), 404, 'not_found');
    refused(await stranger.client.del(`/v1/sites/${site.id}/sftp/keys/${added.json.key.id}`), 404, 'not_found');
    refused(await owner.client.get(`/v1/sites/00000000-0000-4000-8000-000000000000/sftp`), 404, 'not_found');
    const after = await owner.client.get(`/v1/sites/${site.id}/sftp`);
    assert.equal(after.json.keys.length, 2, 'nothing changed by the refusals');
    // the level above removes the RSA key again
    const rm = await reseller.client.del(`/v1/sites/${site.id}/sftp/keys/${rsa.json.key.id}`);
    assert.equal(rm.status, 200, JSON.stringify(rm.json));
    await settled(owner.client, site.id);
  });

  it('uploads into public_html over SFTP; nginx serves the file by the site Host header', async () => {
    const local = path.join(keyDir, 'hello.txt');
    fs.writeFileSync(local, 'uploaded over sftp\n');
    const r = await login(ed1.file, [`put ${local} public_html/hello.txt`, 'ls -l public_html']);
    assert.equal(r.code, 0, r.out);
    const st = fs.statSync(path.join(site.docroot, 'hello.txt'));
    assert.equal(st.uid, siteOwner(panel.root, site.id)!.uid, 'the file is the site user\'s');
    const served = await getFromNode(panel.webPort, site.domain, '/hello.txt');
    assert.deepEqual([served.status, served.body], [200, 'uploaded over sftp\n'], 'served by nginx');
  });

  it('keeps every path inside the chroot: cd /, .., absolute paths and planted symlinks', async () => {
    const owned = siteOwner(panel.root, site.id)!;
    // links the site could plant (as its user): to /etc/passwd, to the other site's file, to the node root
    const plant = (name: string, target: string) => {
      fs.symlinkSync(target, path.join(site.docroot, name));
      fs.lchownSync(path.join(site.docroot, name), owned.uid, owned.gid);
    };
    plant('passwd', '/etc/passwd');
    plant('other', path.join(other.docroot, 'secret.txt'));
    plant('up', '../../../../../../..');
    const dl = path.join(keyDir, 'dl');
    const r = await login(ed1.file, [
      'cd /', 'pwd', 'ls -1 /', 'cd ..', 'cd ../../..', 'pwd', 'ls -1',
      `-get /etc/passwd ${dl}-1`, `-get ${path.join(other.docroot, 'secret.txt')} ${dl}-2`, `-ls ${panel.root}`,
      `-get public_html/passwd ${dl}-3`, `-get public_html/other ${dl}-4`, 'ls -1 public_html/up/',
      `-put ${path.join(keyDir, 'hello.txt')} /escape.txt`,
    ]);
    assert.equal(r.code, 0, r.out);
    assert.doesNotMatch(r.out, /Remote working directory: \/(?!\n)/, 'pwd stays /');
    assert.equal(r.out.match(/Remote working directory: \/\n/g)?.length, 2, `pwd is / after cd / and cd ../../..: ${r.out}`);
    for (const n of [1, 2, 3, 4]) assert.equal(fs.existsSync(`${dl}-${n}`), false, `download ${n} fails: nothing outside the chroot is reached\n${r.out}`);
    assert.doesNotMatch(r.out, /the other site|root:x:0/, 'no content from outside');
    // the link to the top resolves inside the chroot: the site folder's own entries
    const upListing = (r.out.split('ls -1 public_html/up/')[1] ?? '').split('sftp>')[0];
    assert.match(upListing, /public_html/, `up/ lists the chroot: ${upListing}`);
    assert.doesNotMatch(upListing, /etc|sites|bin/, 'not the real root');
    assert.equal(fs.existsSync(path.join(panel.root, 'sites', site.domain, 'escape.txt')), false, 'the chroot top is not writable');
    assert.equal(fs.existsSync('/escape.txt'), false, 'nothing written at /');
  });

  it('puts a session in the site control group and ends a removed key\'s sessions at once; another key\'s stay', async () => {
    const second = await addKey(owner.client, 'desktop', ed2.pub);
    assert.equal(second.status, 201, JSON.stringify(second.json));
    await settled(owner.client, site.id);
    const uid = siteOwner(panel.root, site.id)!.uid;
    const s1 = openSession(ed1.file, panel.sftpPort!, site.user);
    const s2 = openSession(ed2.file, panel.sftpPort!, site.user);
    sessions.push(s1, s2);
    await until('two sessions', () => connections(uid) === 2 && sessionProcs(uid).length === 4, 20_000);
    if (fs.existsSync('/sys/fs/cgroup/pids') || fs.existsSync('/sys/fs/cgroup/cgroup.controllers')) {
      const group = `${nodeGroupBase(panel.root)}/${site.domain}`;
      await until('sessions in the site group', () => sessionProcs(uid).every((p) => fs.readFileSync(`/proc/${p}/cgroup`, 'utf8').includes(group)), 5000);
    }
    const keys = (await owner.client.get(`/v1/sites/${site.id}/sftp`)).json.keys;
    const laptop = keys.find((k: { label: string }) => k.label === 'laptop');
    const removed = await owner.client.del(`/v1/sites/${site.id}/sftp/keys/${laptop.id}`);
    assert.equal(removed.status, 200, JSON.stringify(removed.json));
    await settled(owner.client, site.id);
    await until('the removed key\'s session ended on the node', () => connections(uid) === 1, 5000);
    // the client sees it at its next command
    assert.notEqual(await s1.finish(['ls']), 0, `the ended session cannot list: ${s1.output()}`);
    assert.match(s1.output(), /closed by remote host|Connection closed|Broken pipe/, s1.output());
    const refusedLogin = await login(ed1.file, ['pwd']);
    assert.notEqual(refusedLogin.code, 0, 'the removed key logs in no more');
    assert.match(refusedLogin.out, /Permission denied \(publickey\)/, refusedLogin.out);
    assert.equal(s2.ended(), false, 'the other key\'s session is open');
    const local = path.join(keyDir, 'kept.txt');
    fs.writeFileSync(local, 'still here');
    assert.equal(await s2.finish([`put ${local} public_html/kept.txt`, 'bye']), 0, s2.output());
    assert.equal(fs.readFileSync(path.join(site.docroot, 'kept.txt'), 'utf8'), 'still here', 'the kept session wrote');
  });

  it('refuses new logins of a suspended site and ends its sessions; reactivation restores them', async () => {
    const open = openSession(ed2.file, panel.sftpPort!, site.user);
    sessions.push(open);
    const uid = siteOwner(panel.root, site.id)!.uid;
    await until('the session started', () => connections(uid) === 1 || open.ended(), 10_000);
    assert.equal(open.ended(), false, open.output());
    assert.equal((await reseller.client.post(`/v1/sites/${site.id}/suspend`)).status, 200, 'suspend');
    await settled(owner.client, site.id, 'suspended');
    await until('the session ended on the node', () => connections(uid) === 0, 5000);
    assert.notEqual(await open.finish(['ls']), 0, `the ended session cannot list: ${open.output()}`);
    const r = await login(ed2.file, ['pwd']);
    assert.match(r.out, /Permission denied \(publickey\)/, `a suspended site refuses logins: ${r.out}`);
    assert.equal((await owner.client.get(`/v1/sites/${site.id}/sftp`)).json.login_allowed, false, 'the API says logins are refused');
    assert.equal((await reseller.client.post(`/v1/sites/${site.id}/unsuspend`)).status, 200, 'unsuspend');
    await settled(owner.client, site.id);
    const back = await login(ed2.file, ['ls -1 public_html']);
    assert.equal(back.code, 0, back.out);
    assert.match(back.out, /kept\.txt/, 'the site files are there again');

    // the account's suspension from above: the same on the node, and its reactivation restores
    assert.equal((await reseller.client.post(`/v1/orgs/${owner.id}/suspend`)).status, 200, 'org suspension');
    await until('the org suspension reached the node', async () => (await login(ed2.file, ['pwd'])).code !== 0, 30_000);
    assert.equal((await reseller.client.post(`/v1/orgs/${owner.id}/reactivate`)).status, 200, 'org reactivation');
    await until('the org reactivation reached the node', async () => (await login(ed2.file, ['pwd'])).code === 0, 30_000);
    await settled(owner.client, site.id);
  });

  it('shows the endpoint and the keys on the site page in the console, adds a key, refuses a DSA key with its message and removes a key', async () => {
    const browser = await launchChromium();
    const contexts: BrowserContext[] = [];
    const errors: string[] = [];
    try {
      const [dsa, ed3] = await Promise.all([keyPair('dsa-console', 'dsa'), keyPair('ed3', 'ed25519')]);
      const page = await newConsolePage(browser, panel.url, contexts, errors);
      await consoleSignIn(page, owner.username, owner.id);
      await page.goto(`/sites/${site.id}/sftp`);
      const ep = page.getByTestId('sftp-endpoint');
      await ep.waitFor();
      const text = await ep.textContent();
      for (const part of ['127.0.0.1', String(panel.sftpPort), site.user]) assert.ok(text?.includes(part), `the endpoint shows ${part}: ${text}`);
      const form = page.getByRole('form', { name: 'Add an SFTP key' });
      await form.getByLabel('Label').fill('old dsa');
      await form.getByLabel('Public key').fill(dsa.pub);
      await page.getByRole('button', { name: 'Add key' }).click();
      await page.getByRole('alert').filter({ hasText: 'DSA keys are refused' }).waitFor();
      await form.getByLabel('Label').fill('console key');
      await form.getByLabel('Public key').fill(ed3.pub);
      await page.getByRole('button', { name: 'Add key' }).click();
      const fp = (await run('ssh-keygen', ['-l', '-E', 'sha256', '-f', `${ed3.file}.pub`])).stdout.split(' ')[1];
      await page.getByRole('table', { name: /SFTP keys of/ }).getByText(fp).waitFor();
      await settled(owner.client, site.id);
      assert.equal((await login(ed3.file, ['pwd'])).code, 0, 'the key added in the console logs in');
      await screenshot(page, 'site-sftp');
      page.once('dialog', (d) => void d.accept());
      await page.getByRole('button', { name: 'Remove console key' }).click();
      await page.getByRole('table', { name: /SFTP keys of/ }).getByText(fp).waitFor({ state: 'detached' });
      await settled(owner.client, site.id);
      assert.match((await login(ed3.file, ['pwd'])).out, /Permission denied/, 'removed in the console: refused');
      assert.deepEqual(errors, [], 'no console errors');
    } finally {
      for (const c of contexts) await c.close();
      await browser.close();
    }
  });
  it('holds at most 20 keys per site (409 limit_reached) and starts sshd again when it dies', async () => {
    const have = (await owner.client.get(`/v1/sites/${site.id}/sftp`)).json.keys.length;
    const extra = await Promise.all(Array.from({ length: 20 - have }, (_, i) => keyPair(`many${i}`, 'ed25519')));
    for (const [i, k] of extra.entries()) assert.equal((await addKey(owner.client, `key ${i}`, k.pub)).status, 201, `key ${i} added`);
    const over = await addKey(owner.client, 'one too many', (await keyPair('over', 'ed25519')).pub);
    refused(over, 409, 'limit_reached');
    assert.equal(over.json.error.details.limit, 'sftp_keys', 'names the limit');
    await settled(owner.client, site.id);
    assert.equal(fs.readFileSync(path.join(panel.root, 'sftp/keys', site.user), 'utf8').trim().split('\n').length, 20, 'the node holds 20 keys');
    assert.equal((await login(extra.at(-1)!.file, ['pwd'])).code, 0, 'the 20th key logs in');

    const pid = Number(fs.readFileSync(path.join(panel.root, 'run/sshd.pid'), 'utf8').trim());
    process.kill(pid, 'SIGKILL');
    await until('sshd back', async () => {
      const now = Number(fs.readFileSync(path.join(panel.root, 'run/sshd.pid'), 'utf8').trim());
      return now !== pid && (await login(ed2.file, ['pwd'])).code === 0;
    }, 20_000);
    assert.match(fs.readFileSync(path.join(panel.root, 'log/sshd.log'), 'utf8'), /Server listening on 127\.0\.0\.1 port/, 'its log is kept');
  });

});

describe('SFTP where sshd cannot chroot', () => {
  it('a node whose root lies below /tmp (1777) offers no SFTP, says why and serves on', async function () {
    this.timeout(60_000);
    const root = tempNodeRoot('sftp-tmp-');
    try {
      assert.match(sftpUnavailable(root, true) ?? '', /sshd cannot chroot below \/tmp \(it must be root's and not writable by group or others\)/, 'the reason names /tmp');
      assert.match(sftpUnavailable(root, false) ?? '', /no system users of their own/, 'without site users');
      const node = await startHostingNode({ root, webPort: await freePort(), webHost: '127.0.0.1', builtinWebServer: true, sftpPort: await freePort(), logger: env.logger });
      try {
        assert.equal(node.facts().sftp, undefined, 'no sftp in the facts');
        assert.equal(fs.existsSync(path.join(root, 'etc/ssh/sshd_config')), false, 'no sshd config written');
      } finally {
        await node.stop();
      }
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});
