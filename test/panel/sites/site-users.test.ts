import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { DEFAULT_IMPORT_LIMITS } from '../../../domain/panel/import-archive';
import type { NodeOperation, SiteSpec } from '../../../domain/panel/node-ops';
import { startHostingNode, type HostingNode } from '../../../hosting-node';
import { findBinary, run } from '../../../hosting-node/processes';
import { deleteSitePath, writeSiteFile } from '../../../hosting-node/site-files';
import { canCreateSiteUsers, ensureSiteUser, listSiteUsers, pruneSiteUsers, siteOwner, siteUserName } from '../../../hosting-node/site-users';
import { siteWriter } from '../../../hosting-node/site-writer';
import { freePort } from '../../../platform/ports';
import { copySiteFiles } from '../../../services/panel/imports/run-items';
import { opId, siteGet, siteSpec, tempNodeRoot } from '../../helpers/hosting-node';
import { writeArchive } from '../../helpers/legacy-archive';
import { env } from '../../setup/env';

// Per-site system users (PANEL.md section 2, spec 2 section 4.4.4): on a root node each site's
// files are its own user's, its PHP runs as that user and cannot read another site's files, and the
// file manager, restores and the import's file copy write as that user. A node that may not create
// users keeps today's behaviour and says so in its facts.

const PHP = '8.2';
const WWW_DATA = 33;

const passwdLine = (name: string) => fs.readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.startsWith(`${name}:`)) ?? null;

