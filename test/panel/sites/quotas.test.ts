import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { addNode, nodeSiteUsage, recordHeartbeat } from '../../../services/panel/nodes/nodes';
import { recordSiteUsage } from '../../../services/panel/sites/quotas';
import { createOrgWithLogin, getFromNode, platformAdmin, startHostingPanel, unique, type HostingPanel, type PanelClient, type Reply } from '../../helpers/panel';
import { env } from '../../setup/env';

// Soft quotas (spec 2 section 2.3 rules 3-4) over real HTTP: a real panel with its hosting node
// (nginx), the usage page of an org's accounts, and the file manager of a website's docroot: paths
// confined to it, uploads streamed to disk and refused at the disk, inode and site quota limits as
// measured on the node, and new websites refused at the measured limit.

const MB = 1024 * 1024;

function refused(r: Reply, status: number, code: string) {
  assert.equal(r.status, status, JSON.stringify(r.json));
  assert.equal(r.json.error.code, code, JSON.stringify(r.json));
}

/** PUT of a raw body (a Buffer with its Content-Length, or a stream sent chunked, without one). */
async function upload(c: PanelClient, siteId: string, rel: string, body: Buffer | { chunked: Buffer }): Promise<Reply> {
  const init: RequestInit & { duplex?: 'half' } = { method: 'PUT', headers: { 'content-type': 'application/octet-stream', ...(c.cookie ? { cookie: c.cookie, ...(c.csrf ? { 'x-csrf-token': c.csrf } : {}) } : {}) } };
  if (Buffer.isBuffer(body)) init.body = body;
  else {
    const data = body.chunked;
    init.body = new ReadableStream({
      start(ctl) {
        for (let i = 0; i < data.length; i += 256 * 1024) ctl.enqueue(new Uint8Array(data.subarray(i, i + 256 * 1024)));
        ctl.close();
      },
    });
    init.duplex = 'half';
  }
  const res = await fetch(`${c.base}/v1/sites/${siteId}/files?path=${encodeURIComponent(rel)}`, init);
  const text = await res.text();
  return { status: res.status, headers: res.headers, json: text ? JSON.parse(text) : undefined };
}

const files = (c: PanelClient, siteId: string, rel = '') => c.get(`/v1/sites/${siteId}/files?path=${encodeURIComponent(rel)}`);
const remove = (c: PanelClient, siteId: string, rel: string) => c.del(`/v1/sites/${siteId}/files?path=${encodeURIComponent(rel)}`);

const serve = getFromNode;

