import assert from 'node:assert/strict';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { temporal as proto } from '@temporalio/proto';
import { run } from '../../../hosting-node/processes';
import { addNode } from '../../../services/panel/nodes/nodes';
import { queueOperation, recordResult } from '../../../services/panel/nodes/queue';
import { databaseOpWorkflowId } from '../../../domain/panel/workflows';
import { resumePendingDatabaseOps } from '../../../services/panel/databases/databases';
import { asDbUser as asUser, createOrgWithLogin, platformAdmin, startHostingPanel, tablesContaining, unique, type HostingPanel, type PanelClient, type Reply } from '../../helpers/panel';
import { env } from '../../setup/env';

// Customer databases (spec 2 sections 2.2, 2.3, 2.6) over real HTTP: a real panel whose hosting
// node runs MariaDB on a free port, a real Temporal worker (database-op workflows). A created
// database accepts connections with the password the 201 answer showed once, and that password is
// nowhere afterwards: no table, no workflow history.

function refused(r: Reply, status: number, code: string) {
  assert.equal(r.status, status, JSON.stringify(r.json));
  assert.equal(r.json.error.code, code, JSON.stringify(r.json));
}

/** Waits until the database leaves `pending` (or reaches one of `statuses`). */
async function settled(c: PanelClient, id: string, statuses = ['active', 'failed'], timeoutMs = 30_000): Promise<Reply> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await c.get(`/v1/databases/${id}`);
    if (r.status !== 200) throw new Error(`database ${id}: ${r.status} ${JSON.stringify(r.json)}`);
    if (statuses.includes(r.json.status)) return r;
    if (Date.now() > deadline) throw new Error(`database ${id} still ${r.json.status} after ${timeoutMs} ms`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

async function gone(c: PanelClient, id: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await c.get(`/v1/databases/${id}`);
    if (r.status === 404) return;
    if (Date.now() > deadline) throw new Error(`database ${id} still there (${r.json.status}) after ${timeoutMs} ms`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

const dbName = (label = 'db') => unique(`${label}_`).replace(/-/g, '_');


describe('panel: customer databases on the hosting node (MariaDB)', function () {
  this.timeout(120_000);
  let panel: HostingPanel;
  let admin: PanelClient;
  let provider: Awaited<ReturnType<typeof createOrgWithLogin>>;
  let reseller: Awaited<ReturnType<typeof createOrgWithLogin>>;
  let temporal: Connection;

  before(async function () {
    this.timeout(90_000);
    panel = await startHostingPanel({ mariadb: true });
    assert.equal(panel.runtime.hostingNode?.facts().mariadb, true, 'MariaDB runs on the hosting node');
    assert.equal(panel.runtime.hostingNode?.mariadbPort, panel.dbPort, "the node's MariaDB listens on the panel's database port");
    admin = await platformAdmin(panel.url);
    provider = await createOrgWithLogin(admin, { type: 'provider' });
    reseller = await createOrgWithLogin(provider.client, { type: 'reseller' });
    temporal = await Connection.connect({ address: env.temporalAddress });
  });
  after(async () => {
    await temporal?.close();
    await panel?.close();
  });

  it('creates a database: 201 pending with its password once, then active; the password connects over TCP and the socket, to that database only', async () => {
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const name = dbName('shop');
    const r = await customer.client.post(`/v1/orgs/${customer.id}/databases`, { name: name.toUpperCase() });
    assert.equal(r.status, 201, JSON.stringify(r.json));
    assert.equal(r.headers.get('cache-control'), 'no-store', 'the create answer, which shows the password, is not cached');
    assert.equal(r.json.status, 'pending', 'a new database starts pending');
    assert.equal(r.json.name, name, 'the name is stored in lower case');
    assert.equal(r.json.user, name, 'the database user is named after the database by default');
    assert.equal(r.json.node, 'hosting', 'the database is placed on the hosting node');
    assert.equal(typeof r.json.password, 'string', 'the create answer shows the password');
    assert.ok(r.json.password.length >= 32, `the generated password is at least 32 characters: ${r.json.password.length}`);
    const password: string = r.json.password;

    const s = await settled(customer.client, r.json.id);
    assert.equal(s.json.status, 'active', JSON.stringify(s.json));
    assert.equal(s.json.error, null, 'an active database has no error');
    assert.equal(s.json.password, undefined, 'the password is shown once, at creation');

    const tcp = await asUser(panel, name, password, `CREATE TABLE ${name}.t (x INT); INSERT INTO ${name}.t VALUES (42); SELECT x FROM ${name}.t; SHOW DATABASES;`);
    assert.equal(tcp.code, 0, tcp.stderr);
    assert.deepEqual(tcp.stdout.trim().split('\n'), ['42', 'information_schema', name], 'the user created a table in its database and sees only that database');
    const sock = await asUser(panel, name, password, `SELECT count(*) FROM ${name}.t`, 'socket');
    assert.equal(sock.code, 0, sock.stderr);
    assert.equal(sock.stdout.trim(), '1', 'the socket connection sees the row written over TCP');
    assert.notEqual((await asUser(panel, name, 'not the password', 'SELECT 1')).code, 0, 'a wrong password is refused');
    assert.notEqual((await asUser(panel, name, password, 'CREATE DATABASE other_one')).code, 0, 'the user cannot create another database');

    // the password is in no table and in no workflow history
    const op = await env.db('panel_node_ops').where({ id: r.json.operation_id }).first();
    assert.equal(op.status, 'done', 'the create operation is done');
    assert.equal(op.kind, 'database.create', 'the operation is a database.create');
    assert.equal(op.payload.password, undefined, 'the done operation no longer carries the password');
    assert.equal(op.payload.user, name, 'the operation names the user');
    assert.deepEqual(await tablesContaining(password), [], 'no table holds the password');
    const history = await new Client({ connection: temporal }).workflow.getHandle(databaseOpWorkflowId(r.json.operation_id)).fetchHistory();
    assert.ok((history.events ?? []).length > 0, `the database operation's workflow has a history: ${databaseOpWorkflowId(r.json.operation_id)}`);
    const bytes = Buffer.from(proto.api.history.v1.History.encode(history).finish());
    assert.ok(bytes.includes(Buffer.from(r.json.id)), 'the history names the database');
    assert.ok(!bytes.includes(Buffer.from(password)), 'the password is not in the workflow history');

    // listings, counts and the audit log
    const own = await customer.client.get(`/v1/orgs/${customer.id}/databases`);
    assert.deepEqual(own.json.databases.map((d: { id: string }) => d.id), [r.json.id], "the customer's listing holds its one database");
    assert.equal(own.json.databases[0].password, undefined, 'the listing shows no password');
    const below = await provider.client.get(`/v1/orgs/${provider.id}/databases`);
    assert.ok(below.json.databases.some((d: { id: string }) => d.id === r.json.id), `the provider sees its customer's database ${r.json.id}`);
    assert.equal((await customer.client.get(`/v1/orgs/${customer.id}`)).json.counts.databases, 1, "the customer's count shows one database");
    assert.equal((await reseller.client.get(`/v1/orgs/${reseller.id}`)).json.counts.databases, 1, "the reseller's count includes its customer's database");
    const log = await reseller.client.get(`/v1/orgs/${customer.id}/audit`);
    const entry = log.json.entries.find((e: { action: string }) => e.action === 'database.create');
    assert.equal(entry.target_id, r.json.id, 'the audit entry names the database');
    assert.equal(entry.actor_username, customer.username, "the audit entry names the customer's login as the actor");

    // outside the caller's subtree: 404
    const other = await createOrgWithLogin(reseller.client, { type: 'customer' });
    refused(await other.client.get(`/v1/databases/${r.json.id}`), 404, 'not_found');
    refused(await other.client.del(`/v1/databases/${r.json.id}`), 404, 'not_found');
    refused(await other.client.post(`/v1/orgs/${customer.id}/databases`, { name: dbName() }), 404, 'not_found');
    refused(await other.client.get(`/v1/orgs/${customer.id}/databases`), 404, 'not_found');
    refused(await other.client.get('/v1/databases/not-a-uuid'), 404, 'not_found');
  });

  it('validates names and users, refuses non-customers, clashes on the node and a named node without site.place', async () => {
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const post = (body: unknown, by: PanelClient = customer.client) => by.post(`/v1/orgs/${customer.id}/databases`, body);
    for (const body of [{ name: 'bad-name' }, { name: 'a b' }, { name: '' }, { name: 'x'.repeat(65) }, { name: 'mysql' }, { name: 'Information_Schema' }, { name: 'ok_name', user: 'root' }, { name: 'ok_name', user: 'bad user' }, { name: 'n'.repeat(40) }, { name: 'ok', extra: 1 }]) {
      const r = await post(body);
      refused(r, 400, 'validation_failed');
    }
    const long = await post({ name: dbName('n'.repeat(30)), user: dbName('u') });
    assert.equal(long.status, 201, JSON.stringify(long.json));
    refused(await reseller.client.post(`/v1/orgs/${reseller.id}/databases`, { name: dbName() }), 409, 'conflict');

    const name = dbName('clash');
    const first = await post({ name });
    assert.equal(first.status, 201, `a database with a new name is created: ${JSON.stringify(first.json)}`);
    const again = await post({ name });
    refused(again, 409, 'conflict');
    assert.equal(again.json.error.details.field, 'name', 'the clash is on the name');
    const sameUser = await post({ name: dbName(), user: name });
    refused(sameUser, 409, 'conflict');
    assert.equal(sameUser.json.error.details.field, 'user', 'the clash is on the user');

    // naming a node is placement: the platform's site.place
    const named = await post({ name: dbName(), node: 'hosting' });
    refused(named, 403, 'power_missing');
    refused(await post({ name: dbName(), node: 'hosting' }, provider.client), 403, 'power_missing');
    const byAdmin = await post({ name: dbName(), node: 'hosting' }, admin);
    assert.equal(byAdmin.status, 201, JSON.stringify(byAdmin.json));
    refused(await post({ name: dbName(), node: 'no-such-node' }, admin), 400, 'validation_failed');
    const webOnly = unique('n-');
    await addNode(env.db, null, webOnly);
    await env.db('panel_nodes').where({ name: webOnly }).update({ state: 'alive', roles: ['web'] });
    try {
      const r = await post({ name: dbName(), node: webOnly }, admin);
      refused(r, 409, 'conflict');
      assert.match(r.json.error.message, /db role/, 'the error says the node has no db role');
    } finally {
      await env.db('panel_nodes').where({ name: webOnly }).update({ draining: true });
    }
    await Promise.all([long, first, byAdmin].map((r) => settled(customer.client, r.json.id)));
  });

  it('counted limits (databases) hold under 10 parallel creates, at every level', async () => {
    const r1 = await createOrgWithLogin(provider.client, { type: 'reseller', limits: { databases: 3 } });
    const c1 = await createOrgWithLogin(r1.client, { type: 'customer' });
    const c2 = await createOrgWithLogin(r1.client, { type: 'customer' });
    const creates = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? c1 : c2).client.post(`/v1/orgs/${(i % 2 ? c1 : c2).id}/databases`, { name: dbName('par') })));
    const ok = creates.filter((r) => r.status === 201);
    assert.equal(ok.length, 3, JSON.stringify(creates.map((r) => r.status)));
    for (const r of creates.filter((x) => x.status !== 201)) {
      refused(r, 409, 'limit_reached');
      assert.equal(r.json.error.details.limit, 'databases', 'the limit reached is the databases limit');
      assert.equal(r.json.error.details.org_id, r1.id, "the limit reached is the reseller's own");
    }
    assert.equal((await provider.client.get(`/v1/orgs/${r1.id}`)).json.counts.databases, 3, 'the reseller holds exactly its limit of 3 databases');
    const limits = await provider.client.get(`/v1/orgs/${r1.id}/limits`);
    assert.equal(limits.status, 200, `the reseller's limits answer: ${JSON.stringify(limits.json)}`);

    // the account's own limit binds too
    const c3 = await createOrgWithLogin(provider.client, { type: 'customer', limits: { databases: 1 } });
    const two = await Promise.all([1, 2].map(() => c3.client.post(`/v1/orgs/${c3.id}/databases`, { name: dbName('one') })));
    assert.deepEqual(two.map((r) => r.status).sort(), [201, 409], "the customer's own limit of 1 lets one of two parallel creates through");
    const all = [...ok, ...two.filter((r) => r.status === 201)];
    for (const r of all) assert.equal((await settled(admin, r.json.id)).json.status, 'active', 'every created database becomes active');
  });

  it('deletes: 202 pending, the node drops the database and its user, then the row goes; an org with a database cannot be deleted until then', async () => {
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer', limits: { databases: 1 } });
    const name = dbName('del');
    const r = await customer.client.post(`/v1/orgs/${customer.id}/databases`, { name });
    assert.equal(r.status, 201, `the database is created: ${JSON.stringify(r.json)}`);
    const password: string = r.json.password;
    await settled(customer.client, r.json.id);
    assert.equal((await asUser(panel, name, password, 'SELECT 1')).code, 0, 'the shown password connects once the database is active');

    const blocked = await reseller.client.del(`/v1/orgs/${customer.id}`, { confirm: customer.id });
    refused(blocked, 409, 'conflict');
    assert.match(blocked.json.error.message, /1 database\(s\)/, 'the error says how many databases block the deletion');

    const del = await customer.client.del(`/v1/databases/${r.json.id}`);
    assert.equal(del.status, 202, JSON.stringify(del.json));
    assert.equal(del.json.status, 'pending', 'a database being deleted is pending');
    assert.equal(del.json.deleting, true, 'a database being deleted shows deleting');
    // until the node dropped it, it counts
    refused(await customer.client.post(`/v1/orgs/${customer.id}/databases`, { name: dbName() }), 409, 'limit_reached');
    await gone(customer.client, r.json.id);
    assert.notEqual((await asUser(panel, name, password, 'SELECT 1')).code, 0, "the dropped user's password no longer connects");
    const left = await run('mariadb', ['--no-defaults', `--socket=${path.join(panel.root, 'run/my.sock')}`, '--batch', '--skip-column-names', '-e', `SHOW DATABASES LIKE '${name}'`]);
    assert.equal(left.code, 0, left.stderr);
    assert.equal(left.stdout.trim(), '', 'the node has no database of that name left');
    const log = await reseller.client.get(`/v1/orgs/${customer.id}/audit`);
    assert.ok(log.json.entries.some((e: { action: string; target_id: string; actor_username: string }) => e.action === 'database.deleted' && e.target_id === r.json.id && e.actor_username === 'system'), `the system's deletion of database ${r.json.id} is audited`);

    // the name is free again, and with no database left the org can go
    const again = await customer.client.post(`/v1/orgs/${customer.id}/databases`, { name });
    assert.equal(again.status, 201, JSON.stringify(again.json));
    await settled(customer.client, again.json.id);
    assert.equal((await asUser(panel, name, again.json.password, 'SELECT 1')).code, 0, "the new database's password connects");
    assert.notEqual((await asUser(panel, name, password, 'SELECT 1')).code, 0, 'the old password is gone with the old user');
    assert.equal((await customer.client.del(`/v1/databases/${again.json.id}`)).status, 202, "the new database's delete is accepted");
    await gone(customer.client, again.json.id);
    assert.equal((await reseller.client.del(`/v1/orgs/${customer.id}`, { confirm: customer.id })).status, 204, 'with no database left the org is deleted');
  });

  it('an agent node that never reports: the database ends failed (never pending), its password removed with the expired operation; it can then be deleted', async () => {
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const node = unique('db-');
    await addNode(env.db, null, node);
    await env.db('panel_nodes').where({ name: node }).update({ state: 'alive', roles: ['db'] });
    try {
      const r = await admin.post(`/v1/orgs/${customer.id}/databases`, { name: dbName('far'), node });
      assert.equal(r.status, 201, JSON.stringify(r.json));
      assert.equal(r.json.node, node, 'the database is placed on the named agent node');
      const queued = await env.db('panel_node_ops').where({ id: r.json.operation_id }).first();
      assert.equal(queued.status, 'queued', 'the operation waits queued for the agent');
      assert.equal(queued.payload.password, r.json.password, 'the operation carries it to the node');
      const s = await settled(customer.client, r.json.id, ['active', 'failed'], 20_000);
      assert.equal(s.json.status, 'failed', 'a database whose node never reports ends failed');
      assert.match(s.json.error, /did not report the operation within 2\.5 s/, 'the error says the node did not report in time');
      const op = await env.db('panel_node_ops').where({ id: r.json.operation_id }).first();
      assert.equal(op.status, 'expired', 'the unreported operation expires');
      assert.equal(op.payload.password, undefined, 'the expired operation no longer carries the password');
      assert.deepEqual(await tablesContaining(r.json.password), [], 'no table holds the password after expiry');
      // a delete goes to the node too (it may have created it after all); nobody pulls it either
      const del = await customer.client.del(`/v1/databases/${r.json.id}`);
      assert.equal(del.status, 202, `the delete of a failed database is accepted: ${JSON.stringify(del.json)}`);
      const after = await settled(customer.client, r.json.id, ['failed'], 20_000);
      assert.match(after.json.error, /^delete failed: /, 'the unreported delete fails');
      assert.equal(after.json.deleting, false, 'a failed delete no longer shows deleting');
    } finally {
      await env.db('panel_nodes').where({ name: node }).update({ draining: true });
    }
  });

  it('a create the node refuses ends failed with the node’s error, and such a database is deleted at once (nothing was made on the node)', async () => {
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const node = unique('db-');
    await addNode(env.db, null, node);
    await env.db('panel_nodes').where({ name: node }).update({ state: 'alive', roles: ['db'] });
    try {
      const r = await admin.post(`/v1/orgs/${customer.id}/databases`, { name: dbName('ref'), node });
      assert.equal(r.status, 201, JSON.stringify(r.json));
      // what the node's agent reports for it (its MariaDB is gone, say)
      assert.equal((await recordResult(env.db, node, r.json.operation_id, { ok: false, refused: true, error: 'this node runs no MariaDB (no db role)' })).recorded, true, "the node's refusal is recorded");
      const s = await settled(customer.client, r.json.id);
      assert.equal(s.json.status, 'failed', 'a create the node refused ends failed');
      assert.equal(s.json.error, 'this node runs no MariaDB (no db role)', "the database shows the node's error");
      assert.equal((await env.db('panel_node_ops').where({ id: r.json.operation_id }).first()).payload.password, undefined, 'the refused operation no longer carries the password');
      assert.equal((await customer.client.get(`/v1/orgs/${customer.id}`)).json.counts.databases, 1, 'the failed database still counts');
      const del = await customer.client.del(`/v1/databases/${r.json.id}`);
      assert.equal(del.status, 202, `the delete of a refused database is accepted: ${JSON.stringify(del.json)}`);
      assert.equal(del.json.status, 'deleted', 'a database the node never made is deleted at once');
      refused(await customer.client.get(`/v1/databases/${r.json.id}`), 404, 'not_found');
      assert.equal((await customer.client.get(`/v1/orgs/${customer.id}`)).json.counts.databases, 0, 'the deleted database no longer counts');
      assert.equal((await env.db('panel_node_ops').where({ node_name: node, kind: 'database.delete' }).first()), undefined, 'no delete is sent to the node for a database it never made');
    } finally {
      await env.db('panel_nodes').where({ name: node }).update({ draining: true });
    }
  });

  it('an operation whose workflow start was lost (the API process died after its commit) is resumed', async () => {
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const name = dbName('lost');
    const id = randomUUID();
    const opId = randomUUID();
    const password = `pw-${randomUUID()}`;
    await env.db.transaction(async (trx) => {
      await trx('panel_databases').insert({ id, org_id: customer.id, node_name: 'hosting', name, db_user: name, last_op_id: opId, updated_at: new Date(Date.now() - 120_000) });
      await queueOperation(trx, 'hosting', { id: opId, kind: 'database.create', database: name, user: name, password });
    });
    const deps = { db: env.db, temporal: new Client({ connection: temporal }), nodeOps: { taskQueue: panel.taskQueue, timeoutMs: 2500, pollMs: 200 }, logger: env.logger };
    assert.ok((await resumePendingDatabaseOps(deps, 60_000)).includes(id), `the pending database operation ${id} is resumed`);
    assert.equal((await settled(customer.client, id)).json.status, 'active', 'the resumed database becomes active');
    assert.equal((await asUser(panel, name, password, 'SELECT 1')).code, 0, 'the password of the resumed database connects');
    assert.deepEqual(await tablesContaining(password), [], "no table holds the resumed database's password");
    assert.ok(!(await resumePendingDatabaseOps(deps, 60_000)).includes(id), `the finished database operation ${id} is no longer pending`);
  });
});
