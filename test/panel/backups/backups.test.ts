import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { UnsafeArchive } from '../../../domain/panel/own-node';
import { extractArchive, fileSha256, listArchives } from '../../../hosting-node/backups';
import { freePort } from '../../../platform/ports';
import { addNode } from '../../../services/panel/nodes/nodes';
import { run } from '../../../hosting-node/processes';
import { NO_BACKUP_DIR } from '../../../hosting-node/site-backups';
import { queueBackup, resumePendingBackupOps } from '../../../services/panel/backups/backups';
import { backupScheduleId } from '../../../domain/panel/workflows';
import { siteGet } from '../../helpers/hosting-node';
import { createOrgWithLogin, platformAdmin, startHostingPanel, unique, type HostingPanel, type PanelClient, type Reply } from '../../helpers/panel';
import { env } from '../../setup/env';
import { readUntil } from '../../helpers/until';

// Backups (spec 2 sections 2.6, 4.1, 4.2 "Backups at platform level", 4.4.5-4.4.6, 7, 8) over real
// HTTP: a real panel whose hosting node runs nginx and MariaDB with a -backup-dir, a real Temporal
// worker. Restore points are real archives on disk holding the site's real files and real dumps.

function refused(r: Reply, status: number, code: string) {
  assert.equal(r.status, status, JSON.stringify(r.json));
  assert.equal(r.json.error.code, code, JSON.stringify(r.json));
}


/** how long an inspection folder stays in this suite (24 h in production) */
const INSPECTION_MS = 6000;

/** how long an agent node has to report an operation in this suite */
const AGENT_WAIT_MS = 8000;

