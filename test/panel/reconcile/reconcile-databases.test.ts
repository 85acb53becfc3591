import assert from 'node:assert/strict';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { run } from '../../../hosting-node/processes';
import { evaluateAlerts } from '../../../services/panel/alerts/evaluate';
import { RECONCILE_DEFAULTS } from '../../../services/panel/reconcile/client';
import { runPassNow } from '../../../services/panel/reconcile/run';
import type { Actor } from '../../../services/panel/shared/actor';
import { asDbUser, createOrgWithLogin, platformAdmin, startHostingPanel, unique, type HostingPanel, type PanelClient } from '../../helpers/panel';
import { runPass, waitPass } from '../../helpers/reconcile';
import { env } from '../../setup/env';

// A customer database dropped by hand on the hosting node's real MariaDB (issue 32 item 3, the
// database half): a dry-run pass says `missing` and the reconcile_missing alert opens; a pass in
// remediation mode recreates it empty with its user and grants, and the user connects again with
// the password it had (the node remembers its hash), also when the user was dropped too.

describe('panel: reconciliation sees a dropped database', function () {
  this.timeout(180_000);
  let host: HostingPanel;
  let admin: PanelClient;
  let connection: Connection;
  let temporal: Client;
  const db = { id: '', name: '', password: '' };

  before(async function () {
    this.timeout(120_000);
    host = await startHostingPanel({ mariadb: true, flags: ['-reconcile', 'dry-run', '-metrics-interval', '1h'], reconcile: { batchSize: 5, heartbeatTimeoutMs: 10_000 } });
    connection = await Connection.connect({ address: env.temporalAddress });
    temporal = new Client({ connection });
    admin = await platformAdmin(host.url);
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const name = unique('rdb').replace(/[^a-z0-9]/g, '_').slice(0, 30);
    const r = await customer.client.post(`/v1/orgs/${customer.id}/databases`, { name });
    assert.equal(r.status, 201, JSON.stringify(r.json));
    Object.assign(db, { id: r.json.id, name, password: r.json.password });
    const deadline = Date.now() + 30_000;
    while ((await customer.client.get(`/v1/databases/${db.id}`)).json.status !== 'active') {
      assert.ok(Date.now() < deadline, 'the database becomes active within 30 s');
      await new Promise((res) => setTimeout(res, 100));
    }
  });
  after(async function () {
    this.timeout(30_000);
    await connection?.close();
    await host?.close();
  });

  /** as the node's administrator, over the socket */
  const asAdmin = async (sql: string) => {
    const r = await run('mariadb', ['--no-defaults', `--socket=${path.join(host.root, 'run/my.sock')}`, '--batch', '--skip-column-names', '-e', sql], { timeoutMs: 20_000 });
    assert.equal(r.code, 0, `admin SQL ${sql}: ${r.stderr}`);
    return r.stdout;
  };
  const view = async () => {
    const r = await admin.get('/v1/reconcile/databases');
    assert.equal(r.status, 200, JSON.stringify(r.json));
    const row = r.json.databases.find((d: { database_id: string }) => d.database_id === db.id);
    assert.ok(row, `the database is listed: ${JSON.stringify(r.json)}`);
    return row;
  };
  const alertsOf = async () => {
    const r = await admin.get('/v1/alerts?state=unresolved');
    assert.equal(r.status, 200, JSON.stringify(r.json));
    return (r.json.alerts as Array<{ rule: string; summary: string }>).filter((a) => a.rule === 'reconcile_missing' && a.summary.includes(db.name));
  };
  /** a pass in remediation mode (-reconcile on), as the schedule of such a panel starts it */
  const remediatingPass = async () => {
    const actor = { orgType: 'platform', role: 'platform_admin' } as Actor;
    const started = await runPassNow({ db: env.db, temporal, settings: { ...RECONCILE_DEFAULTS, batchSize: 5, heartbeatTimeoutMs: 10_000, taskQueue: host.taskQueue, mode: 'on' } }, actor);
    assert.ok(started.started, `a pass started: ${JSON.stringify(started)}`);
    return waitPass(admin, started.pass.id);
  };

  it('DROP DATABASE by hand is `missing` with an alert; remediation recreates it empty and its user connects with its password', async () => {
    const put = await asDbUser(host, db.name, db.password, `CREATE TABLE ${db.name}.t (x INT); INSERT INTO ${db.name}.t VALUES (1);`);
    assert.equal(put.code, 0, put.stderr);
    const first = await runPass(admin);
    assert.equal(first.counts.database_in_sync, 1, `the database is in sync at first: ${JSON.stringify(first.counts)}`);

    await asAdmin(`DROP DATABASE \`${db.name}\`;`);
    const found = await runPass(admin);
    assert.equal(found.counts.database_missing, 1, `the pass counts the database missing: ${JSON.stringify(found.counts)}`);
    assert.deepEqual(found.databases_not_in_sync.map((d: { name: string; status: string }) => [d.name, d.status]), [[db.name, 'missing']], 'the pass report lists it');
    const v = await view();
    assert.equal(v.status, 'missing', JSON.stringify(v));
    assert.deepEqual(v.findings, [{ problem: 'database_missing', database: db.name }], 'the finding names the database (its user is still there)');
    assert.equal((await asAdmin(`SHOW DATABASES LIKE '${db.name}';`)).trim(), '', 'a dry-run pass recreates nothing');

    await evaluateAlerts(env.db);
    const open = await alertsOf();
    assert.equal(open.length, 1, `one reconcile_missing alert for the database: ${JSON.stringify(open)}`);

    const fixed = await remediatingPass();
    assert.equal(fixed.counts.databases_recreated, 1, `the pass recreated it: ${JSON.stringify(fixed.counts)}`);
    const after = await view();
    assert.equal(after.status, 'in_sync', JSON.stringify(after));
    assert.match(after.remediation?.detail?.data ?? '', /recreated empty/, `the view says the data comes back only from a restore point: ${JSON.stringify(after)}`);
    const tables = await asDbUser(host, db.name, db.password, `SHOW TABLES FROM ${db.name}; CREATE TABLE ${db.name}.u (y INT);`);
    assert.equal(tables.code, 0, `the user connects with its password and may create tables again: ${tables.stderr}`);
    assert.equal(tables.stdout.trim(), '', 'the database came back empty');

    await evaluateAlerts(env.db);
    assert.deepEqual(await alertsOf(), [], 'the alert resolved once the database is back');
  });

  it('a dropped user too comes back with the password it had, and its grants', async () => {
    await asAdmin(`DROP DATABASE \`${db.name}\`; DROP USER '${db.name}'@'localhost'; DROP USER '${db.name}'@'%';`);
    const found = await runPass(admin);
    assert.equal(found.counts.database_missing, 1, JSON.stringify(found.counts));
    assert.deepEqual((await view()).findings, [{ problem: 'database_missing', database: db.name }, { problem: 'database_user_missing', user: db.name }], 'both are named');
    const fixed = await remediatingPass();
    assert.equal(fixed.counts.databases_recreated, 1, JSON.stringify(fixed.counts));
    const after = await view();
    assert.equal(after.remediation?.detail?.user_recreated, true, JSON.stringify(after));
    assert.equal(after.remediation?.detail?.password_kept, true, JSON.stringify(after));
    const tcp = await asDbUser(host, db.name, db.password, `CREATE TABLE ${db.name}.v (z INT); SELECT count(*) FROM ${db.name}.v;`);
    assert.equal(tcp.code, 0, `the recreated user connects over TCP with its old password and has its grants: ${tcp.stderr}`);
    assert.notEqual((await asDbUser(host, db.name, db.password, 'CREATE DATABASE other_one')).code, 0, 'and no more than its grants');
  });
});
