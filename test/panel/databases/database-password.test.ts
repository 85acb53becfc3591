import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import pino from 'pino';
import { Client, Connection } from '@temporalio/client';
import { temporal as proto } from '@temporalio/proto';
import { validateOperation } from '../../../domain/panel/node-config';
import { startHostingNode } from '../../../hosting-node';
import { startAgent } from '../../../hosting-node/agent';
import { createPanelClient } from '../../../hosting-node/panel-client';
import { run } from '../../../hosting-node/processes';
import { freePort } from '../../../platform/ports';
import { addNode } from '../../../services/panel/nodes/nodes';
import { recordResult } from '../../../services/panel/nodes/queue';
import { databaseOpWorkflowId } from '../../../domain/panel/workflows';
import { resumePendingDatabaseOps } from '../../../services/panel/databases/databases';
import { asDbUser as asUser, createOrgWithLogin, platformAdmin, signInFresh, startHostingPanel, tablesContaining, unique, type HostingPanel, type PanelClient, type Reply } from '../../helpers/panel';
import { tempNodeRoot } from '../../helpers/hosting-node';
import { env } from '../../setup/env';
import { until } from '../../helpers/until';

// A database's password reset (POST /v1/databases/{id}/password) over real HTTP: a real panel whose
// hosting node runs MariaDB, a real Temporal worker. The node's MariaDB takes the new password and
// refuses the old one; the new one is shown once and is afterwards in no table, no workflow history
// and no log line of the panel (its logger is captured at debug level).

function refused(r: Reply, status: number, code: string) {
  assert.equal(r.status, status, JSON.stringify(r.json));
  assert.equal(r.json.error.code, code, JSON.stringify(r.json));
}

const opRow = (id: string) => env.db('panel_node_ops').where({ id }).first();
/** Waits until the node operation has its result; returns its row. */
const finished = (id: string, timeoutMs?: number) => until(`operation ${id}`, async () => { const o = await opRow(id); return o && !['queued', 'sent'].includes(o.status) && o; }, timeoutMs);

const dbName = (label = 'db') => unique(`${label}_`).replace(/-/g, '_');