describe('per-site system users on a root node', function () {
  let root: string;
  let port: number;
  let node: HostingNode;
  const apply = (op: Record<string, unknown>) => node.apply({ id: opId(), ...op } as NodeOperation);

  before(async function () {
    assert.equal(process.getuid?.(), 0, 'these checks are for a root node (CI runs as root)');
    assert.ok(findBinary('nginx') && findBinary(`php-fpm${PHP}`) && canCreateSiteUsers(), 'nginx, php-fpm and useradd are needed');
    root = tempNodeRoot('su-');
    port = await freePort();
    node = await startHostingNode({ root, webPort: port, webHost: '127.0.0.1', backupDir: path.join(root, 'backups'), logger: env.logger });
  });

  after(async () => {
    await node?.stop();
    if (root) fs.rmSync(root, { recursive: true, force: true });
    await pruneSiteUsers({});
  });

  const newSite = async (over: Partial<SiteSpec> = {}) => {
    const s = siteSpec({ phpVersion: PHP, ...over });
    const r = await apply({ kind: 'site.apply', site: s });
    assert.equal(r.ok, true, JSON.stringify(r));
    const docroot = path.join(root, 'sites', s.domain, 'public_html');
    return { s, docroot, owner: siteOwner(node.root, s.id)! };
  };
  const upload = (docroot: string, owner: ReturnType<typeof siteOwner>, rel: string, text: string) => writeSiteFile(docroot, rel, Readable.from([Buffer.from(text)]), 1 << 20, 1 << 20, owner);

  it('reports site users in its facts and gives a new site its own user, docroot and pool', async () => {
    assert.equal(node.facts().siteUsers, true, 'a root node says in its facts that it creates site users');
    const { s, docroot, owner } = await newSite();
    assert.ok(owner, 'the site has a user');
    assert.equal(owner.name, siteUserName(node.root, s.id), "the site user's name is derived from the node root and site id");
    assert.match(owner.name, /^s_[0-9a-f]{12}$/, 'a site user is named s_ and 12 hex digits');
    const line = passwdLine(owner.name)!.split(':');
    assert.equal(line[5], path.join(root, 'sites', s.domain), 'home is the site folder');
    assert.equal(line[6], '/usr/sbin/nologin', 'a site user cannot log in');
    // no other group than its own: www-data gets nothing from it
    const { stdout } = await run('id', ['-Gn', owner.name]);
    assert.equal(stdout.trim(), owner.name, `the site user is in its own group only: ${stdout}`);
    const st = fs.statSync(docroot);
    assert.deepEqual([st.uid, st.gid, st.mode & 0o7777], [owner.uid, WWW_DATA, 0o2750], "the docroot is the user's, group www-data, setgid 2750");
    for (const f of ['index.html', 'index.php']) assert.equal(fs.statSync(path.join(docroot, f)).uid, owner.uid, f);
    const tmp = fs.statSync(path.join(root, 'sites', s.domain, 'tmp'));
    assert.deepEqual([tmp.uid, tmp.mode & 0o777], [owner.uid, 0o700], "the site's tmp folder is the user's alone (0700)");
    // the site folder above stays root's: the path to the docroot cannot be swapped by the site
    assert.equal(fs.statSync(path.join(root, 'sites', s.domain)).uid, 0, "the site folder stays root's");
    const pool = fs.readFileSync(path.join(root, 'etc/php', PHP, 'pool.d', `${s.domain}.conf`), 'utf8');
    assert.match(pool, new RegExp(`^user = ${owner.name}$`, 'm'), 'the PHP pool runs as the site user');
    assert.match(pool, /^listen\.owner = www-data$/m, "the pool's socket is owned by www-data for nginx");
    // served: nginx reads through the www-data group, PHP runs as the site's user
    assert.equal((await siteGet(port, s.domain, '/index.html')).status, 200, "nginx serves the new site's index.html");
    await upload(docroot, owner, 'who.php', '<?php echo trim(shell_exec("id -un"));');
    assert.equal((await siteGet(port, s.domain, '/who.php')).body, owner.name, "PHP runs as the site's user");
  });

  it("one site's PHP cannot read another site's files, even past open_basedir", async () => {
    const a = await newSite();
    const b = await newSite();
    await upload(b.docroot, b.owner, 'secret/config.txt', 'password-of-b');
    await upload(a.docroot, a.owner, 'mine.txt', 'mine-of-a');
    // shell_exec runs outside open_basedir: only the file system's owners and modes stand in its way
    const probe = (file: string) => `<?php $r = shell_exec(${JSON.stringify(`cat ${file} 2>&1`)}); echo json_encode(["fgc" => @file_get_contents(${JSON.stringify(file)}), "cat" => $r]);`;
    await upload(a.docroot, a.owner, 'probe-b.php', probe(path.join(b.docroot, 'secret/config.txt')));
    await upload(a.docroot, a.owner, 'probe-a.php', probe(path.join(a.docroot, 'mine.txt')));
    const own = JSON.parse((await siteGet(port, a.s.domain, '/probe-a.php')).body);
    assert.equal(own.cat, 'mine-of-a', 'the probe reads its own site');
    const other = JSON.parse((await siteGet(port, a.s.domain, '/probe-b.php')).body);
    assert.equal(other.fgc, false, "file_get_contents of another site's file fails");
    assert.match(other.cat, /Permission denied/, `cat of another site's file is refused: ${other.cat}`);
    assert.doesNotMatch(other.cat, /password-of-b/, "another site's secret is not read");
    // and B's static file is still served to the web by nginx
    assert.equal((await siteGet(port, b.s.domain, '/secret/config.txt')).body, 'password-of-b', "nginx still serves B's static file");
  });

  it('file manager uploads and deletes are done as the site user, never through a link out of the docroot', async () => {
    const { docroot, owner } = await newSite();
    await upload(docroot, owner, 'deep/er/file.txt', 'x');
    for (const p of ['deep', 'deep/er', 'deep/er/file.txt']) assert.equal(fs.statSync(path.join(docroot, p)).uid, owner.uid, p);
    // a link the site made to a folder it cannot write: a write through it fails (as the user) and leaves nothing there
    const outside = fs.mkdtempSync(path.join(os.tmpdir(), 'su-out-'));
    fs.symlinkSync(outside, path.join(docroot, 'deep/out'));
    await assert.rejects(upload(docroot, owner, 'deep/out/evil.txt', 'x'), /symbolic link/);
    // the writer itself (the link made after the checks): refused before anything is written there
    const w = siteWriter(docroot, owner);
    await w.mkdir('deep/out').catch(() => {});
    await assert.rejects(w.done(), /leads outside the docroot/);
    assert.deepEqual(fs.readdirSync(outside), [], 'nothing is written through the link out of the docroot');
    await deleteSitePath(docroot, 'deep', owner);
    assert.equal(fs.existsSync(path.join(docroot, 'deep')), false, 'the deleted folder is gone');
    assert.ok(fs.existsSync(outside), 'deleting a link removes the link only');
    fs.rmSync(outside, { recursive: true });
  });

  it("the import's file copy writes the site's files as its user", async () => {
    const { s, docroot, owner } = await newSite();
    const file = path.join(root, `import-${randomUUID()}.tar.gz`);
    await writeArchive(file, [
      { path: 'cpmove-bob/', type: 'Directory' },
      { path: 'cpmove-bob/homedir/public_html/', type: 'Directory' },
      { path: 'cpmove-bob/homedir/public_html/index.html', body: '<h1>bob</h1>' },
      { path: 'cpmove-bob/homedir/public_html/css/', type: 'Directory' },
      { path: 'cpmove-bob/homedir/public_html/css/site.css', body: 'body{}', mode: 0o600 },
      { path: 'cpmove-bob/homedir/public_html/home.html', type: 'SymbolicLink', linkpath: 'index.html' },
      { path: 'cpmove-bob/homedir/public_html/copy.html', type: 'Link', linkpath: 'cpmove-bob/homedir/public_html/index.html' },
    ]);
    const copied = await copySiteFiles(file, 'public_html', ['public_html'], siteWriter(docroot, owner), DEFAULT_IMPORT_LIMITS, () => {});
    assert.equal(copied.copied_files, 2, 'two regular files are copied (links are not counted)');
    for (const p of ['index.html', 'css', 'css/site.css', 'home.html', 'copy.html']) assert.equal(fs.lstatSync(path.join(docroot, p)).uid, owner.uid, p);
    assert.equal(fs.readlinkSync(path.join(docroot, 'home.html')), 'index.html', 'the symbolic link is kept as it was');
    // new folders inherit the docroot's www-data group (set-group-id), so nginx can enter them
    assert.equal(fs.statSync(path.join(docroot, 'css')).gid, WWW_DATA, "new folders get the docroot's www-data group");
    assert.equal((await siteGet(port, s.domain, '/copy.html')).body, '<h1>bob</h1>', "the hard-linked copy is served with the linked file's content");
  });

  it('a restore puts the files back owned by the site user', async () => {
    const { s, docroot, owner } = await newSite();
    await upload(docroot, owner, 'data/kept.txt', 'before');
    const backupId = randomUUID();
    const made = await apply({ kind: 'backup.create', backupId, siteId: s.id, databases: [] });
    assert.equal(made.ok, true, JSON.stringify(made));
    await upload(docroot, owner, 'data/kept.txt', 'after');
    await upload(docroot, owner, 'data/new.txt', 'new');
    const sha256 = String((made as { detail: Record<string, unknown> }).detail.sha256);
    const restored = await apply({ kind: 'backup.restore', backupId, fromSiteId: s.id, sha256, site: { ...s, generation: 2 }, databases: [] });
    assert.equal(restored.ok, true, JSON.stringify(restored));
    assert.equal(fs.readFileSync(path.join(docroot, 'data/kept.txt'), 'utf8'), 'before', 'the restore puts the backed-up content back');
    assert.equal(fs.existsSync(path.join(docroot, 'data/new.txt')), false, 'a file made after the backup is gone after the restore');
    for (const p of ['', 'data', 'data/kept.txt', 'index.html']) assert.equal(fs.statSync(path.join(docroot, p)).uid, owner.uid, p || 'docroot');
    assert.equal(fs.statSync(docroot).mode & 0o7777, 0o2750, 'the restored docroot keeps its mode 2750');
  });

  it('deleting a site removes its user and its files', async () => {
    const { s, owner } = await newSite();
    assert.ok(passwdLine(owner.name), `the site user ${owner.name} exists before the deletion`);
    const r = await apply({ kind: 'site.delete', siteId: s.id, domain: s.domain });
    assert.equal(r.ok, true, JSON.stringify(r));
    assert.equal(passwdLine(owner.name), null, 'the site user is gone from /etc/passwd');
    assert.equal(siteOwner(node.root, s.id), null, 'the deleted site has no owner');
    assert.equal(fs.existsSync(path.join(root, 'sites', s.domain)), false, 'the site folder is gone');
    assert.equal(listSiteUsers().some((u) => u.name === owner.name), false, 'the site user is no longer listed');
  });

  it('never takes over an existing account of the same name', async () => {
    const s = siteSpec({ phpVersion: PHP });
    const name = siteUserName(node.root, s.id);
    assert.equal((await run('useradd', ['--no-create-home', '--shell', '/usr/sbin/nologin', '--comment', 'someone else', name])).code, 0, "an account of the site user's name is made beforehand");
    try {
      const r = await apply({ kind: 'site.apply', site: s });
      assert.equal(r.ok, false, "the site is refused when its user's name is taken");
      assert.match(String((r as { error: string }).error), /exists and is not site/, "the error says the account is not the site's");
      assert.match(passwdLine(name)!, /:someone else:/, 'the existing account is left as it was');
      await assert.rejects(ensureSiteUser(node.root, s.id, '/nowhere'), /exists and is not site/);
    } finally {
      await run('userdel', [name]);
    }
  });

  it('a node restarted without a site removes the user it left behind, and gives a user to a site from before site users', async () => {
    const { s, owner } = await newSite();
    const older = await newSite();
    await node.stop();
    // as a node before site users left it: the docroot root's, no user
    await run('chown', ['-R', 'root:root', older.docroot]);
    assert.equal((await run('userdel', [older.owner.name])).code, 0, "the older site's user is removed, as before site users");
    const sites = JSON.parse(fs.readFileSync(path.join(root, 'state/sites.json'), 'utf8')) as Record<string, unknown>;
    // a site lost with its files (the node knows nothing of it any more)
    delete sites[s.id];
    fs.writeFileSync(path.join(root, 'state/sites.json'), JSON.stringify(sites));
    fs.rmSync(path.join(root, 'sites', s.domain), { recursive: true });
    fs.rmSync(path.join(root, 'etc/php', PHP, 'pool.d', `${s.domain}.conf`));
    node = await startHostingNode({ root, webPort: port, webHost: '127.0.0.1', backupDir: path.join(root, 'backups'), logger: env.logger });
    assert.equal(passwdLine(owner.name), null, "the lost site's user is removed on restart");
    const adopted = siteOwner(node.root, older.s.id);
    assert.ok(adopted, 'the older site has a user again');
    for (const p of ['', 'index.html', 'index.php']) assert.equal(fs.statSync(path.join(older.docroot, p)).uid, adopted.uid, p || 'docroot');
  });
});

