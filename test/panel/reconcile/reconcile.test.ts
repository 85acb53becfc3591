import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { SA } from '../../../domain/shared/search-attributes';
import { sha256 } from '../../../hosting-node/files';
import type { PanelRuntime } from '../../../main/panel-api';
import { specOf } from '../../../services/panel/sites/sites';
import { RECONCILE_SCHEDULE_ID } from '../../../domain/panel/workflows';
import { parsePanelFlags } from '../../../platform/panel-flags';
import { createOrgWithLogin, platformAdmin, signInFresh, startHostingPanel, startPanel, unique, type HostingPanel, type PanelClient } from '../../helpers/panel';
import { insertLogin } from '../../../services/panel/logins/logins';
import { hashPassword } from '../../../services/panel/logins/passwords';
import { runPass, setPolicy, siteActive, waitPass } from '../../helpers/reconcile';
import { env } from '../../setup/env';

// Reconciliation of the hosting node (spec 2 sections 2.6, 3, 4.1, 4.4.3): a real hosting node
// (nginx, PHP-FPM) under a temp root, sites created through the API, manual edits made on disk;
// passes run as reconcile-<pass_id> workflows on the panel worker. One panel runs the node with
// `-reconcile on`; a second API process with `-reconcile dry-run` starts passes on the same worker.

const rewrites = (root: string): Array<{ site: string; op: string; files: Array<{ old_digest: string | null }> }> => {
  const f = path.join(root, 'state/reconcile.log');
  return fs.existsSync(f) ? fs.readFileSync(f, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l)) : [];
};

