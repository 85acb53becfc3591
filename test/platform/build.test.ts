import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { temporal } from '@temporalio/proto';
import { NativeConnection, Worker } from '@temporalio/worker';
import { freePort } from '../../platform/ports';
import { WORKFLOW_DOMAINS, type createDomainWorker as CreateDomainWorker, type runWorker as RunWorker } from '../../workers/base';
import { env } from '../setup/env';

// npm run build (docs/configuration.md, Compiled build): JavaScript with source maps in dist/,
// workers that load their domain's prebuilt bundle instead of bundling at start, bin/ entries that
// run dist/. The build takes about a minute; dist/ is removed afterwards unless it was there before.

const ROOT = path.resolve(__dirname, '../..');
const DIST = path.join(ROOT, 'dist');

describe('compiled build (npm run build)', function () {
  let hadDist = false;

  before(async function () {
    this.timeout(600_000);
    hadDist = fs.existsSync(DIST);
    const { stdout } = await promisify(execFile)('npm', ['run', '-s', 'build'], { cwd: ROOT, maxBuffer: 1 << 20 });
    assert.match(stdout, /panel\.traced\.bundle\.js/, `the build reports every bundle it wrote: ${stdout}`);
  });

  after(function () {
    if (!hadDist) fs.rmSync(DIST, { recursive: true, force: true });
  });

  it('writes JavaScript with source maps, the assets the code reads, and a plain and a traced bundle per domain', function () {
    for (const file of ['main/start.js', 'main/start.js.map', 'main/panel-api-cli.js', 'migrations/20261122000001_gateway_core.js', 'api/gateway/installer/install.sh', 'api/panel/console/web/app.js', 'package.json']) {
      assert.ok(fs.existsSync(path.join(DIST, file)), `dist/${file}`);
    }
    assert.match(fs.readFileSync(path.join(DIST, 'main/start.js'), 'utf8'), /\/\/# sourceMappingURL=start\.js\.map\s*$/, 'compiled code points at its source map');
    for (const domain of WORKFLOW_DOMAINS) {
      for (const name of [`${domain}.bundle.js`, `${domain}.traced.bundle.js`]) assert.ok(fs.statSync(path.join(DIST, 'workflows', name)).size > 100_000, `dist/workflows/${name}`);
    }
  });

  it('a worker from dist/ loads its prebuilt bundle rather than bundling, and the bundles replay the committed histories', async function () {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- the compiled module, loaded beside the sources
    const dist = require(path.join(DIST, 'workers/base.js')) as { createDomainWorker: typeof CreateDomainWorker; runWorker: typeof RunWorker };
    const connection = await NativeConnection.connect({ address: env.temporalAddress });
    try {
      for (const domain of WORKFLOW_DOMAINS) {
        const worker = await dist.createDomainWorker({ domain, connection, namespace: 'default', taskQueue: `build-test-${domain}`, activities: {} });
        assert.deepEqual(worker.options.workflowBundle, { codePath: path.join(DIST, 'workflows', `${domain}.bundle.js`) }, `${domain}: the prebuilt bundle`);
        assert.equal(worker.options.workflowsPath, undefined, `${domain}: nothing to bundle at start`);
        await dist.runWorker(worker).stop();

        const dir = path.join(ROOT, 'test/histories', domain);
        const histories = fs.readdirSync(dir).filter((f) => f.endsWith('.json')).map((f) => {
          const saved = JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')) as { workflowId: string; protobuf: string };
          return { workflowId: saved.workflowId, history: temporal.api.history.v1.History.decode(Buffer.from(saved.protobuf, 'base64')) };
        });
        let replayed = 0;
        for await (const r of Worker.runReplayHistories({ workflowBundle: { codePath: path.join(DIST, 'workflows', `${domain}.bundle.js`) } }, histories)) {
          assert.equal(r.error, undefined, `${domain} ${r.workflowId}: ${String(r.error)}`);
          replayed++;
        }
        assert.ok(replayed > 0 && replayed === histories.length, `${domain}: ${replayed} of ${histories.length} committed histories replayed`);
      }
    } finally {
      await connection.close();
    }
  });

  it('bin/panel-api runs from dist/: it migrates a database the sources migrated, turns ready, and stops at SIGTERM', async function () {
    const port = await freePort();
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'build-test-'));
    fs.chmodSync(dataDir, 0o755); // the panel's hosting node under DATA_DIR must be enterable by www-data
    // what the process loaded, written when it exits: compiled modules, not TypeScript
    const loaded = path.join(dataDir, 'loaded.json');
    fs.writeFileSync(path.join(dataDir, 'loaded.cjs'), `process.on('exit', () => require('node:fs').writeFileSync(${JSON.stringify(loaded)}, JSON.stringify(Object.keys(require.cache))));`);
    const child = spawn(process.execPath, ['-r', path.join(dataDir, 'loaded.cjs'), path.join(ROOT, 'bin/panel-api.cjs'), 'serve'], {
      env: { ...process.env, DATABASE_URL: env.databaseUrl, TEMPORAL_ADDRESS: env.temporalAddress, PANEL_PORT: String(port), DATA_DIR: dataDir, LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      let ready: { status: number; body: unknown } | null = null;
      for (const deadline = Date.now() + 60_000; Date.now() < deadline && child.exitCode === null; await new Promise((r) => setTimeout(r, 200))) {
        const res = await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => null);
        if (res) {
          ready = { status: res.status, body: await res.json() };
          if (res.status === 200) break;
        }
      }
      assert.deepEqual(ready, { status: 200, body: { ready: true, postgres: 'up', temporal: 'up', draining: false } }, `panel-api from dist/ ready: ${output}`);
      child.kill('SIGTERM');
      assert.equal(await exited, 0, `panel-api stops cleanly at SIGTERM: ${output}`);
      const modules = JSON.parse(fs.readFileSync(loaded, 'utf8')) as string[];
      assert.ok(modules.includes(path.join(DIST, 'main/panel-api-cli.js')), 'the compiled entry point ran');
      assert.deepEqual(modules.filter((m) => m.endsWith('.ts')), [], 'no TypeScript was loaded');
    } finally {
      child.kill('SIGKILL');
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
  it('bin/worker and bin/gateway (GATEWAY_PROCESSES=2, node:cluster) run from dist/ and stop at SIGTERM', async function () {
    this.timeout(180_000);
    const port = await freePort();
    const roles = [
      { bin: 'bin/worker.cjs', args: ['--queues', 'media'], ready: 'worker ready', entry: 'main/worker.js' },
      { bin: 'bin/gateway.cjs', args: [], ready: 'gateway ready', entry: 'main/gateway-cli.js' },
    ];
    for (const role of roles) {
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'build-role-'));
      const loaded = path.join(dataDir, 'loaded.json');
      fs.writeFileSync(path.join(dataDir, 'loaded.cjs'), `process.on('exit', () => { if (require('node:cluster').isPrimary) require('node:fs').writeFileSync(${JSON.stringify(loaded)}, JSON.stringify(Object.keys(require.cache))); });`);
      const t0 = Date.now();
      const child = spawn(process.execPath, ['-r', path.join(dataDir, 'loaded.cjs'), path.join(ROOT, role.bin), ...role.args], {
        env: { ...process.env, DATABASE_URL: env.databaseUrl, TEMPORAL_ADDRESS: env.temporalAddress, GATEWAY_PORT: String(port), GATEWAY_PROCESSES: '2', GATEWAY_DRAIN_SECONDS: '1', DATA_DIR: dataDir, LOG_LEVEL: 'info' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      const ready = new Promise<void>((resolve) => child.stdout.on('data', (d) => {
        output += d;
        if (output.includes(`"msg":"${role.ready}"`)) resolve();
      }));
      child.stderr.on('data', (d) => (output += d));
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      try {
        await Promise.race([ready, exited.then((code) => assert.fail(`${role.bin} exited ${code} before it was ready: ${output}`))]);
        const rssMiB = Math.round(Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${child.pid}/status`, 'utf8'))![1]) / 1024);
        console.log(`      ${role.bin} from dist/: ready in ${Date.now() - t0} ms, primary RSS ${rssMiB} MiB`);
        if (role.bin === 'bin/gateway.cjs') {
          const res = await fetch(`http://127.0.0.1:${port}/readyz`);
          assert.equal(res.status, 200, `the gateway's children answer from dist/: ${output}`);
        }
        child.kill('SIGTERM');
        assert.equal(await exited, 0, `${role.bin} stops cleanly at SIGTERM: ${output}`);
        const modules = JSON.parse(fs.readFileSync(loaded, 'utf8')) as string[];
        assert.ok(modules.includes(path.join(DIST, role.entry)), `the compiled ${role.entry} ran`);
        assert.deepEqual(modules.filter((m) => m.endsWith('.ts')), [], 'no TypeScript was loaded');
      } finally {
        child.kill('SIGKILL');
        fs.rmSync(dataDir, { recursive: true, force: true });
      }
    }
  });
});
