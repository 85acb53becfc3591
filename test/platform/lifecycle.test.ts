import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../../platform/ports';
import { createOrgWithLogin, signInFresh, unique } from '../helpers/panel';
import { runPass, setPolicy, siteActive } from '../helpers/reconcile';

// `npm start` behaves like a service: SIGTERM to the npm process stops everything, a start after
// a kill -9 of itself comes up again (stopping what the killed one left), and a failed start
// stops what it had started. Real processes, killed for real.

const ROOT = path.resolve(__dirname, '../..');

interface System {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

async function systemEnv(dataDir: string): Promise<NodeJS.ProcessEnv> {
  const [g, p, t, u, pg, s, hw, hd, na, ht] = await Promise.all(Array.from({ length: 10 }, () => freePort()));
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATA_DIR: dataDir,
    GATEWAY_PORT: `${g}`,
    PANEL_PORT: `${p}`,
    TEMPORAL_PORT: `${t}`,
    TEMPORAL_UI_PORT: `${u}`,
    PG_PORT: `${pg}`,
    SIMULATOR_PORT: `${s}`,
    PANEL_HOSTING_WEB_PORT: `${hw}`,
    PANEL_HOSTING_TLS_PORT: `${ht}`,
    PANEL_HOSTING_DB_PORT: `${hd}`,
    PANEL_NODE_API_PORT: `${na}`,
    LOG_LEVEL: 'info',
  };
  delete env.DATABASE_URL;
  delete env.TEMPORAL_ADDRESS;
  return env;
}