describe('a node that may not create users', function () {
  it('runs as a non-root agent with its own user owning the files, and says so in its facts', async function () {
    this.timeout(120_000);
    const root = tempNodeRoot('su-nobody-');
    const nobody = { uid: 65534, gid: 65534 };
    fs.chownSync(root, nobody.uid, nobody.gid);
    const repo = path.resolve(__dirname, '../../..');
    const script = path.join(root, 'agent.ts');
    // a hosting node under `nobody`, as a non-root agent runs it (built-in web server: no nginx for a plain user)
    fs.writeFileSync(
      script,
      `import { Readable } from 'node:stream';
import { startHostingNode } from ${JSON.stringify(path.join(repo, 'hosting-node'))};
import { writeSiteFile } from ${JSON.stringify(path.join(repo, 'hosting-node/site-files'))};
import { createLogger } from ${JSON.stringify(path.join(repo, 'platform/logger'))};
(async () => {
  const node = await startHostingNode({ root: ${JSON.stringify(path.join(root, 'node'))}, webPort: ${await freePort()}, webHost: '127.0.0.1', builtinWebServer: true, logger: createLogger('error') });
  const site = ${JSON.stringify(siteSpec())};
  const r = await node.apply({ id: 'op-1', kind: 'site.apply', site });
  await writeSiteFile(node.root + '/sites/' + site.domain + '/public_html', 'up/file.txt', Readable.from([Buffer.from('x')]), 100, 100, null);
  process.stdout.write(JSON.stringify({ facts: node.facts(), r, domain: site.domain, id: site.id }));
  await node.stop();
})().catch((err) => { process.stderr.write(String(err.stack)); process.exit(1); });
`,
    );
    try {
      const out = await new Promise<string>((resolve, reject) => {
        const child = spawn(process.execPath, ['--import', 'tsx', script], { ...nobody, cwd: repo, env: { PATH: process.env.PATH, HOME: root } });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (c: Buffer) => (stdout += c));
        child.stderr.on('data', (c: Buffer) => (stderr += c));
        child.on('close', (code) => (code === 0 ? resolve(stdout) : reject(new Error(`agent as nobody exited ${code}: ${stderr}`))));
      });
      const got = JSON.parse(out) as { facts: { siteUsers: boolean }; r: { ok: boolean }; domain: string; id: string };
      assert.equal(got.r.ok, true, JSON.stringify(got.r));
      assert.equal(got.facts.siteUsers, false, 'a non-root node says in its facts that it makes no site users');
      const docroot = path.join(root, 'node/sites', got.domain, 'public_html');
      for (const p of ['', 'index.html', 'up', 'up/file.txt']) assert.equal(fs.statSync(path.join(docroot, p)).uid, nobody.uid, p || 'docroot');
      assert.equal(siteOwner(path.join(root, 'node'), got.id), null, 'no site owner on a non-root node');
      assert.equal(listSiteUsers().some((u) => u.root === path.join(root, 'node')), false, 'a non-root node made no site users');
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});