describe('panel: database password reset', function () {
  this.timeout(120_000);
  const logs: string[] = [];
  let panel: HostingPanel;
  let admin: PanelClient;
  let reseller: Awaited<ReturnType<typeof createOrgWithLogin>>;
  let temporal: Connection;

  before(async function () {
    this.timeout(90_000);
    const logger = pino({ level: 'debug' }, { write: (line: string) => void logs.push(line) });
    panel = await startHostingPanel({ mariadb: true, logger, flags: ['-node-api-listen', '127.0.0.1:0'], opTimeoutMs: 10_000 });
    admin = await platformAdmin(panel.url);
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    reseller = await createOrgWithLogin(provider.client, { type: 'reseller' });
    temporal = await Connection.connect({ address: env.temporalAddress });
  });
  after(async () => {
    await temporal?.close();
    await panel?.close();
  });

  /** A customer with an active database on `node` (the hosting node unless given; `report`: its result recorded here, else its agent's); its create password. */
  async function activeDatabase(node?: string, report = true) {
    const customer = await createOrgWithLogin(reseller.client, { type: 'customer' });
    const name = dbName('pw');
    const r = await (node ? admin : customer.client).post(`/v1/orgs/${customer.id}/databases`, { name, ...(node ? { node } : {}) });
    assert.equal(r.status, 201, JSON.stringify(r.json));
    // an agent node's result, as its agent would report it
    if (node && report) await recordResult(env.db, node, r.json.operation_id, { ok: true, detail: { database: name, user: name } });
    await until('active', async () => (await customer.client.get(`/v1/databases/${r.json.id}`)).json.status === 'active');
    return { customer, id: r.json.id as string, name, password: r.json.password as string };
  }

  it('gives the user a new password on the node: 202 with it once; the old one stops working, the new one works; the password is then in no table, history or log', async () => {
    const { customer, id, name, password: old } = await activeDatabase();
    assert.equal((await asUser(panel, name, old, 'SELECT 1')).code, 0, 'the create password connects before the reset');
    const r = await customer.client.post(`/v1/databases/${id}/password`, { confirm: id });
    assert.equal(r.status, 202, JSON.stringify(r.json));
    assert.equal(r.headers.get('cache-control'), 'no-store', 'the answer showing the new password is not cached');
    assert.equal(r.json.id, id, 'the answer names the database');
    assert.equal(r.json.status, 'active', 'the database stays active (backups and metering go on)');
    const password: string = r.json.password;
    assert.ok(password.length >= 32 && password !== old, `a new password of at least 32 characters: ${password.length}, changed ${password !== old}`);
    const op = await finished(r.json.operation_id);
    assert.equal(op.status, 'done', JSON.stringify(op.result));
    assert.equal(op.kind, 'database.password', 'the operation is a database.password');
    assert.equal(op.payload.user, name, 'the operation names the database user');
    assert.equal(op.payload.password, undefined, 'the password leaves the operation row with its result');

    const s = await customer.client.get(`/v1/databases/${id}`);
    assert.equal(s.json.status, 'active', 'the database is active after the reset');
    assert.equal(s.json.error, null, 'a done reset leaves no error');
    assert.equal(s.json.operation_id, r.json.operation_id, 'the database names the reset as its last operation');
    assert.equal(s.json.password, undefined, 'the database no longer shows the password');
    assert.ok(!JSON.stringify((await customer.client.get(`/v1/orgs/${customer.id}/databases`)).json).includes(password), 'the database list does not show the new password');

    const bad = await asUser(panel, name, old, 'SELECT 1');
    assert.notEqual(bad.code, 0, 'the old password no longer connects');
    assert.match(bad.stderr, /Access denied/, 'the old password is denied access');
    for (const via of ['tcp', 'socket'] as const) {
      const ok = await asUser(panel, name, password, `SELECT count(*) FROM information_schema.schemata WHERE schema_name = '${name}'`, via);
      assert.equal(ok.code, 0, ok.stderr);
      assert.equal(ok.stdout.trim(), '1', 'the new password sees the database');
    }

    const audit = await reseller.client.get(`/v1/orgs/${customer.id}/audit`);
    const entry = audit.json.entries.find((e: { action: string; target_id: string }) => e.action === 'database.password' && e.target_id === id);
    assert.ok(entry, JSON.stringify(audit.json.entries.map((e: { action: string }) => e.action)));
    assert.equal(entry.actor_username, customer.username, "the audit entry names the customer's login as the actor");
    assert.ok(!JSON.stringify(audit.json).includes(password), 'the audit log does not hold the new password');
    assert.deepEqual(await tablesContaining(password), [], 'no table holds the new password');
    const history = await new Client({ connection: temporal }).workflow.getHandle(databaseOpWorkflowId(r.json.operation_id)).fetchHistory();
    const bytes = Buffer.from(proto.api.history.v1.History.encode(history).finish());
    assert.ok(bytes.includes(Buffer.from(id)), 'the history names the database');
    assert.ok(!bytes.includes(Buffer.from(password)), 'the password is not in the workflow history');
    assert.ok(logs.length > 0, 'the panel logged');
    assert.ok(!logs.some((l) => l.includes(password)), 'no log line carries the password');

    // a second reset once the first is done is fine
    const again = await customer.client.post(`/v1/databases/${id}/password`, { confirm: id });
    assert.equal(again.status, 202, JSON.stringify(again.json));
    assert.equal((await finished(again.json.operation_id)).status, 'done', 'the second reset is done');
    assert.equal((await asUser(panel, name, again.json.password, 'SELECT 1')).code, 0, 'the second new password connects');
    assert.notEqual((await asUser(panel, name, password, 'SELECT 1')).code, 0, 'the first new password no longer connects');
  });

  it('refuses: outside the subtree 404, a read_only login 403, a bad id 404, a missing or wrong confirmation 400; nothing changes', async () => {
    const { customer, id, name, password } = await activeDatabase();
    const before = await customer.client.get(`/v1/databases/${id}`);
    const other = await createOrgWithLogin(reseller.client, { type: 'customer' });
    refused(await other.client.post(`/v1/databases/${id}/password`, { confirm: id }), 404, 'not_found');
    const username = unique('ro');
    const temporary = `temp-${randomUUID()}`;
    assert.equal((await reseller.client.post(`/v1/orgs/${customer.id}/logins`, { username, password: temporary, role: 'read_only' })).status, 201, 'the reseller creates a read_only login');
    const ro = await signInFresh(panel.url, username, temporary);
    assert.equal((await ro.get(`/v1/databases/${id}`)).status, 200, 'it may read the database');
    refused(await ro.post(`/v1/databases/${id}/password`, { confirm: id }), 403, 'forbidden');
    refused(await customer.client.post('/v1/databases/not-a-uuid/password', { confirm: 'not-a-uuid' }), 404, 'not_found');
    const unknown = randomUUID();
    refused(await customer.client.post(`/v1/databases/${unknown}/password`, { confirm: unknown }), 404, 'not_found');
    refused(await customer.client.post(`/v1/databases/${id}/password`, {}), 400, 'validation_failed');
    const wrong = await customer.client.post(`/v1/databases/${id}/password`, { confirm: randomUUID() });
    refused(wrong, 400, 'validation_failed');
    assert.match(wrong.json.error.message, /confirm/, 'the error names the confirm field');
    refused(await customer.client.post(`/v1/databases/${id}/password`, { confirm: id, password: 'chosen-by-me-123' }), 400, 'validation_failed');
    const after = await customer.client.get(`/v1/databases/${id}`);
    assert.deepEqual(after.json, before.json, 'nothing changed');
    assert.equal(await env.db('panel_node_ops').where({ kind: 'database.password' }).whereRaw(`payload->>'user' = ?`, [name]).first(), undefined, 'no reset operation was queued');
    assert.equal((await asUser(panel, name, password, 'SELECT 1')).code, 0, 'the password still works');
    assert.equal((await env.db('panel_audit').where({ target_id: id, action: 'database.password' }).first()), undefined, 'no reset was audited');
  });

  it('while a reset is pending (an agent node that never reports) a second reset and a delete answer 409; it expires, the database stays active with the error, and can be reset again', async () => {
    const node = unique('db-');
    await addNode(env.db, null, node);
    await env.db('panel_nodes').where({ name: node }).update({ state: 'alive', roles: ['db'] });
    try {
      const { customer, id } = await activeDatabase(node);
      const r = await reseller.client.post(`/v1/databases/${id}/password`, { confirm: id });
      assert.equal(r.status, 202, JSON.stringify(r.json));
      const queued = await opRow(r.json.operation_id);
      assert.equal(queued.status, 'queued', 'the reset waits queued for the agent');
      assert.equal(queued.payload.password, r.json.password, 'the operation carries it to the node');
      const second = await customer.client.post(`/v1/databases/${id}/password`, { confirm: id });
      refused(second, 409, 'conflict');
      assert.match(second.json.error.message, /password reset .* is pending/, 'the conflict says a password reset is pending');
      refused(await customer.client.del(`/v1/databases/${id}`), 409, 'conflict');
      assert.equal((await customer.client.get(`/v1/databases/${id}`)).json.status, 'active', 'a pending reset leaves the database active');

      const op = await finished(r.json.operation_id, 20_000);
      assert.equal(op.status, 'expired', 'the unreported reset expires');
      assert.equal(op.payload.password, undefined, 'the expired reset no longer carries the password');
      const s = await until('the error noted', async () => { const g = await customer.client.get(`/v1/databases/${id}`); return g.json.error && g; });
      assert.equal(s.json.status, 'active', 'a failed reset leaves the database active');
      assert.match(s.json.error, /^password reset failed: .*did not report/, "the database shows the failed reset's error");
      assert.deepEqual(await tablesContaining(r.json.password), [], "no table holds the expired reset's password");
      const failed = await env.db('panel_audit').where({ target_id: id, action: 'database.failed' });
      assert.equal(failed.length, 1, 'the failure is audited once');

      // again, and this time the agent reports it: the error clears
      const next = await customer.client.post(`/v1/databases/${id}/password`, { confirm: id });
      assert.equal(next.status, 202, JSON.stringify(next.json));
      assert.equal(next.json.error, null, 'a new reset clears the error');
      assert.equal((await recordResult(env.db, node, next.json.operation_id, { ok: true })).recorded, true, "the agent's result is recorded");
      await finished(next.json.operation_id);
      assert.equal((await opRow(next.json.operation_id)).payload.password, undefined, 'the done reset no longer carries the password');
      const del = await customer.client.del(`/v1/databases/${id}`);
      assert.equal(del.status, 202, JSON.stringify(del.json));
    } finally {
      await env.db('panel_nodes').where({ name: node }).update({ draining: true });
    }
  });

  it('a reset whose workflow start was lost is resumed', async () => {
    const { customer, id, name } = await activeDatabase();
    const r = await customer.client.post(`/v1/databases/${id}/password`, { confirm: id });
    assert.equal(r.status, 202, `the reset is accepted: ${JSON.stringify(r.json)}`);
    await finished(r.json.operation_id);
    // what a crash between the commit and the start leaves: a queued reset without a workflow
    const opId = randomUUID();
    const password = 'a-lost-start-password-1234567890';
    await env.db.transaction(async (trx) => {
      await trx('panel_databases').where({ id }).update({ last_op_id: opId, updated_at: new Date(Date.now() - 120_000) });
      await trx('panel_node_ops').insert({ id: opId, node_name: 'hosting', kind: 'database.password', payload: JSON.stringify({ id: opId, kind: 'database.password', database: name, user: name, password }) });
    });
    refused(await customer.client.post(`/v1/databases/${id}/password`, { confirm: id }), 409, 'conflict');
    const resumed = await resumePendingDatabaseOps({ db: env.db, temporal: new Client({ connection: temporal }), nodeOps: { taskQueue: panel.taskQueue, timeoutMs: 2500, pollMs: 200 }, logger: env.logger });
    assert.ok(resumed.includes(id), `the pending password change ${id} is resumed`);
    assert.equal((await finished(opId)).status, 'done', 'the resumed reset is done');
    assert.equal((await asUser(panel, name, password, 'SELECT 1')).code, 0, "the resumed reset's password connects");
  });

  it('the node applies database.password once per op id (ALTER USER for both accounts), refuses a system user, and fails for a missing user without the password in its error', async () => {
    const node = panel.runtime.hostingNode!;
    const name = dbName('nd');
    const first = `pa'ss\\w"rd ${Date.now()}`;
    assert.equal((await node.apply({ id: randomUUID(), kind: 'database.create', database: name, user: name, password: 'the first password 1234' })).ok, true, 'the node creates the database');
    const opId = randomUUID();
    const r = await node.apply({ id: opId, kind: 'database.password', database: name, user: name, password: first });
    assert.equal(r.ok, true, JSON.stringify(r));
    for (const via of ['tcp', 'socket'] as const) assert.equal((await asUser(panel, name, first, 'SELECT 1', via)).code, 0, `the new password connects via ${via}`);
    assert.notEqual((await asUser(panel, name, 'the first password 1234', 'SELECT 1')).code, 0, 'the first password no longer connects');
    // the same op id again (a retried activity, an agent's repeated pull): the recorded result, nothing applied
    assert.deepEqual(await node.apply({ id: opId, kind: 'database.password', database: name, user: name, password: 'another password 1234' }), r, 'the same op id again returns the recorded result');
    assert.equal((await asUser(panel, name, first, 'SELECT 1')).code, 0, 'the repeated op id did not change the password');
    const root = await node.apply({ id: randomUUID(), kind: 'database.password', database: name, user: 'root', password: 'a root password 1234' });
    assert.deepEqual([root.ok, !root.ok && root.refused], [false, true], 'a reset for root is refused');
    const missing = 'no such user password 1234';
    const m = await node.apply({ id: randomUUID(), kind: 'database.password', database: name, user: dbName('nobody'), password: missing });
    assert.equal(m.ok, false, 'a reset for a missing user fails');
    assert.ok(!m.ok && m.error.length > 0 && !m.error.includes(missing), JSON.stringify(m));
    assert.ok(!logs.some((l) => l.includes(first) || l.includes(missing)), 'no log line holds either password');
  });

  it('an agent node (its own MariaDB) pulls the reset through the node API and applies it: the new password works there, the old one not', async function () {
    this.timeout(150_000);
    const name = unique('dbag-');
    const { token } = await addNode(env.db, null, name);
    const root = tempNodeRoot('panel-agent-');
    const logger = pino({ level: 'debug' }, { write: (line: string) => void logs.push(line) });
    const dbPort = await freePort();
    const node = await startHostingNode({ root, webPort: await freePort(), webHost: '127.0.0.1', builtinWebServer: true, mariadbPort: dbPort, mariadbTimeoutMs: 60_000, logger });
    const agent = startAgent({ node: name, client: createPanelClient({ url: panel.runtime.nodeApiUrl!, token }), hostingNode: node, logger, heartbeatMs: 500, pollWaitSeconds: 1, backoffMs: { min: 50, max: 500 } });
    try {
      await agent.enrolled;
      assert.equal(node.facts().mariadb, true, 'the agent node runs MariaDB');
      await env.db('panel_nodes').where({ name }).update({ state: 'alive', roles: ['web', 'db'] });
      const { customer, id, name: db, password: old } = await activeDatabase(name, false);
      const r = await customer.client.post(`/v1/databases/${id}/password`, { confirm: id });
      assert.equal(r.status, 202, JSON.stringify(r.json));
      const op = await finished(r.json.operation_id);
      assert.equal(op.status, 'done', JSON.stringify(op.result));
      assert.equal(op.payload.password, undefined, 'the done reset no longer carries the password');
      const as = (pw: string) => run('mariadb', ['--no-defaults', '--protocol=TCP', '--host=127.0.0.1', `--port=${dbPort}`, `--user=${db}`, `--password=${pw}`, '--batch', '--skip-column-names', '-e', 'SELECT 1'], { timeoutMs: 20_000 });
      assert.equal((await as(r.json.password)).code, 0, "the new password connects on the agent's MariaDB");
      assert.notEqual((await as(old)).code, 0, "the old password no longer connects on the agent's MariaDB");
      assert.equal((await customer.client.get(`/v1/databases/${id}`)).json.error, null, "the database shows no error after the agent's reset");
      assert.ok(!logs.some((l) => l.includes(r.json.password)), 'no log line of the panel or the agent carries it');
    } finally {
      await agent.stop();
      await node.stop();
      await env.db('panel_nodes').where({ name }).update({ draining: true });
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  it('the node refuses a malformed reset (validateOperation)', () => {
    const ok = { id: 'op-1', kind: 'database.password' as const, database: 'shop', user: 'shop', password: 'long enough password' };
    assert.equal(validateOperation(ok), null, 'a well-formed reset is valid');
    assert.match(validateOperation({ ...ok, password: 'short' }) ?? '', /password/, 'a short password is refused');
    assert.match(validateOperation({ ...ok, password: undefined as unknown as string }) ?? '', /password/, 'a missing password is refused');
    assert.match(validateOperation({ ...ok, user: "u'@'%" }) ?? '', /database user/, 'a user with quote and host characters is refused');
  });
});
