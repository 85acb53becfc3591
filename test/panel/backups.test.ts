import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { run } from '../../platform/hosting-node/processes';
import { siteGet } from '../helpers/hosting-node';
import { createOrgWithLogin, platformAdmin, startHostingPanel, unique, type HostingPanel, type PanelClient, type Reply } from '../helpers/panel';
import { env } from '../setup/env';

// Backups (spec 2 sections 2.6, 4.1, 4.2 "Backups at platform level", 4.4.5-4.4.6, 7, 8) over real
// HTTP: a real panel whose hosting node runs nginx and MariaDB with a -backup-dir, a real Temporal
// worker. Restore points are real archives on disk holding the site's real files and real dumps.

function refused(r: Reply, status: number, code: string) {
  assert.equal(r.status, status, JSON.stringify(r.json));
  assert.equal(r.json.error.code, code, JSON.stringify(r.json));
}

/** Polls `read` until `done` holds. */
async function until(what: string, read: () => Promise<Reply>, done: (r: Reply) => boolean, timeoutMs = 60_000): Promise<Reply> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await read();
    if (done(r)) return r;
    if (Date.now() > deadline) throw new Error(`${what}: still ${r.status} ${JSON.stringify(r.json)} after ${timeoutMs} ms`);
    await new Promise((res) => setTimeout(res, 150));
  }
}

const dbName = (label = 'db') => unique(`${label}_`).replace(/-/g, '_');
const domainName = (label = 'site') => `${unique(label)}.example.com`;

/** SQL as the node's administrator over its socket. */
async function sql(panel: HostingPanel, statements: string): Promise<string> {
  const r = await run('mariadb', ['--no-defaults', `--socket=${path.join(panel.root, 'run/my.sock')}`, '--default-character-set=utf8mb4', '--batch', '--skip-column-names', '-e', statements], { timeoutMs: 20_000 });
  if (r.code !== 0) throw new Error(r.stderr);
  return r.stdout.trim();
}

/** Every regular file under a folder, by relative path, with its content. */
function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of fs.readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (e.isFile()) out[path.relative(dir, path.join(e.parentPath, e.name))] = fs.readFileSync(path.join(e.parentPath, e.name), 'utf8');
  }
  return out;
}