/** `group`: in a process group of its own, as a terminal runs it (Ctrl-C signals the whole group). */
function start(env: NodeJS.ProcessEnv, group = false): System {
  const child = spawn('npm', ['start'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'], detached: group });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, output: () => out, exited };
}

async function ready(s: System, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!s.output().includes('Started in')) {
    if (s.child.exitCode !== null) throw new Error(`npm start exited ${s.child.exitCode}:\n${s.output()}`);
    if (Date.now() > deadline) throw new Error(`npm start not ready:\n${s.output()}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

function pidIn(file: string): number | null {
  try {
    return Number(fs.readFileSync(file, 'utf8').split('\n')[0].trim());
  } catch {
    return null;
  }
}

/** The PostgreSQL and Temporal dev server processes of a running system. */
function servers(dataDir: string): number[] {
  const pids = [pidIn(path.join(dataDir, 'postgres', 'postmaster.pid')), pidIn(path.join(dataDir, 'temporal.pid'))];
  return pids.filter((p): p is number => p !== null && p > 1);
}

async function allGone(pids: number[], withinMs: number): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (pids.some(alive)) {
    if (Date.now() > deadline) throw new Error(`still running after ${withinMs} ms: ${pids.filter(alive).join(', ')}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Every process whose command line names the data folder: nginx, PHP-FPM, MariaDB, PostgreSQL, Temporal of this system. */
function processesOf(dataDir: string): Array<{ pid: number; cmd: string }> {
  return fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d)).flatMap((d) => {
    try {
      const cmd = fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
      return cmd.includes(dataDir) ? [{ pid: Number(d), cmd }] : [];
    } catch {
      return []; // gone meanwhile
    }
  });
}

const parentOf = (pid: number) => Number(fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')[1]);

/**
 * The panel demo of docs/panel/README.md on a running `npm start` with its PANEL_FLAGS line: a site
 * created without a node is placed by the scheduler, and a hand edit of its vhost is rewritten by a
 * pass once its policy is remediate.
 */
async function panelDemo(output: string, dataDir: string, env: NodeJS.ProcessEnv): Promise<void> {
  const login = /Panel login\s+(\S+) \/ (\S+)/.exec(output);
  assert.ok(login, `the banner shows the one-time panel login:\n${output.slice(-2000)}`);
  const admin = await signInFresh(`http://127.0.0.1:${env.PANEL_PORT}`, login[1], login[2]);
  const provider = await createOrgWithLogin(admin, { type: 'provider' });
  const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
  const domain = `${unique('demo-')}.example.com`;
  const created = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain });
  assert.equal(created.status, 201, JSON.stringify(created.json));
  await siteActive(customer.client, created.json.id, 60_000);
  const placed = await customer.client.get(`/v1/sites/${created.json.id}/placement`);
  assert.equal(placed.status, 200, JSON.stringify(placed.json));
  assert.equal(placed.json.mode, 'scheduled', `placed by the scheduler: ${JSON.stringify(placed.json)}`);
  assert.match(placed.json.reason, /chosen by the scheduler/, 'and says so');

  await setPolicy(admin, created.json.id, 'remediate');
  const vhost = path.join(dataDir, 'hosting', 'etc', 'nginx', 'sites', `${domain}.conf`);
  const rendered = fs.readFileSync(vhost, 'utf8');
  fs.writeFileSync(vhost, `${rendered}\n# a hand edit\n`);
  const pass = await runPass(admin);
  assert.equal(pass.mode, 'on', `the pass remediates (-reconcile on from PANEL_FLAGS): ${JSON.stringify(pass)}`);
  assert.equal(pass.remediated, 1, `one site rewritten: ${JSON.stringify(pass)}`);
  assert.equal(fs.readFileSync(vhost, 'utf8'), rendered, 'the drifted vhost is rewritten as the panel renders it');
}

describe('npm start as a service', function () {
  this.timeout(240_000);
  let dataDir: string;

  beforeEach(function () {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'lifecycle-'));
    fs.chmodSync(dataDir, 0o755);
  });

  afterEach(async function () {
    // whatever a failed test left behind
    for (const pid of servers(dataDir)) if (alive(pid)) process.kill(pid, 'SIGKILL');
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('SIGTERM to the npm process stops the system, PostgreSQL and Temporal within seconds', async function () {
    const s = start(await systemEnv(dataDir));
    await ready(s);
    const pids = servers(dataDir);
    assert.equal(pids.length, 2, 'PostgreSQL and Temporal pid files');
    assert.ok(pids.every(alive), `PostgreSQL and Temporal are running: pids ${pids.join(', ')}`);
    const tree = processesOf(dataDir);
    // (PHP-FPM runs one master per PHP site: none on a fresh start)
    assert.ok(tree.some((p) => /nginx/.test(p.cmd)) && tree.some((p) => /mariadbd/.test(p.cmd)), `the hosting node's nginx and MariaDB run: ${tree.map((p) => p.cmd).join(' | ')}`);
    const t0 = Date.now();
    s.child.kill('SIGTERM');
    await allGone(pids, 20_000);
    await s.exited;
    assert.ok(Date.now() - t0 < 20_000, `SIGTERM stopped everything within 20 s: ${Date.now() - t0} ms`);
    // issue 32 item 19: nothing of the tree outlives the stop (a PHP-FPM master once did)
    await allGone(tree.map((p) => p.pid), 5_000).catch(() => undefined);
    assert.deepEqual(processesOf(dataDir).map((p) => p.cmd), [], 'no process of this system is left');
  });

  it('Ctrl-C (SIGINT to the whole process group) stops every component in order, prints no stack trace and leaves no process (issue 32 item 19)', async function () {
    const s = start(await systemEnv(dataDir), true);
    await ready(s);
    const tree = processesOf(dataDir);
    assert.ok(tree.some((p) => /mariadbd/.test(p.cmd)), `the hosting node's MariaDB runs: ${tree.map((p) => p.cmd).join(' | ')}`);
    const before = s.output().length;
    process.kill(-s.child.pid!, 'SIGINT');
    await s.exited;
    await allGone(tree.map((p) => p.pid), 20_000).catch(() => undefined);
    assert.deepEqual(processesOf(dataDir).map((p) => p.cmd), [], 'no process of this system is left');
    const stopping = s.output().slice(before);
    assert.doesNotMatch(stopping, /^\s+at /m, `no stack trace while stopping:\n${stopping.slice(0, 3000)}`);
    assert.doesNotMatch(stopping, /"level":(40|50)/, `no warning or error while stopping:\n${stopping.slice(0, 3000)}`);
    assert.match(stopping, /"msg":"stopped"/, `the stop is reported once it is done:\n${stopping.slice(-2000)}`);
  });

  it('prints its banner without the bundler reports, and records its connection so the admin CLI finds it with only DATA_DIR (issue 23 defect 9); the documented PANEL_FLAGS demo remediates and places by the scheduler (issue 32 item 13)', async function () {
    const env = await systemEnv(dataDir);
    // the line of README.md and docs/panel/README.md, passed as npm start passes it
    env.PANEL_FLAGS = '-reconcile on -placement scheduled';
    const s = start(env);
    try {
      await ready(s);
      const before = s.output().split('Gateway      ')[0];
      assert.doesNotMatch(before, /webpack|workflow-bundle|asset /, before);
      const file = path.join(dataDir, 'connection.json');
      assert.equal(fs.statSync(file).mode & 0o777, 0o600, 'the connection file is readable by its owner only');
      const saved = JSON.parse(fs.readFileSync(file, 'utf8'));
      assert.equal(saved.DATABASE_URL, `postgres://postgres:postgres@127.0.0.1:${env.PG_PORT}/gateway`, "the connection file records the running system's database URL");
      assert.equal(saved.GATEWAY_VARIANT, 'credits', 'the connection file records the gateway variant');
      // The CLI with nothing but DATA_DIR reaches the running system's database (not the default port).
      const cliEnv: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, DATA_DIR: dataDir };
      const admin = (...args: string[]) =>
        new Promise<{ code: number; stdout: string }>((resolve) =>
          execFile(path.join(ROOT, 'node_modules', '.bin', 'tsx'), ['admin/cli.ts', ...args], { cwd: ROOT, env: cliEnv, timeout: 60_000 }, (err, stdout) =>
            resolve({ code: err ? Number(err.code) : 0, stdout }),
          ),
        );
      const models = await admin('model', 'list');
      assert.equal(models.code, 0, models.stdout);
      assert.ok(JSON.parse(models.stdout).models.some((m: { id: string }) => m.id === 'sim-gpt'), `sim-gpt is listed: ${models.stdout}`);
      const help = await admin('help');
      assert.equal(help.code, 0, "the CLI's help exits 0");
      assert.match(help.stdout, /^usage: npm run -s admin -- <command>/, 'the help opens with the usage line');
      for (const c of ['account create', 'key create', 'model set', 'provider set', 'report uncovered']) assert.ok(help.stdout.includes(`  ${c} [--`), c);
      await panelDemo(s.output(), dataDir, env);
    } finally {
      s.child.kill('SIGTERM');
      await s.exited;
    }
  });

  it('after a kill -9 of itself it starts again, stopping the servers the killed one left running', async function () {
    const env = await systemEnv(dataDir);
    const first = start(env);
    await ready(first);
    const left = servers(dataDir);
    const main = parentOf(pidIn(path.join(dataDir, 'temporal.pid'))!); // the node process that started them
    process.kill(main, 'SIGKILL');
    await first.exited;
    await new Promise((r) => setTimeout(r, 500));
    assert.ok(left.every(alive), 'the killed start left PostgreSQL and Temporal running');

    const second = start(env);
    await ready(second);
    assert.match(second.output(), /PostgreSQL left running by an earlier start that was killed/, 'the second start says it stopped the PostgreSQL the killed start left');
    assert.match(second.output(), /Temporal dev server left running by an earlier start that was killed/, 'the second start says it stopped the Temporal server the killed start left');
    assert.ok(!left.some(alive), 'the orphans were stopped');
    const now = servers(dataDir);
    second.child.kill('SIGTERM');
    await allGone(now, 20_000);
  });

  it('a failed start stops everything it had started and says why', async function () {
    const env = await systemEnv(dataDir);
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(Number(env.GATEWAY_PORT), '0.0.0.0', resolve));
    try {
      const s = start(env);
      // The servers it starts before the gateway's port fails, seen while it runs.
      const seen = new Set<number>();
      const watch = setInterval(() => servers(dataDir).forEach((p) => seen.add(p)), 50);
      const code = await s.exited;
      clearInterval(watch);
      assert.equal(code, 1, s.output());
      assert.match(s.output(), /npm start failed: .*EADDRINUSE/, 'the failure message names the port already in use');
      assert.doesNotMatch(s.output(), /undefined/, 'the failure message has no undefined in it');
      assert.equal(seen.size, 2, 'PostgreSQL and Temporal had started');
      await allGone([...seen], 5000);
    } finally {
      taken.close();
    }
  });
});