const randomId = () => crypto.randomUUID();
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
    panel = await startHostingPanel({ mariadb: true, backups: true, backupInspectionMs: INSPECTION_MS, flags: ['-node-api-listen', '127.0.0.1:0'], opTimeoutMs: AGENT_WAIT_MS });
    assert.equal(panel.runtime.hostingNode?.facts().backups, true, 'the hosting node keeps backups');
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
    await readUntil('site active', () => customer.client.get(`/v1/sites/${s.json.id}`), (r) => r.json.status === 'active');
    const name = dbName('shop');
    const d = await customer.client.post(`/v1/orgs/${customer.id}/databases`, { name });
    assert.equal(d.status, 201, JSON.stringify(d.json));
    await readUntil('database active', () => customer.client.get(`/v1/databases/${d.json.id}`), (r) => r.json.status === 'active');
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
    assert.equal(r.json.status, 'pending', 'a new restore point is pending');
    assert.match(r.json.offsite_copies, /^PLANNED/, 'offsite copies are only planned');
    return readUntil('restore point ready', () => by.get(`/v1/restore-points/${r.json.id}`), (x) => x.json.status !== 'pending');
  }

  it('backup → modify → restore into another account: the files and database rows are those of the restore point', async () => {
    const src = await siteWithData();
    const before = tree(src.docroot);
    const rowsBefore = await sql(panel, `SELECT * FROM ${src.db}.orders ORDER BY id`);
    const rp = await backupReady(src.customer.client, src.site.id);
    assert.equal(rp.json.status, 'ready', JSON.stringify(rp.json));
    assert.match(rp.json.sha256, /^[0-9a-f]{64}$/, 'the restore point has a SHA-256');
    assert.deepEqual(rp.json.databases, [src.db], 'the restore point holds the site\'s database');
    const file = path.join(panel.root, 'backups', rp.json.file);
    assert.ok(fs.existsSync(file), file);
    assert.equal(fs.statSync(file).size, rp.json.bytes, 'the archive size on disk is the recorded bytes');
    const listed = await src.customer.client.get(`/v1/sites/${src.site.id}/restore-points`);
    assert.deepEqual(listed.json.restore_points.map((x: { id: string }) => x.id), [rp.json.id], 'the site lists its one restore point');
    assert.match(listed.json.offsite_copies, /PLANNED/, 'the list says offsite copies are only planned');

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
    refused(await admin.post(`/v1/restore-points/${rp.json.id}/restore`, { into_account: target.id, domain: newDomain, databases: { [src.db]: 'bad-name' } }), 400, 'validation_failed');
    refused(await admin.post(`/v1/restore-points/${rp.json.id}/restore`, { into_account: src.customer.id, domain: newDomain, databases: { [src.db]: src.db } }), 409, 'conflict');
    assert.equal((await target.client.get(`/v1/orgs/${target.id}`)).json.counts.websites, 0, 'a refused restore creates nothing');
    const r = await admin.post(`/v1/restore-points/${rp.json.id}/restore`, { into_account: target.id, domain: newDomain, databases: { [src.db]: newDb } });
    assert.equal(r.status, 202, JSON.stringify(r.json));
    assert.equal(r.json.site.org_id, target.id, 'the restored site belongs to the target account');
    assert.equal(r.json.site.domain, newDomain, 'the restored site has the new domain');
    assert.equal(r.json.databases.length, 1, 'one database restored');
    const { password } = r.json.databases[0];
    const site = await readUntil('restored site active', () => target.client.get(`/v1/sites/${r.json.site.id}`), (x) => x.json.status !== 'pending');
    assert.equal(site.json.status, 'active', JSON.stringify(site.json));
    const dbRow = await target.client.get(`/v1/databases/${r.json.databases[0].id}`);
    assert.equal(dbRow.json.status, 'active', JSON.stringify(dbRow.json));

    const restoredRoot = path.join(panel.root, 'sites', newDomain, 'public_html');
    assert.deepEqual(tree(restoredRoot), before, 'the restored files are those of the restore point');
    assert.equal(await sql(panel, `SELECT * FROM ${newDb}.orders ORDER BY id`), rowsBefore, 'the restored rows are those of the restore point');
    const asUser = await run('mariadb', ['--no-defaults', '--protocol=TCP', '--host=127.0.0.1', `--port=${panel.dbPort}`, `--user=${newDb}`, `--password=${password}`, '--batch', '--skip-column-names', '-e', `SELECT count(*) FROM ${newDb}.orders`]);
    assert.equal(asUser.stdout.trim(), '3', asUser.stderr);
    const home = await siteGet(panel.webPort, newDomain);
    assert.equal(home.status, 200, `the restored site answers: ${home.body.slice(0, 300)}`);
    assert.equal(home.body, `<h1>${src.domain} from the backup</h1>`, 'the restored site serves the restore point\'s index');
    // it counts in the target account like any site and database
    const counts = (await target.client.get(`/v1/orgs/${target.id}`)).json.counts;
    assert.equal(counts.websites, 1, 'the restored site counts in the target account');
    assert.equal(counts.databases, 1, 'the restored database counts in the target account');
    // the password left the operation's row once it ended
    const op = await env.db('panel_node_ops').where({ id: site.json.operation_id }).first();
    assert.equal(op.kind, 'backup.restore', 'the site\'s operation is a restore');
    assert.equal(op.payload.databases, undefined, 'the database passwords left the operation\'s payload');
  });

  it('issue 32 item 9: restore into another account carries the operator PHP settings of the restore point', async () => {
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const domain = domainName('phpops');
    const s = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain, php_version: '8.2' });
    assert.equal(s.status, 201, JSON.stringify(s.json));
    await readUntil('site active', () => customer.client.get(`/v1/sites/${s.json.id}`), (r) => r.json.status === 'active');
    const set = await admin.patch(`/v1/sites/${s.json.id}/php`, { disabled_functions: 'exec,system' });
    assert.equal(set.status, 200, JSON.stringify(set.json));
    await readUntil('settings applied', () => customer.client.get(`/v1/sites/${s.json.id}`), (r) => r.json.status === 'active');
    fs.writeFileSync(path.join(panel.root, 'sites', domain, 'public_html', 'exec.php'), "<?php echo function_exists('exec') ? 'exec on' : 'exec off';");
    assert.equal((await siteGet(panel.webPort, domain, '/exec.php')).body, 'exec off', 'the source site runs without exec');
    const rp = await backupReady(customer.client, s.json.id);
    assert.equal(rp.json.status, 'ready', JSON.stringify(rp.json));
    // the source's settings change after the restore point: the restore takes the restore point's
    const later = await admin.patch(`/v1/sites/${s.json.id}/php`, { disabled_functions: '' });
    assert.equal(later.status, 200, JSON.stringify(later.json));

    const target = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const newDomain = domainName('phpcopy');
    const r = await admin.post(`/v1/restore-points/${rp.json.id}/restore`, { into_account: target.id, domain: newDomain });
    assert.equal(r.status, 202, JSON.stringify(r.json));
    assert.deepEqual(r.json.site.php.disabled_functions, ['exec', 'system'], 'the new site has the restore point\'s disabled functions');
    const site = await readUntil('restored site active', () => target.client.get(`/v1/sites/${r.json.site.id}`), (x) => x.json.status !== 'pending');
    assert.equal(site.json.status, 'active', JSON.stringify(site.json));
    const pool = fs.readFileSync(path.join(panel.root, 'etc/php/8.2/pool.d', `${newDomain}.conf`), 'utf8');
    assert.match(pool, /php_admin_value\[disable_functions\] = "exec,system"/, 'the restored pool disables them');
    assert.equal((await siteGet(panel.webPort, newDomain, '/exec.php')).body, 'exec off', 'exec stays off on the restored site');
  });

  it('deletes a restore point: its archive goes from the node and it is no longer listed', async () => {
    const src = await siteWithData();
    const rp = await backupReady(src.customer.client, src.site.id);
    const file = path.join(panel.root, 'backups', rp.json.file);
    assert.ok(fs.existsSync(file), `the archive is on disk: ${file}`);
    const d = await src.customer.client.del(`/v1/restore-points/${rp.json.id}`);
    assert.equal(d.status, 202, JSON.stringify(d.json));
    await readUntil('restore point gone', () => src.customer.client.get(`/v1/restore-points/${rp.json.id}`), (x) => x.status === 404);
    assert.ok(!fs.existsSync(file), `the deleted restore point's archive is removed: ${file}`);
    assert.deepEqual((await src.customer.client.get(`/v1/sites/${src.site.id}/restore-points`)).json.restore_points, [], 'the deleted restore point is no longer listed');
    const other = await createOrgWithLogin(reseller.client, { type: 'customer' });
    refused(await other.client.post(`/v1/sites/${src.site.id}/restore-points`), 404, 'not_found');
    refused(await other.client.get(`/v1/sites/${src.site.id}/restore-points`), 404, 'not_found');
  });

  it('a backup schedule (hourly, keep 2) is a Temporal schedule; each run takes a restore point and the oldest beyond 2 go', async () => {
    const src = await siteWithData();
    const c = src.customer.client;
    refused(await c.put(`/v1/sites/${src.site.id}/backup-schedule`, { every: 'weekly', keep: 2 }), 400, 'validation_failed');
    refused(await c.put(`/v1/sites/${src.site.id}/backup-schedule`, { every: 'hourly', keep: 0 }), 400, 'validation_failed');
    const set = await c.put(`/v1/sites/${src.site.id}/backup-schedule`, { every: 'hourly', keep: 2 });
    assert.equal(set.status, 200, JSON.stringify(set.json));
    assert.equal(set.json.every, 'hourly', 'the schedule runs hourly');
    assert.equal(set.json.next_runs.length > 0, true, 'the schedule says its next runs');
    assert.match(set.json.offsite_copies, /PLANNED/, 'the schedule says offsite copies are only planned');
    const connection = await Connection.connect({ address: env.temporalAddress });
    try {
      const schedule = new Client({ connection }).schedule.getHandle(backupScheduleId(src.site.id));
      const described = await schedule.describe();
      assert.equal(described.spec.intervals?.[0]?.every, 3_600_000, 'the Temporal schedule runs every hour');
      const scheduled = async () => env.db('panel_restore_points').where({ site_id: src.site.id, trigger: 'scheduled' }).orderBy('created_at');
      const created: string[] = [];
      for (let i = 1; i <= 3; i++) {
        // the schedule skips overlapping runs: the previous run (backup, then pruning) ends first
        const idle = Date.now() + 60_000;
        while ((await schedule.describe()).info.runningActions.length) {
          if (Date.now() > idle) throw new Error(`run ${i - 1} did not end`);
          await new Promise((res) => setTimeout(res, 100));
        }
        // a run's workflow id ends with its start time to the second: a second trigger within the
        // same second as the previous run would collide with it and be skipped
        await new Promise((res) => setTimeout(res, 1050 - (Date.now() % 1000)));
        await schedule.trigger();
        const deadline = Date.now() + 60_000;
        for (;;) {
          const rows = await scheduled();
          const fresh = rows.filter((r: { id: string; status: string }) => !created.includes(r.id) && r.status === 'ready');
          if (fresh.length && (i < 3 || rows.length === 2)) {
            created.push(fresh[0].id);
            break;
          }
          if (Date.now() > deadline) {
            // say what the schedule's runs did (a skip names its reason in the result)
            const runs = await Promise.all(
              (await schedule.describe()).info.recentActions.map(async (a) => {
                const wf = new Client({ connection }).workflow.getHandle(a.action.workflow.workflowId, a.action.workflow.firstExecutionRunId);
                const { status } = await wf.describe();
                return { id: a.action.workflow.workflowId, status: status.name, result: status.name === 'COMPLETED' ? await wf.result() : null };
              }),
            );
            throw new Error(`run ${i}: restore points ${JSON.stringify(rows.map((r: { id: string; status: string }) => [r.id, r.status]))}; runs ${JSON.stringify(runs)}`);
          }
          await new Promise((res) => setTimeout(res, 200));
        }
      }
      const listed = await c.get(`/v1/sites/${src.site.id}/restore-points`);
      assert.deepEqual(listed.json.restore_points.map((x: { id: string }) => x.id), [created[2], created[1]], 'kept: the newest two, newest first');
      assert.ok(!fs.existsSync(path.join(panel.root, 'backups/restore-points', src.site.id, `${created[0]}.tar.gz`)), 'the oldest archive is gone from the node');
      assert.equal((await c.del(`/v1/sites/${src.site.id}/backup-schedule`)).status, 204, 'the schedule is deleted');
      await assert.rejects(schedule.describe());
      refused(await c.get(`/v1/sites/${src.site.id}/backup-schedule`), 404, 'not_found');
    } finally {
      await connection.close();
    }
  });

  it('extract for inspection: a root-only folder (0700) without TLS private keys, removed by Remove now or by its durable timer', async () => {
    const src = await siteWithData();
    const siteDir = path.join(panel.root, 'sites', src.domain);
    fs.mkdirSync(path.join(siteDir, 'tls'), { recursive: true });
    fs.writeFileSync(path.join(siteDir, 'tls', 'site.key'), '-----BEGIN PRIVATE KEY-----\nsecret\n-----END PRIVATE KEY-----\n');
    fs.writeFileSync(path.join(src.docroot, 'server.key'), '-----BEGIN PRIVATE KEY-----\nsecret too\n');
    const rp = await backupReady(src.customer.client, src.site.id);
    refused(await src.customer.client.post(`/v1/restore-points/${rp.json.id}/inspection`), 403, 'forbidden');
    refused(await admin.post(`/v1/restore-points/${randomId()}/inspection`), 404, 'not_found');

    const inspect = async () => {
      const r = await admin.post(`/v1/restore-points/${rp.json.id}/inspection`);
      assert.equal(r.status, 202, JSON.stringify(r.json));
      return readUntil('inspection ready', () => admin.get(`/v1/inspections/${r.json.id}`), (x) => x.json.status !== 'extracting');
    };
    const first = await inspect();
    assert.equal(first.json.status, 'ready', JSON.stringify(first.json));
    const dir: string = first.json.path;
    assert.equal(fs.statSync(dir).mode & 0o777, 0o700, 'the inspection folder is 0700');
    assert.equal(fs.statSync(dir).uid, process.getuid!(), 'the inspection folder is owned by the panel process user');
    const files = tree(dir);
    assert.equal(files['site/public_html/index.html'], `<h1>${src.domain} from the backup</h1>`, 'the site\'s files are in the inspection');
    assert.match(files[`databases/${src.db}.sql`], /INSERT INTO `orders`/, 'the database dump is in the inspection');
    assert.ok(!Object.values(files).some((t) => t.includes('PRIVATE KEY')), `no TLS private key: ${Object.keys(files).join(', ')}`);
    assert.ok(!fs.existsSync(path.join(dir, 'site/tls/site.key')), 'the inspection holds no TLS private key file');
    // a restore point under inspection is not deleted
    refused(await src.customer.client.del(`/v1/restore-points/${rp.json.id}`), 409, 'conflict');
    // Remove now
    const del = await admin.del(`/v1/inspections/${first.json.id}`);
    assert.equal(del.status, 202, JSON.stringify(del.json));
    const removed = await readUntil('inspection removed', () => admin.get(`/v1/inspections/${first.json.id}`), (x) => x.json.status === 'removed', 4000);
    assert.ok(new Date(removed.json.removed_at).getTime() < new Date(removed.json.expires_at).getTime(), 'removed before its time');
    assert.ok(!fs.existsSync(dir), `the removed inspection's folder is gone: ${dir}`);

    // the durable timer
    const second = await inspect();
    assert.ok(fs.existsSync(second.json.path), `the inspection folder exists: ${second.json.path}`);
    const gone = await readUntil('inspection expired', () => admin.get(`/v1/inspections/${second.json.id}`), (x) => x.json.status === 'removed', INSPECTION_MS + 20_000);
    assert.ok(new Date(gone.json.removed_at).getTime() >= new Date(gone.json.expires_at).getTime() - 500, JSON.stringify(gone.json));
    assert.ok(!fs.existsSync(second.json.path), `the expired inspection's folder is gone: ${second.json.path}`);
    const connection = await Connection.connect({ address: env.temporalAddress });
    try {
      const result = await new Client({ connection }).workflow.getHandle(`inspection-${second.json.id}`).result();
      assert.deepEqual(result, { extracted: true, removedBy: 'timer' }, 'the inspection workflow extracted and its timer removed it');
    } finally {
      await connection.close();
    }
  });

  it('deleting a site archives it; restore brings it back serving, listed under no account and charging no quota; refused while a site holds its id or domain', async () => {
    const src = await siteWithData();
    const c = src.customer.client;
    const before = tree(src.docroot);
    refused(await admin.post(`/v1/sites/${src.site.id}/restore`), 404, 'not_found');
    assert.equal((await c.del(`/v1/sites/${src.site.id}`)).status, 202, 'the site is deleted');
    await readUntil('site gone', () => c.get(`/v1/sites/${src.site.id}`), (x) => x.status === 404);
    assert.equal((await siteGet(panel.webPort, src.domain)).status, 404, 'the deleted site is no longer served');

    refused(await c.get('/v1/site-archives'), 403, 'forbidden');
    const archives = await admin.get('/v1/site-archives');
    assert.equal(archives.status, 200, JSON.stringify(archives.json));
    const mine = archives.json.archives.filter((a: { site_id: string }) => a.site_id === src.site.id);
    assert.equal(mine.length, 1, 'one archive of the deleted site');
    assert.equal(mine[0].domain, src.domain, 'the archive names the site\'s domain');
    assert.match(mine[0].sha256, /^[0-9a-f]{64}$/, 'the archive has a SHA-256');
    assert.ok(mine[0].time && mine[0].file.startsWith('archives/'), `the archive has a time and lies under archives/: ${JSON.stringify(mine[0])}`);

    // a new site took the domain meanwhile: site exists
    const other = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const taker = await other.client.post(`/v1/orgs/${other.id}/sites`, { domain: src.domain });
    assert.equal(taker.status, 201, JSON.stringify(taker.json));
    await readUntil('taker active', () => other.client.get(`/v1/sites/${taker.json.id}`), (x) => x.json.status === 'active');
    const clash = await admin.post(`/v1/sites/${src.site.id}/restore`);
    refused(clash, 409, 'conflict');
    assert.match(clash.json.error.message, /^site exists/, 'the refusal says site exists');
    assert.equal(clash.json.error.details.reason, 'site_exists', 'the refusal\'s reason is site_exists');
    // a site the panel holds cannot be restored over either
    const held = await admin.post(`/v1/sites/${taker.json.id}/restore`);
    assert.equal(held.status, 404, 'no archive of a live site');
    assert.equal((await other.client.del(`/v1/sites/${taker.json.id}`)).status, 202, 'the site that took the domain is deleted');
    await readUntil('taker gone', () => other.client.get(`/v1/sites/${taker.json.id}`), (x) => x.status === 404);

    const countsBefore = (await c.get(`/v1/orgs/${src.customer.id}`)).json.counts;
    const r = await admin.post(`/v1/sites/${src.site.id}/restore`);
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.held_by_panel, false, 'the restored site is not held by the panel');
    const home = await siteGet(panel.webPort, src.domain);
    assert.equal(home.status, 200, `the restored site answers: ${home.body.slice(0, 300)}`);
    assert.equal(home.body, `<h1>${src.domain} from the backup</h1>`, 'the restored site serves the archived index');
    assert.deepEqual(tree(src.docroot), before, 'the restored files are those of the archive');
    // the panel holds no record of it: not listed, no quota
    refused(await c.get(`/v1/sites/${src.site.id}`), 404, 'not_found');
    assert.deepEqual((await c.get(`/v1/orgs/${src.customer.id}/sites`)).json.sites, [], 'the restored site is listed under no account');
    assert.deepEqual((await c.get(`/v1/orgs/${src.customer.id}`)).json.counts, countsBefore, 'the restore charges no quota');
    assert.equal(countsBefore.websites, 0, 'the deleted site no longer counted');
    // the node serves it, so restoring again is refused as site exists
    refused(await admin.post(`/v1/sites/${src.site.id}/restore`), 409, 'conflict');
  });

  it('a backup whose workflow start was lost is started by the resume pass and ends ready', async () => {
    const src = await siteWithData();
    // the API process died between its commit and the workflow's start
    const rp = await env.db.transaction(async (trx) => queueBackup(trx, await trx('panel_sites').where({ id: src.site.id }).forUpdate().first(), 'manual'));
    const connection = await Connection.connect({ address: env.temporalAddress });
    try {
      const deps = { db: env.db, temporal: new Client({ connection }), nodeOps: { taskQueue: panel.taskQueue, timeoutMs: AGENT_WAIT_MS, pollMs: 200 }, logger: env.logger };
      assert.ok((await resumePendingBackupOps(deps, 0)).includes(rp.op_id!), `the pending restore point ${rp.op_id} is resumed`);
      const done = await readUntil('resumed restore point', () => src.customer.client.get(`/v1/restore-points/${rp.id}`), (x) => x.json.status !== 'pending');
      assert.equal(done.json.status, 'ready', JSON.stringify(done.json));
      assert.ok(!(await resumePendingBackupOps(deps, 0)).includes(rp.op_id!), `the finished restore point ${rp.op_id} is no longer pending`);
    } finally {
      await connection.close();
    }
  });

  it('an agent node backs up its own sites and restores one into another account; killed while writing one, it leaves no restore point listed, only a .part file', async function () {
    this.timeout(180_000);
    const name = unique('bk-');
    const { token } = await addNode(env.db, null, name);
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'panel-agent-'));
    fs.chmodSync(root, 0o755);
    const tokenFile = path.join(root, 'token');
    fs.writeFileSync(tokenFile, `${token}\n`);
    const backupDir = path.join(root, 'backups');
    const webPort = await freePort();
    const args = [path.join(__dirname, '../../../bin/panel-host.cjs'), 'serve', '-node', name, '-root', path.join(root, 'node'), '-panel', panel.runtime.nodeApiUrl!, '-token-file', tokenFile, '-backup-dir', backupDir, '-web-listen', `127.0.0.1:${webPort}`];
    const startAgentProcess = () => {
      const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, LOG_LEVEL: 'warn' } });
      let stderr = '';
      child.stderr!.on('data', (d) => (stderr += d));
      const exited = new Promise<void>((r) => child.once('exit', () => r()));
      return { child, exited, stderr: () => stderr };
    };
    let agent = startAgentProcess();
    try {
      const deadline = Date.now() + 30_000;
      while (!(await env.db('panel_nodes').where({ name }).first()).last_pull_at) {
        if (Date.now() > deadline || agent.child.exitCode !== null) throw new Error(`the agent did not pull: ${agent.stderr()}`);
        await new Promise((res) => setTimeout(res, 100));
      }
      await env.db('panel_nodes').where({ name }).update({ state: 'alive', roles: ['web'] });
      const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
      const domain = domainName('agent');
      const s = await admin.post(`/v1/orgs/${customer.id}/sites`, { domain, node: name });
      assert.equal(s.status, 201, JSON.stringify(s.json));
      await readUntil('agent site active', () => customer.client.get(`/v1/sites/${s.json.id}`), (r) => r.json.status === 'active');

      // backed up on its node (spec 4.4.6); inspection is not offered there
      const ok = await backupReady(customer.client, s.json.id);
      assert.equal(ok.json.status, 'ready', JSON.stringify(ok.json));
      assert.equal(ok.json.node, name, 'the restore point lies on the agent\'s node');
      assert.ok(fs.existsSync(path.join(backupDir, ok.json.file)), 'the archive is on the agent node');
      refused(await admin.post(`/v1/restore-points/${ok.json.id}/inspection`), 409, 'conflict');
      assert.ok(!(await admin.get('/v1/site-archives')).json.archives.some((a: { site_id: string }) => a.site_id === s.json.id), `the live site ${s.json.id} is not among the site archives`);
      // restored into another account by that node's agent, on that node
      fs.writeFileSync(path.join(root, 'node/sites', domain, 'public_html/index.html'), 'changed after the restore point');
      const target = await createOrgWithLogin(reseller.client, { type: 'customer' });
      const copyDomain = domainName('agent-copy');
      const restored = await admin.post(`/v1/restore-points/${ok.json.id}/restore`, { into_account: target.id, domain: copyDomain });
      assert.equal(restored.status, 202, JSON.stringify(restored.json));
      assert.equal(restored.json.site.node, name, 'the copy is placed on the same node');
      const copy = await readUntil('agent restore', () => target.client.get(`/v1/sites/${restored.json.site.id}`), (x) => x.json.status !== 'pending');
      assert.equal(copy.json.status, 'active', JSON.stringify(copy.json));
      const served = await siteGet(webPort, copyDomain);
      assert.equal(served.status, 200, `the copy answers: ${served.body.slice(0, 300)}`);
      assert.ok(served.body.includes(domain) && !served.body.includes('changed after'), 'the copy serves the files of the restore point');

      // a site big enough for the archive to take a while
      const docroot = path.join(root, 'node/sites', domain, 'public_html');
      for (let i = 0; i < 12; i++) fs.writeFileSync(path.join(docroot, `blob-${i}.bin`), crypto.randomBytes(16 << 20));
      const r = await customer.client.post(`/v1/sites/${s.json.id}/restore-points`);
      assert.equal(r.status, 202, JSON.stringify(r.json));
      const dir = path.join(backupDir, 'restore-points', s.json.id);
      const part = path.join(dir, `${r.json.id}.tar.gz.part`);
      const seen = Date.now() + 30_000;
      while (!fs.existsSync(part) || fs.statSync(part).size === 0) {
        if (Date.now() > seen) throw new Error(`no partial archive appeared: ${fs.readdirSync(dir).join(', ')}`);
        await new Promise((res) => setTimeout(res, 20));
      }
      agent.child.kill('SIGKILL');
      await agent.exited;

      const failed = await readUntil('restore point ended', () => customer.client.get(`/v1/restore-points/${r.json.id}`), (x) => x.json.status !== 'pending', AGENT_WAIT_MS + 30_000);
      assert.equal(failed.json.status, 'failed', 'the killed backup fails');
      assert.match(failed.json.error, /did not report the operation/, 'the failure says the node did not report');
      const listed = await customer.client.get(`/v1/sites/${s.json.id}/restore-points`);
      assert.deepEqual(listed.json.restore_points.map((x: { id: string }) => x.id), [ok.json.id], 'only the first restore point is listed');
      assert.ok(fs.existsSync(part), 'the partial archive is left under its temp name');
      assert.ok(!fs.existsSync(path.join(dir, `${r.json.id}.tar.gz`)) && !fs.existsSync(path.join(dir, `${r.json.id}.tar.gz.sha256`)), `the failed archive ${r.json.id} left no final file nor checksum`);
      assert.deepEqual(listArchives(path.join(backupDir, 'restore-points')).map((a) => a.id), [ok.json.id], 'only the first archive is on the node');
      // restarted, the node stops the orphaned web services of the killed process and runs on; it lists nothing new
      agent = startAgentProcess();
      const again = Date.now() + 30_000;
      const before = (await env.db('panel_nodes').where({ name }).first()).last_pull_at;
      while ((await env.db('panel_nodes').where({ name }).first()).last_pull_at?.getTime() === before?.getTime()) {
        if (Date.now() > again || agent.child.exitCode !== null) throw new Error(`the agent did not come back: ${agent.stderr()}`);
        await new Promise((res) => setTimeout(res, 100));
      }
      assert.deepEqual(listArchives(path.join(backupDir, 'restore-points')).map((a) => a.id), [ok.json.id], 'the restarted node lists no new archive');
    } finally {
      if (agent.child.exitCode === null && agent.child.signalCode === null) {
        agent.child.kill('SIGTERM');
        await agent.exited;
      }
      await env.db('panel_nodes').where({ name }).update({ draining: true });
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  it('a tampered archive is refused before anything is extracted, and a failed backup shows in the metrics', async () => {
    // a restore point changed on disk: the restore into an account fails on the SHA-256, nothing is extracted
    const src = await siteWithData();
    const rp = await backupReady(src.customer.client, src.site.id);
    const file = path.join(panel.root, 'backups', rp.json.file);
    fs.appendFileSync(file, 'tampered');
    const target = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const newDomain = domainName('tampered');
    const r = await admin.post(`/v1/restore-points/${rp.json.id}/restore`, { into_account: target.id, domain: newDomain });
    assert.equal(r.status, 202, JSON.stringify(r.json));
    const site = await readUntil('restore ended', () => target.client.get(`/v1/sites/${r.json.site.id}`), (x) => x.json.status !== 'pending');
    assert.equal(site.json.status, 'failed', 'the restore of a tampered archive fails');
    assert.match(site.json.error, /does not match its SHA-256/, 'the failure names the SHA-256 mismatch');
    assert.ok(!fs.existsSync(path.join(panel.root, 'sites', newDomain, 'public_html', 'big.bin')), 'nothing of the archive was extracted');
    assert.equal((await target.client.get(`/v1/databases/${r.json.databases[0].id}`)).json.status, 'failed', 'the database restore fails too');
    assert.equal(await sql(panel, `SHOW DATABASES LIKE '${r.json.databases[0].name}'`), '', 'no database was created');

    // a deleted site's archive changed on disk: 422 unsafe_archive, the site does not come back
    const gone = await siteWithData();
    assert.equal((await gone.customer.client.del(`/v1/sites/${gone.site.id}`)).status, 202, 'the site is deleted');
    await readUntil('site gone', () => gone.customer.client.get(`/v1/sites/${gone.site.id}`), (x) => x.status === 404);
    const archive = (await admin.get('/v1/site-archives')).json.archives.find((a: { site_id: string }) => a.site_id === gone.site.id);
    fs.appendFileSync(path.join(panel.root, 'backups', archive.file), 'tampered');
    refused(await admin.post(`/v1/sites/${gone.site.id}/restore`), 422, 'unsafe_archive');
    assert.equal((await siteGet(panel.webPort, gone.domain)).status, 404, 'the refused site is not served');
    assert.ok(!fs.existsSync(gone.docroot), `a refused restore writes no docroot: ${gone.docroot}`);

    // a backup that fails on the node (its database vanished behind the panel's back)
    const broken = await siteWithData();
    await sql(panel, `DROP DATABASE ${broken.db}`);
    const failed = await backupReady(broken.customer.client, broken.site.id);
    assert.equal(failed.json.status, 'failed', 'the backup fails on the node');
    assert.match(failed.json.error, /mariadb-dump/, 'the failure names mariadb-dump');
    assert.deepEqual((await broken.customer.client.get(`/v1/sites/${broken.site.id}/restore-points`)).json.restore_points, [], 'a failed backup is not listed');
    assert.ok(!fs.readdirSync(path.join(panel.root, 'backups/restore-points', broken.site.id)).length, 'no archive, no partial file');
    const m = await admin.get('/v1/backups/metrics');
    const entry = m.json.sites.find((x: { site_id: string }) => x.site_id === broken.site.id);
    assert.equal(entry.last_success, null, 'no success recorded for the broken site');
    assert.ok(entry.last_failure, `the failure is recorded: ${JSON.stringify(entry)}`);
    assert.match(entry.last_error, /mariadb-dump/, 'the metrics name mariadb-dump as the last error');
    assert.ok(m.json.restores.failed >= 2, `failed restores counted: ${m.json.restores.failed}`);
  });

  it('cleanup removes partial archives, orphaned temp files and expired inspection folders and says what it removed; metrics report the recovery state', async () => {
    const dir = path.join(panel.root, 'backups');
    const siteId = randomId();
    fs.mkdirSync(path.join(dir, 'restore-points', siteId), { recursive: true });
    fs.writeFileSync(path.join(dir, 'restore-points', siteId, `${randomId()}.tar.gz.part`), Buffer.alloc(1000));
    fs.writeFileSync(path.join(dir, 'restore-points', siteId, `${randomId()}.tar.gz.sha256`), 'abc');
    fs.mkdirSync(path.join(dir, '.staging', 'left-behind'), { recursive: true });
    const stale = randomId();
    fs.mkdirSync(path.join(dir, 'inspect', stale), { recursive: true });
    refused(await reseller.client.post('/v1/backups/cleanup'), 403, 'forbidden');
    const r = await admin.post('/v1/backups/cleanup');
    assert.equal(r.status, 200, JSON.stringify(r.json));
    const kinds = r.json.removed.map((x: { kind: string }) => x.kind).sort();
    assert.deepEqual(kinds, ['expired inspection folder', 'orphaned sidecar', 'orphaned temp folder', 'partial archive'], 'cleanup says what it removed, by kind');
    assert.equal(r.json.bytes_freed, 1003, 'bytes freed: 1000-byte part plus 3-byte sidecar');
    assert.ok(!fs.existsSync(path.join(dir, 'inspect', stale)), `the stale inspection folder is removed: ${stale}`);
    assert.deepEqual((await admin.post('/v1/backups/cleanup')).json.removed, [], 'a second cleanup finds nothing');
    // ready restore points survive it
    const ready = await env.db('panel_restore_points').where({ status: 'ready', node_name: 'hosting' });
    for (const rp of ready) assert.ok(fs.existsSync(path.join(dir, rp.file)), rp.file);

    refused(await reseller.client.get('/v1/backups/metrics'), 403, 'forbidden');
    const m = await admin.get('/v1/backups/metrics');
    assert.equal(m.status, 200, JSON.stringify(m.json));
    assert.ok(m.json.restore_points.by_status.ready.count >= 3, `ready restore points: ${JSON.stringify(m.json.restore_points.by_status)}`);
    assert.ok(m.json.restore_points.by_status.ready.bytes > 0, `ready restore point bytes: ${m.json.restore_points.by_status.ready.bytes}`);
    assert.ok(m.json.restore_points.newest_age_seconds >= 0 && m.json.restore_points.newest_age_seconds < 600, `newest restore point age in seconds: ${m.json.restore_points.newest_age_seconds}`);
    assert.ok(m.json.sites.length >= 3, `sites in the metrics: ${m.json.sites.length}`);
    assert.ok(m.json.site_archives.count >= 1, `site archives counted: ${m.json.site_archives.count}`);
    assert.ok(m.json.restores.count >= 2, `restores counted: ${m.json.restores.count}`);
    assert.ok(m.json.restores.duration_ms.max > 0, `slowest restore in ms: ${m.json.restores.duration_ms.max}`);
  });
});