async function activeSite(c: PanelClient, orgId: string, body: Record<string, unknown> = {}): Promise<{ id: string; domain: string }> {
  const domain = `${unique('q')}.example.com`;
  const r = await c.post(`/v1/orgs/${orgId}/sites`, { domain, ...body });
  assert.equal(r.status, 201, JSON.stringify(r.json));
  const deadline = Date.now() + 30_000;
  for (;;) {
    const s = await c.get(`/v1/sites/${r.json.id}`);
    if (s.json.status === 'active') return { id: r.json.id, domain };
    if (s.json.status === 'failed' || Date.now() > deadline) throw new Error(`site ${domain}: ${JSON.stringify(s.json)}`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

describe('panel: soft quotas, usage and the file manager', function () {
  this.timeout(120_000);
  let panel: HostingPanel;
  let admin: PanelClient;
  let provider: Awaited<ReturnType<typeof createOrgWithLogin>>;
  let reseller: Awaited<ReturnType<typeof createOrgWithLogin>>;
  const docroot = (domain: string) => path.join(panel.root, 'sites', domain, 'public_html');

  before(async function () {
    this.timeout(90_000);
    panel = await startHostingPanel();
    admin = await platformAdmin(panel.url);
    provider = await createOrgWithLogin(admin, { type: 'provider' });
    reseller = await createOrgWithLogin(provider.client, { type: 'reseller' });
  });
  after(async () => {
    await panel?.close();
  });

  it('lists, uploads (served by nginx at once), replaces, nests and deletes files in the docroot', async () => {
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const site = await activeSite(customer.client, customer.id);
    const start = await files(customer.client, site.id);
    assert.equal(start.status, 200, JSON.stringify(start.json));
    assert.equal(start.json.path, '/', 'the listing starts at the docroot');
    assert.deepEqual(start.json.entries.map((e: { name: string }) => e.name), ['index.html'], "a new site's docroot holds only index.html");

    const put = await upload(customer.client, site.id, 'hello.txt', Buffer.from('hello from the file manager\n'));
    assert.equal(put.status, 201, JSON.stringify(put.json));
    assert.equal(put.json.path, '/hello.txt', 'the upload answers its path from the docroot');
    assert.equal(put.json.bytes, 28, 'the upload answers its size in bytes');
    assert.equal(put.json.replaced, false, 'a new file is not a replacement');
    assert.equal((await serve(panel.webPort, site.domain, '/hello.txt')).body, 'hello from the file manager\n', 'nginx serves the uploaded file at once');
    const again = await upload(customer.client, site.id, 'hello.txt', Buffer.from('replaced\n'));
    assert.equal(again.status, 200, `replacing a file answers 200: ${JSON.stringify(again.json)}`);
    assert.equal(again.json.replaced, true, 'the second upload is a replacement');
    assert.equal((await serve(panel.webPort, site.domain, '/hello.txt')).body, 'replaced\n', 'nginx serves the replaced content');

    const nested = await upload(customer.client, site.id, 'assets/css/site.css', Buffer.from('body{}'));
    assert.equal(nested.status, 201, JSON.stringify(nested.json));
    const list = await files(customer.client, site.id, 'assets/css');
    assert.deepEqual(list.json.entries, [{ name: 'site.css', type: 'file', size: 6, modified: list.json.entries[0].modified }], 'the nested folder lists the uploaded file with its size');
    const top = await files(customer.client, site.id, '');
    assert.deepEqual(top.json.entries.map((e: { name: string; type: string }) => `${e.name}:${e.type}`), ['assets:directory', 'hello.txt:file', 'index.html:file'], 'the top listing has the created folder and both files');

    // a 20 MB upload is streamed to disk whole
    const big = Buffer.alloc(20 * MB, 7);
    const put20 = await upload(customer.client, site.id, 'big.bin', big);
    assert.equal(put20.status, 201, `the 20 MB upload is stored: ${JSON.stringify(put20.json)}`);
    assert.equal(fs.statSync(path.join(docroot(site.domain), 'big.bin')).size, 20 * MB, 'the 20 MB file is whole on disk');
    assert.ok(put20.json.usage.disk_mb >= 20, JSON.stringify(put20.json));

    refused(await files(customer.client, site.id, 'hello.txt'), 409, 'conflict');
    refused(await files(customer.client, site.id, 'nope'), 404, 'not_found');
    refused(await upload(customer.client, site.id, 'assets', Buffer.from('x')), 409, 'conflict');
    refused(await remove(customer.client, site.id, 'nope.txt'), 404, 'not_found');

    const delFile = await remove(customer.client, site.id, 'hello.txt');
    assert.equal(delFile.status, 200, JSON.stringify(delFile.json));
    assert.equal(delFile.json.type, 'file', 'the deleted entry is a file');
    assert.equal((await serve(panel.webPort, site.domain, '/hello.txt')).status, 404, 'the deleted file is no longer served');
    const delDir = await remove(customer.client, site.id, 'assets');
    assert.equal(delDir.json.type, 'directory', 'the deleted entry is a directory');
    assert.ok(!fs.existsSync(path.join(docroot(site.domain), 'assets')), 'the deleted directory is gone from the docroot');
    assert.equal((await remove(customer.client, site.id, 'big.bin')).status, 200, 'the big file is deleted');

    // the audit log has each change; others' sites are 404
    const log = await reseller.client.get(`/v1/orgs/${customer.id}/audit`);
    const actions = log.json.entries.filter((e: { target_id: string }) => e.target_id === site.id).map((e: { action: string }) => e.action);
    assert.ok(actions.includes('site.file.upload') && actions.includes('site.file.delete'), JSON.stringify(actions));
    const other = await createOrgWithLogin(reseller.client, { type: 'customer' });
    refused(await files(other.client, site.id), 404, 'not_found');
    refused(await upload(other.client, site.id, 'x.txt', Buffer.from('x')), 404, 'not_found');
    refused(await remove(other.client, site.id, 'index.html'), 404, 'not_found');
  });

  it('confines paths to the docroot: no .., no absolute paths, no links followed out', async () => {
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const site = await activeSite(customer.client, customer.id);
    const root = docroot(site.domain);
    const secret = path.join(panel.root, 'secret.txt');
    fs.writeFileSync(secret, 'node secret');
    const outside = fs.mkdtempSync(path.join(panel.root, 'outside-'));
    fs.writeFileSync(path.join(outside, 'keep.txt'), 'keep me');
    // links a site's own PHP could make: to a file and to a folder outside the docroot
    fs.symlinkSync(secret, path.join(root, 'link.txt'));
    fs.symlinkSync(outside, path.join(root, 'out'));

    for (const p of ['../secret.txt', '../../secret.txt', 'a/../../secret.txt', './index.html', 'a//b', '/etc/passwd', '/', `${root}/index.html`, '..', '.', 'a\\..\\b', 'x\u0000y']) {
      refused(await upload(customer.client, site.id, p, Buffer.from('pwned')), 400, 'validation_failed');
      refused(await files(customer.client, site.id, p), 400, 'validation_failed');
      refused(await remove(customer.client, site.id, p), 400, 'validation_failed');
    }
    // percent-encoded dots arrive decoded: still refused
    const raw = await fetch(`${customer.client.base}/v1/sites/${site.id}/files?path=%2e%2e%2fsecret.txt`, { headers: { cookie: customer.client.cookie! } });
    assert.equal(raw.status, 400, 'percent-encoded dots are refused');
    // through links: never followed
    refused(await files(customer.client, site.id, 'out'), 400, 'validation_failed');
    refused(await upload(customer.client, site.id, 'out/new.txt', Buffer.from('pwned')), 400, 'validation_failed');
    refused(await upload(customer.client, site.id, 'out/keep.txt', Buffer.from('pwned')), 400, 'validation_failed');
    refused(await upload(customer.client, site.id, 'link.txt', Buffer.from('pwned')), 400, 'validation_failed');
    refused(await remove(customer.client, site.id, 'out/keep.txt'), 400, 'validation_failed');
    refused(await remove(customer.client, site.id, ''), 400, 'validation_failed');
    assert.equal(fs.readFileSync(secret, 'utf8'), 'node secret', 'the secret outside the docroot is untouched');
    assert.equal(fs.readFileSync(path.join(outside, 'keep.txt'), 'utf8'), 'keep me', 'the file behind the folder link is untouched');
    assert.ok(!fs.existsSync(path.join(outside, 'new.txt')), 'nothing is written outside the docroot');
    // the listing shows links as links; deleting one removes the link, not its target
    const list = await files(customer.client, site.id);
    assert.deepEqual(list.json.entries.filter((e: { type: string }) => e.type === 'symlink').map((e: { name: string }) => e.name), ['link.txt', 'out'], 'the listing shows both links as symlinks');
    assert.equal((await remove(customer.client, site.id, 'out')).json.type, 'symlink', 'deleting the folder link deletes a symlink');
    assert.equal((await remove(customer.client, site.id, 'link.txt')).json.type, 'symlink', 'deleting the file link deletes a symlink');
    assert.equal(fs.readFileSync(path.join(outside, 'keep.txt'), 'utf8'), 'keep me', "the folder link's target file is still there");
    assert.equal(fs.readFileSync(secret, 'utf8'), 'node secret', "the file link's target is still there");
    // nothing was left behind by the refused uploads
    assert.deepEqual(fs.readdirSync(root).sort(), ['index.html'], 'nothing was left behind by the refused uploads');
  });

  it('refuses uploads over 50 MB, with or without a Content-Length, writing nothing', async () => {
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const site = await activeSite(customer.client, customer.id);
    const tooBig = Buffer.alloc(50 * MB + 1, 1);
    const declared = await upload(customer.client, site.id, 'huge.bin', tooBig);
    refused(declared, 400, 'validation_failed');
    assert.equal(declared.json.error.details.field, 'body', 'the refusal names the body');
    const chunked = await upload(customer.client, site.id, 'huge.bin', { chunked: tooBig });
    refused(chunked, 400, 'validation_failed');
    assert.deepEqual(fs.readdirSync(docroot(site.domain)), ['index.html'], 'no file was written by the refused uploads');
    const exactly = await upload(customer.client, site.id, 'max.bin', { chunked: tooBig.subarray(0, 50 * MB) });
    assert.equal(exactly.status, 201, JSON.stringify(exactly.json));
    assert.equal(exactly.json.bytes, 50 * MB, 'exactly 50 MB is stored whole');
  });

  it('disk: uploads are refused at the measured limit of the account, of the site quota and of a level above; parallel uploads never overshoot', async () => {
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer', limits: { disk_mb: 4 } });
    const site = await activeSite(customer.client, customer.id, { quota_mb: 4 });
    assert.equal((await upload(customer.client, site.id, 'a.bin', Buffer.alloc(2 * MB, 1))).status, 201, 'a 2 MB upload fits in 4 MB');
    const over = await upload(customer.client, site.id, 'b.bin', Buffer.alloc(2.5 * MB, 1));
    refused(over, 409, 'limit_reached');
    assert.equal(over.json.error.details.limit, 'disk_mb', 'the refusal names the disk limit');
    assert.equal(over.json.error.details.org_id, customer.id, 'the refusal names the account whose limit it is');
    assert.ok(over.json.error.details.used >= 2 && over.json.error.details.used < 2.1, JSON.stringify(over.json));
    assert.ok(!fs.existsSync(path.join(docroot(site.domain), 'b.bin')), 'an upload over the disk quota leaves no file');
    // replacing a file with one no larger grows nothing: allowed
    assert.equal((await upload(customer.client, site.id, 'a.bin', Buffer.alloc(2 * MB, 2))).status, 200, 'replacing a file with one no larger is allowed');
    // without a Content-Length the stream is cut where the room ends, and nothing is kept
    const cut = await upload(customer.client, site.id, 'c.bin', { chunked: Buffer.alloc(3 * MB, 1) });
    refused(cut, 409, 'limit_reached');
    assert.deepEqual(fs.readdirSync(docroot(site.domain)).sort(), ['a.bin', 'index.html'], 'the cut stream left no file');
    assert.equal((await upload(customer.client, site.id, 'c.bin', { chunked: Buffer.alloc(MB, 1) })).status, 201, 'a 1 MB upload still fits');

    // the site's own quota binds too
    const roomy = await createOrgWithLogin(reseller.client, { type: 'customer', limits: { disk_mb: 100 } });
    const small = await activeSite(roomy.client, roomy.id, { quota_mb: 2 });
    const q = await upload(roomy.client, small.id, 'q.bin', Buffer.alloc(3 * MB, 1));
    refused(q, 409, 'limit_reached');
    assert.equal(q.json.error.details.limit, 'quota_mb', 'the refusal names the site quota');

    // a level above: a reseller of 6 MB whose first account's PHP wrote 5 MB past the panel (soft quotas do not stop it)
    const r2 = await createOrgWithLogin(provider.client, { type: 'reseller', limits: { disk_mb: 6 } });
    const c1 = await createOrgWithLogin(r2.client, { type: 'customer' });
    const c2 = await createOrgWithLogin(r2.client, { type: 'customer' });
    const s1 = await activeSite(c1.client, c1.id, { quota_mb: 2 });
    const s2 = await activeSite(c2.client, c2.id, { quota_mb: 2 });
    /** what PHP, SFTP or cron may write: the panel learns of it at the site's next measurement (the node's report, or the file manager's own) */
    const phpWrites = async (file: string, bytes: number) => {
      fs.writeFileSync(path.join(docroot(s1.domain), file), Buffer.alloc(bytes, 1));
      fs.writeFileSync(path.join(docroot(s1.domain), 'touch.txt'), 'x');
      assert.equal((await remove(c1.client, s1.id, 'touch.txt')).status, 200, 'the file manager delete measures the site');
    };
    await phpWrites('php-cache.bin', 5 * MB);
    const above = await upload(c2.client, s2.id, 'x.bin', Buffer.alloc(1.5 * MB, 1));
    refused(above, 409, 'limit_reached');
    assert.equal(above.json.error.details.org_id, r2.id, 'the refusal names the reseller above');
    assert.equal(above.json.error.details.limit, 'disk_mb', "the refusal names the reseller's disk limit");
    // at the measured limit no new website is created below the reseller, even one whose quota fits
    await phpWrites('php-cache-2.bin', MB);
    const noSite = await c2.client.post(`/v1/orgs/${c2.id}/sites`, { domain: `${unique('q')}.example.com`, quota_mb: 1 });
    refused(noSite, 409, 'limit_reached');
    assert.equal(noSite.json.error.details.limit, 'disk_mb', 'the new website is refused at the disk limit');
    assert.equal(noSite.json.error.details.org_id, r2.id, 'the refusal names the reseller above');
    assert.match(noSite.json.error.message, /measured/, 'the message says the limit is measured');
    assert.equal((await remove(c1.client, s1.id, 'php-cache.bin')).status, 200, 'the PHP-written file is deleted');
    assert.equal((await c2.client.post(`/v1/orgs/${c2.id}/sites`, { domain: `${unique('q')}.example.com`, quota_mb: 1 })).status, 201, 'with room again, the new website is created');

    // parallel uploads: reservations of uploads under way count, so at most what fits is written
    const par = await createOrgWithLogin(reseller.client, { type: 'customer', limits: { disk_mb: 4 } });
    const ps = await activeSite(par.client, par.id, { quota_mb: 4 });
    const all = await Promise.all([1, 2, 3, 4, 5].map((i) => upload(par.client, ps.id, `p${i}.bin`, Buffer.alloc(1.5 * MB, i))));
    const ok = all.filter((r) => r.status === 201);
    assert.ok(ok.length >= 1 && ok.length <= 2, JSON.stringify(all.map((r) => r.status)));
    for (const r of all.filter((x) => x.status !== 201)) refused(r, 409, 'limit_reached');
    const usage = await par.client.get(`/v1/orgs/${par.id}/usage`);
    assert.ok(usage.json.accounts[0].disk_mb.used <= 4, JSON.stringify(usage.json.accounts[0]));
  });

  it('a node report whose usage walk began before an upload was measured does not put back the older use', async () => {
    const node = unique('n-');
    await addNode(env.db, null, node);
    const site = randomUUID();
    const used = async () => ((await nodeSiteUsage(env.db, node)).usage as Array<{ siteId: string; diskMb: number }>).find((u) => u.siteId === site)?.diskMb;
    const report = (diskMb: number, since: number | null) =>
      recordHeartbeat(env.db, node, { facts: { webServer: 'builtin', phpVersions: [], mariadb: false, roles: ['web'], webAddress: '127.0.0.1:1' }, metrics: { bootId: 'b', uptimeSeconds: 1, cpuPercent: 1, load: [0, 0, 0], memory: { totalMb: 1, availableMb: 1 }, rootFs: { totalMb: 1, freeMb: 1 }, network: { rxBytes: 0, txBytes: 0 }, sampledAt: new Date().toISOString() }, usage: [{ siteId: site, diskMb, inodes: 1 }], agentStartedAt: new Date(0).toISOString(), reconnects: 0 }, since);
    const t = Date.now();
    await report(1, t - 10_000);
    await recordSiteUsage(env.db, node, site, { diskMb: 3, inodes: 2 }, t); // the upload's check measured 3 MB
    await report(1, t - 5_000); // a walk that began before it ends now
    assert.equal(await used(), 3, "the upload's measurement stands against an older walk");
    await recordSiteUsage(env.db, node, site, { diskMb: 2, inodes: 2 }, t - 1); // an older measurement finishing late
    assert.equal(await used(), 3, 'an older measurement finishing late does not replace the newer one');
    await report(4, t + 1); // a walk that began after it wins
    assert.equal(await used(), 4, 'a walk that began after the measurement wins');
    await report(5, null); // an agent's report (no walk start) replaces, as before
    assert.equal(await used(), 5, "an agent's report replaces the usage");
  });

  it('inodes: uploads and new websites are refused at the measured limit; a replacement or a delete is not', async () => {
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer', limits: { inodes: 5 } });
    const site = await activeSite(customer.client, customer.id);
    // the docroot and its index.html: 2; three files more reach 5
    for (const f of ['a.txt', 'b.txt', 'c.txt']) assert.equal((await upload(customer.client, site.id, f, Buffer.from(f))).status, 201, `${f} fits under the inode limit`);
    const over = await upload(customer.client, site.id, 'd.txt', Buffer.from('d'));
    refused(over, 409, 'limit_reached');
    assert.equal(over.json.error.details.limit, 'inodes', 'the refusal names the inode limit');
    assert.equal(over.json.error.details.used, 5, 'the refusal gives the measured 5 inodes');
    refused(await upload(customer.client, site.id, 'sub/e.txt', Buffer.from('e')), 409, 'limit_reached');
    assert.equal((await upload(customer.client, site.id, 'a.txt', Buffer.from('replaced'))).status, 200, 'replacing a file adds no inode: allowed');
    const newSite = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: `${unique('q')}.example.com` });
    refused(newSite, 409, 'limit_reached');
    assert.equal(newSite.json.error.details.limit, 'inodes', 'the new website is refused at the inode limit');
    assert.equal((await remove(customer.client, site.id, 'c.txt')).status, 200, 'the delete is allowed at the limit');
    assert.equal((await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: `${unique('q')}.example.com` })).status, 201, 'with an inode free, the new website is created');
  });

  it('usage page: accounts of the subtree against their effective limits, those at or above 80 % first, then by name; memory for the hosting node only', async () => {
    const r3 = await createOrgWithLogin(provider.client, { type: 'reseller', limits: { disk_mb: 100 } });
    const low = await createOrgWithLogin(r3.client, { type: 'customer', name: `a-low-${unique('')}` });
    const none = await createOrgWithLogin(r3.client, { type: 'customer', name: `b-none-${unique('')}` });
    const high = await createOrgWithLogin(r3.client, { type: 'customer', name: `z-high-${unique('')}`, limits: { disk_mb: 4 } });
    const files8 = await createOrgWithLogin(r3.client, { type: 'customer', name: `y-inodes-${unique('')}`, limits: { inodes: 5 } });
    const sLow = await activeSite(low.client, low.id, { quota_mb: 10 });
    const sHigh = await activeSite(high.client, high.id, { quota_mb: 4 });
    const sFiles = await activeSite(files8.client, files8.id, { quota_mb: 10 });
    assert.equal((await upload(low.client, sLow.id, 'x.bin', Buffer.alloc(MB, 1))).status, 201, "the low account's 1 MB upload is stored");
    assert.equal((await upload(high.client, sHigh.id, 'x.bin', Buffer.alloc(3.5 * MB, 1))).status, 201, "the high account's 3.5 MB upload is stored");
    assert.equal((await upload(files8.client, sFiles.id, 'x.txt', Buffer.from('x'))).status, 201, 'x.txt is stored for the inodes account');
    assert.equal((await upload(files8.client, sFiles.id, 'y.txt', Buffer.from('y'))).status, 201, 'y.txt is stored for the inodes account');

    const u = await r3.client.get(`/v1/orgs/${r3.id}/usage`);
    assert.equal(u.status, 200, JSON.stringify(u.json));
    assert.deepEqual(u.json.accounts.map((a: { org_id: string }) => a.org_id), [files8.id, high.id, low.id, none.id], 'accounts at or above 80 % first, then by name');
    const byId = Object.fromEntries(u.json.accounts.map((a: { org_id: string }) => [a.org_id, a]));
    assert.ok(byId[high.id].disk_mb.used >= 3.5 && byId[high.id].disk_mb.used < 3.6, `disk used of the high account: ${JSON.stringify(byId[high.id].disk_mb)}`);
    assert.equal(byId[high.id].disk_mb.limit, 4, "the high account's own 4 MB limit applies");
    assert.equal(byId[high.id].disk_mb.set_by.org_id, high.id, "the high account's limit is set by itself");
    assert.ok(byId[high.id].disk_mb.percent >= 87, `disk percent of the high account: ${byId[high.id].disk_mb.percent}`);
    assert.equal(byId[high.id].level, 'warning', 'the high account is in warning');
    assert.equal(byId[files8.id].inodes.used, 4, 'the inodes account uses 4 inodes');
    assert.equal(byId[files8.id].inodes.percent, 80, '4 of 5 inodes is 80 %');
    assert.equal(byId[low.id].disk_mb.limit, 100, "the low account inherits the reseller's 100 MB");
    assert.equal(byId[low.id].disk_mb.set_by.org_id, r3.id, "the low account's limit is set by the reseller");
    assert.equal(byId[low.id].level, 'ok', 'the low account is ok');
    assert.equal(byId[none.id].disk_mb.used, 0, 'an account without sites uses no disk');
    assert.equal(byId[none.id].sites, 0, 'an account without sites has none');
    assert.equal(byId[low.id].sites, 1, 'the low account has one site');
    assert.equal(byId[low.id].sites_measured, 1, "the low account's site is measured");
    assert.equal(u.json.memory.scope, 'hosting node only', 'memory is scoped to the hosting node only');
    assert.match(u.json.memory.note, /hosting node only/, 'the memory note says hosting node only');
    assert.equal(u.json.memory.node, 'hosting', 'memory is that of the node named hosting');
    assert.ok(u.json.memory.total_mb > 0, `the hosting node's memory total: ${JSON.stringify(u.json.memory)}`);
    assert.equal(byId[low.id].memory_mb.sites_measured, 1, "the low account's site is measured for memory");
    assert.equal(typeof byId[low.id].memory_mb.used, 'number', 'the memory use is a number');

    // an account reads its own line; outside the subtree: 404
    const own = await high.client.get(`/v1/orgs/${high.id}/usage`);
    assert.deepEqual(own.json.accounts.map((a: { org_id: string }) => a.org_id), [high.id], 'an account reads only its own line');
    refused(await high.client.get(`/v1/orgs/${r3.id}/usage`), 404, 'not_found');
  });

  it('sites on an agent node: the file manager answers 409 (offered on the hosting node only)', async () => {
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const node = unique('n-');
    await addNode(env.db, null, node);
    await env.db('panel_nodes').where({ name: node }).update({ state: 'alive', roles: ['web'] });
    try {
      const r = await admin.post(`/v1/orgs/${customer.id}/sites`, { domain: `${unique('q')}.example.com`, node });
      assert.equal(r.status, 201, JSON.stringify(r.json));
      for (const res of [await files(customer.client, r.json.id), await upload(customer.client, r.json.id, 'a.txt', Buffer.from('a')), await remove(customer.client, r.json.id, 'index.html')]) {
        refused(res, 409, 'conflict');
        assert.match(res.json.error.message, /hosting node only/, 'the refusal says the file manager is for the hosting node only');
      }
    } finally {
      await env.db('panel_nodes').where({ name: node }).update({ draining: true });
    }
  });
});