describe('panel: backups on the hosting node (restore points, restore into another account)', function () {
  this.timeout(180_000);
  let panel: HostingPanel;
  let admin: PanelClient;
  let reseller: Awaited<ReturnType<typeof createOrgWithLogin>>;

  before(async function () {
    this.timeout(120_000);
    panel = await startHostingPanel({ mariadb: true, backups: true });
    assert.equal(panel.runtime.hostingNode?.facts().backups, true);
    admin = await platformAdmin(panel.url);
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    reseller = await createOrgWithLogin(provider.client, { type: 'reseller' });
  });
  after(async () => {
    await panel?.close();
  });

  /** A customer with an active site (some files) and an active database with rows. */
  async function siteWithData() {
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const domain = domainName('shop');
    const s = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain });
    assert.equal(s.status, 201, JSON.stringify(s.json));
    await until('site active', () => customer.client.get(`/v1/sites/${s.json.id}`), (r) => r.json.status === 'active');
    const name = dbName('shop');
    const d = await customer.client.post(`/v1/orgs/${customer.id}/databases`, { name });
    assert.equal(d.status, 201, JSON.stringify(d.json));
    await until('database active', () => customer.client.get(`/v1/databases/${d.json.id}`), (r) => r.json.status === 'active');
    await sql(panel, `CREATE TABLE ${name}.orders (id INT PRIMARY KEY, item VARCHAR(40), price DECIMAL(10,2)) DEFAULT CHARSET=utf8mb4; INSERT INTO ${name}.orders VALUES (1,'tea','3.50'),(2,'cake','4.25'),(3,'ünïcode ☕','0.99');`);
    const docroot = path.join(panel.root, 'sites', domain, 'public_html');
    fs.mkdirSync(path.join(docroot, 'img/deep'), { recursive: true });
    fs.writeFileSync(path.join(docroot, 'index.html'), `<h1>${domain} from the backup</h1>`);
    fs.writeFileSync(path.join(docroot, 'img/deep/a.txt'), 'deep file');
    fs.writeFileSync(path.join(docroot, 'big.bin'), Buffer.alloc(3 << 20, 7).toString('latin1'));
    return { customer, site: s.json, domain, db: name, docroot };
  }

  async function backupReady(by: PanelClient, siteId: string): Promise<Reply> {
    const r = await by.post(`/v1/sites/${siteId}/restore-points`);
    assert.equal(r.status, 202, JSON.stringify(r.json));
    assert.equal(r.json.status, 'pending');
    assert.match(r.json.offsite_copies, /^PLANNED/);
    return until('restore point ready', () => by.get(`/v1/restore-points/${r.json.id}`), (x) => x.json.status !== 'pending');
  }

  it('backup → modify → restore into another account: the files and database rows are those of the restore point', async () => {
    const src = await siteWithData();
    const before = tree(src.docroot);
    const rowsBefore = await sql(panel, `SELECT * FROM ${src.db}.orders ORDER BY id`);
    const rp = await backupReady(src.customer.client, src.site.id);
    assert.equal(rp.json.status, 'ready', JSON.stringify(rp.json));
    assert.match(rp.json.sha256, /^[0-9a-f]{64}$/);
    assert.deepEqual(rp.json.databases, [src.db]);
    const file = path.join(panel.root, 'backups', rp.json.file);
    assert.ok(fs.existsSync(file), file);
    assert.equal(fs.statSync(file).size, rp.json.bytes);
    const listed = await src.customer.client.get(`/v1/sites/${src.site.id}/restore-points`);
    assert.deepEqual(listed.json.restore_points.map((x: { id: string }) => x.id), [rp.json.id]);
    assert.match(listed.json.offsite_copies, /PLANNED/);

    // the site changes after the restore point
    fs.writeFileSync(path.join(src.docroot, 'index.html'), 'changed');
    fs.rmSync(path.join(src.docroot, 'img'), { recursive: true });
    await sql(panel, `DELETE FROM ${src.db}.orders WHERE id = 2; INSERT INTO ${src.db}.orders VALUES (9,'later','1.00');`);

    // into another account (platform level only)
    const target = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const newDomain = domainName('restored');
    const newDb = dbName('copy');
    refused(await src.customer.client.post(`/v1/restore-points/${rp.json.id}/restore`, { into_account: target.id, domain: newDomain }), 403, 'forbidden');
    // the domain-unused rule: the original site still holds its domain
    refused(await admin.post(`/v1/restore-points/${rp.json.id}/restore`, { into_account: target.id }), 409, 'conflict');
    refused(await admin.post(`/v1/restore-points/${rp.json.id}/restore`, { into_account: target.id, domain: newDomain, databases: { nope: 'x' } }), 400, 'validation_failed');
    const r = await admin.post(`/v1/restore-points/${rp.json.id}/restore`, { into_account: target.id, domain: newDomain, databases: { [src.db]: newDb } });
    assert.equal(r.status, 202, JSON.stringify(r.json));
    assert.equal(r.json.site.org_id, target.id);
    assert.equal(r.json.site.domain, newDomain);
    assert.equal(r.json.databases.length, 1);
    const { password } = r.json.databases[0];
    const site = await until('restored site active', () => target.client.get(`/v1/sites/${r.json.site.id}`), (x) => x.json.status !== 'pending');
    assert.equal(site.json.status, 'active', JSON.stringify(site.json));
    const dbRow = await target.client.get(`/v1/databases/${r.json.databases[0].id}`);
    assert.equal(dbRow.json.status, 'active', JSON.stringify(dbRow.json));

    const restoredRoot = path.join(panel.root, 'sites', newDomain, 'public_html');
    assert.deepEqual(tree(restoredRoot), before);
    assert.equal(await sql(panel, `SELECT * FROM ${newDb}.orders ORDER BY id`), rowsBefore);
    const asUser = await run('mariadb', ['--no-defaults', '--protocol=TCP', '--host=127.0.0.1', `--port=${panel.dbPort}`, `--user=${newDb}`, `--password=${password}`, '--batch', '--skip-column-names', '-e', `SELECT count(*) FROM ${newDb}.orders`]);
    assert.equal(asUser.stdout.trim(), '3', asUser.stderr);
    const home = await siteGet(panel.webPort, newDomain);
    assert.equal(home.status, 200);
    assert.equal(home.body, `<h1>${src.domain} from the backup</h1>`);
    // it counts in the target account like any site and database
    const counts = (await target.client.get(`/v1/orgs/${target.id}`)).json.counts;
    assert.equal(counts.websites, 1);
    assert.equal(counts.databases, 1);
    // the password left the operation's row once it ended
    const op = await env.db('panel_node_ops').where({ id: site.json.operation_id }).first();
    assert.equal(op.kind, 'backup.restore');
    assert.equal(op.payload.databases, undefined);
  });

  it('deletes a restore point: its archive goes from the node and it is no longer listed', async () => {
    const src = await siteWithData();
    const rp = await backupReady(src.customer.client, src.site.id);
    const file = path.join(panel.root, 'backups', rp.json.file);
    assert.ok(fs.existsSync(file));
    const d = await src.customer.client.del(`/v1/restore-points/${rp.json.id}`);
    assert.equal(d.status, 202, JSON.stringify(d.json));
    await until('restore point gone', () => src.customer.client.get(`/v1/restore-points/${rp.json.id}`), (x) => x.status === 404);
    assert.ok(!fs.existsSync(file));
    assert.deepEqual((await src.customer.client.get(`/v1/sites/${src.site.id}/restore-points`)).json.restore_points, []);
    const other = await createOrgWithLogin(reseller.client, { type: 'customer' });
    refused(await other.client.post(`/v1/sites/${src.site.id}/restore-points`), 404, 'not_found');
    refused(await other.client.get(`/v1/sites/${src.site.id}/restore-points`), 404, 'not_found');
  });
});