describe('panel: a hosting node without -backup-dir refuses backups', function () {
  this.timeout(120_000);
  let panel: HostingPanel;
  let admin: PanelClient;

  before(async function () {
    this.timeout(90_000);
    panel = await startHostingPanel({});
    admin = await platformAdmin(panel.url);
  });
  after(async () => {
    await panel?.close();
  });

  it('refuses restore points and schedules of its sites with a clear error, and the node itself refuses the operation', async () => {
    assert.equal(panel.runtime.hostingNode?.facts().backups, false, 'the hosting node runs without -backup-dir');
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const s = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: domainName('nobackup') });
    assert.equal(s.status, 201, JSON.stringify(s.json));
    await readUntil('site active', () => customer.client.get(`/v1/sites/${s.json.id}`), (r) => r.json.status === 'active');
    const r = await customer.client.post(`/v1/sites/${s.json.id}/restore-points`);
    refused(r, 409, 'conflict');
    assert.match(r.json.error.message, /keeps no backups \(it runs without -backup-dir\)/, 'the refusal says the node keeps no backups');
    refused(await customer.client.put(`/v1/sites/${s.json.id}/backup-schedule`, { every: 'daily', keep: 7 }), 409, 'conflict');
    assert.equal(await env.db('panel_restore_points').where({ site_id: s.json.id }).first(), undefined, 'nothing recorded');
    refused(await admin.get('/v1/site-archives'), 409, 'conflict');
    refused(await admin.post('/v1/backups/cleanup'), 409, 'conflict');
    // the node refuses too, whatever the panel sends
    const op = await panel.runtime.hostingNode!.apply({ id: crypto.randomUUID(), kind: 'backup.create', backupId: crypto.randomUUID(), siteId: s.json.id, databases: [] });
    assert.deepEqual(op, { ok: false, refused: true, error: NO_BACKUP_DIR }, 'the node refuses the backup operation itself');
    // deleting a site still works (nothing to archive it into)
    assert.equal((await customer.client.del(`/v1/sites/${s.json.id}`)).status, 202, 'a site is still deleted without backups');
    await readUntil('site gone', () => customer.client.get(`/v1/sites/${s.json.id}`), (x) => x.status === 404);
  });
});