describe('panel: reconciliation passes of the hosting node', function () {
  this.timeout(120_000);
  let host: HostingPanel;
  let dry: PanelRuntime;
  let admin: PanelClient;
  let adminDry: PanelClient;
  let customer: Awaited<ReturnType<typeof createOrgWithLogin>>;
  let provider: Awaited<ReturnType<typeof createOrgWithLogin>>;
  let temporal: Client;
  const sites: Record<'a' | 'b' | 'c' | 'd', { id: string; domain: string }> = {} as never;

  const vhostOf = (k: keyof typeof sites) => path.join(host.root, 'etc/nginx/sites', `${sites[k].domain}.conf`);
  const cronOf = (k: keyof typeof sites) => path.join(host.root, 'etc/cron.d', sites[k].domain);
  const expected = async (k: keyof typeof sites, kind: string) => {
    const row = await env.db('panel_sites').where({ id: sites[k].id }).first();
    return host.runtime.hostingNode!.renderSite(specOf(row)).find((f) => f.kind === kind)!.text;
  };
  const view = async (k: keyof typeof sites) => {
    const r = await admin.get(`/v1/reconcile/sites/${sites[k].id}`);
    assert.equal(r.status, 200, JSON.stringify(r.json));
    return r.json;
  };

  before(async function () {
    this.timeout(90_000);
    host = await startHostingPanel({ flags: ['-reconcile', 'on'], reconcile: { batchSize: 3, heartbeatTimeoutMs: 10_000 } });
    dry = await startPanel({ flags: ['-reconcile', 'dry-run'], nodeOps: { taskQueue: host.taskQueue } });
    admin = await platformAdmin(host.url);
    adminDry = await platformAdmin(dry.url);
    provider = await createOrgWithLogin(admin, { type: 'provider' });
    customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    for (const k of ['a', 'b', 'c', 'd'] as const) {
      const domain = `${unique(k)}.reconcile.test`;
      const r = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain, cron: ['*/5 * * * * echo hi'], ...(k === 'a' ? { php_version: '8.2' } : {}) });
      assert.equal(r.status, 201, JSON.stringify(r.json));
      sites[k] = { id: r.json.id, domain };
    }
    for (const s of Object.values(sites)) await siteActive(customer.client, s.id);
    temporal = new Client({ connection: await Connection.connect({ address: env.temporalAddress }) });
  });
  after(async function () {
    this.timeout(30_000);
    await dry?.close();
    await host?.close();
    await temporal?.connection.close();
    // sites of a node root that no longer exists: other suites' passes would call them missing
    if (sites.a) await env.db('panel_sites').whereIn('id', Object.values(sites).map((s) => s.id)).delete();
  });

  it('a pass finds every untouched site in sync; the summary counts statuses, names the last pass and the next scheduled one', async () => {
    const pass = await runPass(admin);
    assert.equal(pass.status, 'done', JSON.stringify(pass));
    assert.equal(pass.mode, 'on', 'the pass ran in mode on');
    for (const k of ['a', 'b', 'c', 'd'] as const) {
      const v = await view(k);
      assert.equal(v.status, 'in_sync', JSON.stringify(v));
      assert.equal(v.policy, 'observe', 'the default policy is observe');
      assert.equal(v.generations.panel, 1, 'the panel is at generation 1');
      assert.equal(v.generations.node, 1, 'the node is at generation 1');
      assert.equal(v.digest.expected, v.digest.node, 'the node digest matches the expected one');
      assert.match(v.digest.expected, /^[0-9a-f]{64}$/, 'the digest is a sha256');
      assert.deepEqual(v.findings, [], 'no findings for an untouched site');
      assert.equal(v.events[0].kind, 'status', 'the latest event is a status event');
      assert.equal(v.events[0].detail.to, 'in_sync', 'the status went to in_sync');
    }
    const sum = await admin.get('/v1/reconcile');
    assert.equal(sum.status, 200, JSON.stringify(sum.json));
    assert.equal(sum.json.mode, 'on', 'the summary gives the mode');
    assert.ok(sum.json.counts.in_sync >= 4, JSON.stringify(sum.json.counts));
    assert.equal(sum.json.last_pass.id, pass.id, 'the summary names the last pass');
    assert.equal(sum.json.interval_seconds, 900, 'the default interval is 15 minutes');
    assert.ok(sum.json.next_pass_at && new Date(sum.json.next_pass_at).getTime() > Date.now(), JSON.stringify(sum.json));
    // a pass is a workflow the Temporal UI finds by its id, with its memo in words
    const d = await temporal.workflow.getHandle(`reconcile-${pass.id}`).describe();
    assert.equal(d.status.name, 'COMPLETED', 'the pass workflow completed');
    const memo = await d.memo;
    assert.match(String(memo?.what), /reconciliation pass over every site on the hosting node/, 'the memo says what the pass is');
    assert.match(String(memo?.outcome), /sites checked \(.*in sync.*\); 0 rewritten/, 'the memo gives the outcome in words');
    assert.equal(d.typedSearchAttributes.get(SA.Kind), 'reconcile', 'the pass is findable as a reconcile workflow');
  });

  it('reconciliation pages belong to the platform: 404 to other orgs; a platform read_only login reads but gets 403 on runs and policy changes', async () => {
    for (const c of [provider.client, customer.client]) {
      assert.equal((await c.get('/v1/reconcile')).status, 404, 'another org does not see the summary');
      assert.equal((await c.post('/v1/reconcile/run')).status, 404, 'another org cannot start a pass');
      assert.equal((await c.get(`/v1/reconcile/sites/${sites.a.id}`)).status, 404, "another org does not see a site's reconciliation");
      assert.equal((await c.post(`/v1/reconcile/sites/${sites.a.id}/policy`, { policy: 'remediate' })).status, 404, 'another org cannot change the policy');
    }
    // a platform read_only login reads, and is refused what changes things
    const username = unique('ro');
    const platform = await env.db('panel_orgs').whereNull('parent_id').first('id', 'type');
    await env.db.transaction(async (trx) => insertLogin(trx, platform, { username, passwordHash: await hashPassword('temporary-pass-1'), role: 'read_only' }));
    const ro = await signInFresh(host.url, username, 'temporary-pass-1');
    assert.equal((await ro.get('/v1/reconcile')).status, 200, 'a platform read_only login reads the summary');
    assert.equal((await ro.get(`/v1/reconcile/sites/${sites.a.id}`)).status, 200, "a platform read_only login reads a site's reconciliation");
    for (const r of [await ro.post('/v1/reconcile/run'), await ro.post(`/v1/reconcile/sites/${sites.a.id}/policy`, { policy: 'remediate' })]) {
      assert.equal(r.status, 403, JSON.stringify(r.json));
      assert.equal(r.json.error.code, 'forbidden', 'refused as forbidden');
    }
    assert.equal((await admin.get(`/v1/reconcile/sites/${randomUUID()}`)).status, 404, 'an unknown site is 404');
    const bad = await admin.post(`/v1/reconcile/sites/${sites.a.id}/policy`, { policy: 'fix-it' });
    assert.equal(bad.status, 400, `an unknown policy is refused with 400: ${JSON.stringify(bad.json)}`);
    assert.equal(bad.json.error.code, 'validation_failed', 'the error code is validation_failed');
  });

  it('a policy change needs its confirmation: the first request returns the review and a token, the second with the token applies it once', async () => {
    const review = await admin.post(`/v1/reconcile/sites/${sites.a.id}/policy`, { policy: 'remediate' });
    assert.equal(review.status, 200, JSON.stringify(review.json));
    assert.equal(review.json.confirmed, false, 'the first request is not yet confirmed');
    assert.equal(review.json.review.from, 'observe', 'the review names the current policy');
    assert.equal(review.json.review.to, 'remediate', 'the review names the new policy');
    assert.match(review.json.review.effect, /overwritten/, 'the review says files will be overwritten');
    assert.equal((await view('a')).policy, 'observe', 'nothing changes before the confirmation');
    const wrong = await admin.post(`/v1/reconcile/sites/${sites.a.id}/policy`, { policy: 'remediate', confirmation_token: 'not-the-token' });
    assert.equal(wrong.status, 400, 'a wrong token is refused');
    const otherSite = await admin.post(`/v1/reconcile/sites/${sites.b.id}/policy`, { policy: 'remediate', confirmation_token: review.json.confirmation_token });
    assert.equal(otherSite.status, 400, 'a token confirms only the site and policy it was issued for');
    const ok = await admin.post(`/v1/reconcile/sites/${sites.a.id}/policy`, { policy: 'remediate', confirmation_token: review.json.confirmation_token });
    assert.equal(ok.status, 200, JSON.stringify(ok.json));
    assert.deepEqual({ confirmed: ok.json.confirmed, policy: ok.json.policy, previous: ok.json.previous }, { confirmed: true, policy: 'remediate', previous: 'observe' }, 'the confirmed change from observe to remediate');
    const again = await admin.post(`/v1/reconcile/sites/${sites.a.id}/policy`, { policy: 'remediate', confirmation_token: review.json.confirmation_token });
    assert.equal(again.status, 400, 'a token is used once');
    const v = await view('a');
    assert.equal(v.policy, 'remediate', 'the policy is now remediate');
    assert.equal(v.events[0].kind, 'policy', 'the latest event records the policy change');
    const audit = await env.db('panel_audit').where({ action: 'site.reconcile_policy', target_id: sites.a.id }).first();
    assert.ok(audit, 'the change is audited');
  });

  it('a manual vhost edit is drift: reported in dry-run with a diff and left alone; a remediate pass rewrites it only for the opted-in site and records what it overwrote', async () => {
    const edit = '# hand-made change\n';
    fs.appendFileSync(vhostOf('a'), edit);
    fs.appendFileSync(vhostOf('b'), edit);
    const editedA = fs.readFileSync(vhostOf('a'), 'utf8');

    const dryPass = await runPass(adminDry);
    assert.equal(dryPass.mode, 'dry-run', 'the dry pass runs in dry-run mode');
    assert.equal(dryPass.remediated, 0, 'a dry pass rewrites nothing');
    for (const k of ['a', 'b'] as const) {
      const v = await view(k);
      assert.equal(v.status, 'drift', JSON.stringify(v));
      const f = v.findings.find((x: { problem: string }) => x.problem === 'drift');
      assert.equal(f.kind, 'vhost', 'the drift is in the vhost');
      assert.equal(f.node_digest, sha256(fs.readFileSync(vhostOf(k), 'utf8')), "the finding's node digest is the edited file's");
      assert.ok(f.diff.includes('+# hand-made change'), JSON.stringify(f.diff));
      assert.notEqual(v.digest.expected, v.digest.node, 'the digests differ');
    }
    assert.ok(dryPass.not_in_sync.some((x: { site_id: string }) => x.site_id === sites.a.id), `the dry pass lists site a as not in sync: ${JSON.stringify(dryPass.not_in_sync)}`);
    assert.equal(fs.readFileSync(vhostOf('a'), 'utf8'), editedA, 'dry-run changes nothing');
    assert.equal(rewrites(host.root).length, 0, 'no rewrite logged by the dry pass');

    const onPass = await runPass(admin);
    assert.equal(onPass.mode, 'on', 'the pass runs in mode on');
    assert.equal(onPass.remediated, 1, 'only the opted-in site is rewritten');
    assert.equal(fs.readFileSync(vhostOf('a'), 'utf8'), await expected('a', 'vhost'), 'the opted-in site is rewritten to the panel');
    assert.ok(fs.readFileSync(vhostOf('b'), 'utf8').endsWith(edit), 'an observed site keeps the manual edit');
    const a = await view('a');
    assert.equal(a.status, 'in_sync', 'the rewritten site is back in sync');
    const ev = a.events.find((e: { kind: string }) => e.kind === 'remediated');
    assert.equal(ev.pass_id, onPass.id, 'the event names the pass');
    assert.equal(ev.detail.found, 'drift', 'the event says what was found');
    assert.equal(ev.detail.files[0].old_digest, sha256(editedA), 'the event records the digest of the overwritten file');
    assert.ok(ev.detail.files[0].diff.includes('+# hand-made change'), `the drift event carries the diff: ${ev.detail.files[0].diff}`);
    assert.equal((await view('b')).status, 'drift', 'the observed site stays in drift');
    const listed = await admin.get('/v1/reconcile/sites?status=drift&limit=500');
    assert.equal(listed.status, 200, JSON.stringify(listed.json));
    const driftIds = listed.json.sites.map((x: { site_id: string }) => x.site_id);
    assert.ok(driftIds.includes(sites.b.id) && !driftIds.includes(sites.a.id), JSON.stringify(listed.json));
    const optedIn = await admin.get('/v1/reconcile/sites?policy=remediate&limit=500');
    assert.deepEqual(optedIn.json.sites.filter((x: { site_id: string }) => Object.values(sites).some((y) => y.id === x.site_id)).map((x: { site_id: string }) => x.site_id), [sites.a.id], 'only site a of these is opted in');
    assert.equal((await admin.get('/v1/reconcile/sites?status=bogus')).status, 400, 'an unknown status filter is refused');
    const log = rewrites(host.root);
    assert.equal(log.length, 1, 'one rewrite logged');
    assert.equal(log[0].site, sites.a.id, 'the rewrite is of site a');
    // the node still serves the rewritten config (nginx reloaded and passes its test)
    fs.writeFileSync(vhostOf('b'), await expected('b', 'vhost'));
  });

  it('a missing managed file is `missing`, a file of no known site is an orphan (reported, never removed)', async () => {
    fs.rmSync(cronOf('c'));
    const ghost = path.join(host.root, 'etc/nginx/sites', 'ghost.reconcile.test.conf');
    fs.writeFileSync(ghost, '# a vhost someone left here\n');
    try {
      const pass = await runPass(adminDry);
      const c = await view('c');
      assert.equal(c.status, 'missing', JSON.stringify(c));
      assert.deepEqual(c.findings.map((f: { problem: string; kind: string }) => [f.problem, f.kind]), [['missing', 'cron']], 'the only finding is the missing cron file');
      assert.ok(pass.counts.missing >= 1, `missing counted: ${JSON.stringify(pass.counts)}`);
      assert.ok(pass.orphans.files.some((f: { path: string; domain: string; kind: string }) => f.path === ghost && f.domain === 'ghost.reconcile.test' && f.kind === 'vhost'), JSON.stringify(pass.orphans));
      assert.ok(pass.counts.orphan >= 1, `orphans counted: ${JSON.stringify(pass.counts)}`);
      assert.ok(fs.existsSync(ghost), `an orphan vhost is reported, not deleted: ${ghost}`);
      assert.ok(!fs.existsSync(cronOf('c')), 'dry-run recreates nothing');
      // opted in, a remediate pass writes the missing file back
      await setPolicy(admin, sites.c.id, 'remediate');
      await runPass(admin);
      assert.equal(fs.readFileSync(cronOf('c'), 'utf8'), await expected('c', 'cron'), 'the missing cron file is written back as the panel renders it');
      assert.equal((await view('c')).status, 'in_sync', 'the site is back in sync');
      assert.ok(fs.existsSync(ghost), 'an orphan is not removed');
    } finally {
      fs.rmSync(ghost, { force: true });
    }
  });

  it('a managed file that cannot be read is a finding, not a crash: the pass completes and the file is not rewritten', async () => {
    await setPolicy(admin, sites.d.id, 'remediate');
    fs.rmSync(cronOf('d'));
    fs.mkdirSync(cronOf('d')); // reading a directory fails (EISDIR), even as root
    try {
      const pass = await runPass(admin);
      assert.equal(pass.status, 'done', 'the pass completes');
      const d = await view('d');
      assert.equal(d.status, 'unreadable', JSON.stringify(d));
      const f = d.findings.find((x: { problem: string }) => x.problem === 'unreadable');
      assert.equal(f.kind, 'cron', 'the unreadable file is the cron file');
      assert.match(f.error, /EISDIR/, `the finding gives the read error: ${f.error}`);
      assert.ok(fs.statSync(cronOf('d')).isDirectory(), 'not rewritten');
      assert.ok(!d.events.some((e: { kind: string }) => e.kind === 'remediated'), `the failed cron rewrite is not recorded as remediated: ${JSON.stringify(d.events)}`);
      assert.equal((await view('a')).status, 'in_sync', 'the other sites are still checked');
    } finally {
      fs.rmSync(cronOf('d'), { recursive: true, force: true });
      fs.writeFileSync(cronOf('d'), await expected('d', 'cron'));
    }
  });

  it('run now is idempotent while a pass runs: concurrent requests get one pass', async () => {
    const [x, y] = await Promise.all([admin.post('/v1/reconcile/run'), admin.post('/v1/reconcile/run')]);
    assert.deepEqual([x.status, y.status].sort(), [200, 202], JSON.stringify([x.json, y.json]));
    assert.equal(x.json.pass.id, y.json.pass.id, 'both requests get the same pass');
    const started = [x, y].find((r) => r.status === 202)!;
    assert.equal(started.json.started, true, 'the 202 answer started the pass');
    const again = await admin.post('/v1/reconcile/run');
    if (again.status === 200) assert.equal(again.json.pass.id, x.json.pass.id, 'a run during a pass gets that pass');
    await waitPass(admin, x.json.pass.id);
    if (again.status === 202) await waitPass(admin, again.json.pass.id);
    assert.equal((await env.db('panel_reconcile_passes').where({ status: 'running' })).length, 0, 'no pass left running');
  });
  it('the schedule starts passes of its own (reconcile-scheduled-<time>, trigger schedule)', async () => {
    const handle = temporal.schedule.getHandle(RECONCILE_SCHEDULE_ID);
    const desc = await handle.describe();
    assert.equal(desc.action.type, 'startWorkflow', 'the schedule starts a workflow');
    assert.equal((desc.action as { taskQueue: string }).taskQueue, host.taskQueue, "the schedule starts it on the host's task queue");
    await handle.trigger();
    const deadline = Date.now() + 30_000;
    let pass;
    for (;;) {
      pass = await env.db('panel_reconcile_passes').where({ trigger: 'schedule' }).whereNot({ status: 'running' }).orderBy('started_at', 'desc').first();
      if (pass) break;
      if (Date.now() > deadline) throw new Error('the scheduled pass did not run');
      await new Promise((res) => setTimeout(res, 200));
    }
    assert.match(pass.id, /^scheduled-/, 'a scheduled pass id starts with scheduled-');
    assert.equal(pass.status, 'done', 'the scheduled pass completes');
    const report = await waitPass(admin, pass.id);
    assert.equal(report.workflow_id, `reconcile-${pass.id}`, 'the workflow id is reconcile-<pass id>');
    assert.ok(report.sites >= 4, `the scheduled pass covered the sites: ${report.sites}`);
  });

  it('-reconcile off: the summary says so and no pass can be started; -reconcile-interval is checked', async () => {
    const off = await startPanel({ flags: ['-reconcile', 'off'], nodeOps: { taskQueue: host.taskQueue } });
    try {
      const c = await platformAdmin(off.url);
      const sum = await c.get('/v1/reconcile');
      assert.equal(sum.json.mode, 'off', 'the summary says off');
      assert.equal(sum.json.next_pass_at, null, 'no next pass when off');
      const run = await c.post('/v1/reconcile/run');
      assert.equal(run.status, 409, `a run is refused with 409: ${JSON.stringify(run.json)}`);
      assert.match(run.json.error.message, /-reconcile off/, 'the error names the flag');
    } finally {
      await off.close();
    }
    assert.equal(parsePanelFlags(['-reconcile-interval', '30m']).reconcileIntervalMs, 1_800_000, '30m is 30 minutes');
    assert.throws(() => parsePanelFlags(['-reconcile-interval', '5s']), /-reconcile-interval "5s"/);
  });
});