describe('hosting node: archive extraction refuses unsafe archives', function () {
  let dir: string;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'unsafe-'));
    fs.mkdirSync(path.join(dir, 'site'));
    fs.writeFileSync(path.join(dir, 'site/a'), 'hi');
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  /** A tar.gz made by GNU tar from `args` in `dir`, with its SHA-256 beside it as the node records it. */
  async function archive(name: string, args: string[]): Promise<string> {
    const file = path.join(dir, `${name}.tar.gz`);
    const r = await run('tar', ['-C', dir, '-czf', file, ...args]);
    assert.equal(r.code, 0, r.stderr);
    fs.writeFileSync(`${file}.sha256`, `${await fileSha256(file)}  ${name}.tar.gz\n`);
    return file;
  }

  for (const [name, make, why] of [
    ['dotdot', () => archive('dotdot', ['--transform', 's,^site/a$,../../escape,', 'site/a']), /leaves the target folder/],
    ['absolute', () => archive('absolute', ['-P', '--transform', 's,^site/a$,/tmp/escape-abs,', 'site/a']), /leaves the target folder/],
    ['symlink', async () => (fs.symlinkSync('/etc/passwd', path.join(dir, 'site/link')), archive('symlink', ['site/link'])), /SymbolicLink entries are not extracted/],
    ['hardlink', async () => (fs.linkSync(path.join(dir, 'site/a'), path.join(dir, 'site/hard')), archive('hardlink', ['site/a', 'site/hard'])), /Link entries are not extracted/],
    ['device', async () => (await run('mknod', [path.join(dir, 'site/null'), 'c', '1', '3']), archive('device', ['site/null'])), /CharacterDevice entries are not extracted/],
  ] as Array<[string, () => Promise<string>, RegExp]>) {
    it(`refuses ${name} entries and leaves nothing extracted`, async () => {
      const file = await make();
      const target = path.join(dir, `out-${name}`);
      await assert.rejects(extractArchive(file, target), (err: Error) => err instanceof UnsafeArchive && why.test(err.message));
      assert.ok(!fs.existsSync(target), `${name}: the refused archive leaves no target folder`);
      assert.ok(!fs.existsSync(path.join(dir, '..', 'escape')) && !fs.existsSync('/tmp/escape-abs'), `${name}: nothing was written outside the target`);
    });
  }

  it('verifies the SHA-256 before extracting anything', async () => {
    const file = await archive('good', ['site/a']);
    const target = path.join(dir, 'out-sha');
    await assert.rejects(extractArchive(file, target, { expected: '0'.repeat(64) }), (err: Error) => err instanceof UnsafeArchive && /does not match its SHA-256/.test(err.message));
    assert.ok(!fs.existsSync(target), 'an archive with the wrong checksum leaves no target folder');
    fs.appendFileSync(file, 'tampered');
    await assert.rejects(extractArchive(file, target), /does not match its SHA-256/);
  });
});
