import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import pg from 'pg';
import { loadConfig, ConfigError, poolSize } from '../../platform/config';
import { databaseUrl } from '../../platform/database-url';
import { checkDatabase, createDb } from '../../platform/db';
import { createLogger } from '../../platform/logger';
import { freePort } from '../../platform/ports';
import { startEmbeddedPostgres, type EmbeddedDatabase } from '../../platform/postgres';
import { checkTemporalTls, temporalConnectOptions, temporalSecurity } from '../../platform/temporal-connection';
import { TestCa, type Pem } from '../helpers/pki';
import { env } from '../setup/env';

// Encrypted connections (docs/configuration.md): Temporal over TLS and mTLS with a server name
// override, PostgreSQL with sslmode require / verify-ca / verify-full, every certificate made here.
// The Temporal dev server has no TLS flags, so a TLS-terminating front (node:tls, asking for a
// client certificate) forwards to the suite's dev server; PostgreSQL runs with ssl=on itself.

const ROOT = path.join(__dirname, '../..');
// How Node says a certificate has no trusted signer, by whether the server sent its chain.
const NOT_SIGNED = '(unable to verify the first certificate \\(UNABLE_TO_VERIFY_LEAF_SIGNATURE\\)|self-signed certificate in certificate chain \\(SELF_SIGNED_CERT_IN_CHAIN\\))';

describe('encrypted connections (TLS to Temporal and PostgreSQL)', function () {
  this.timeout(120_000);
  let dir: string;
  let ca: TestCa;
  let wrongCa: TestCa;
  let client: Pem;
  let front: tls.Server;
  let frontAddress: string;
  let db: EmbeddedDatabase;
  let dbPort: number;
  const defaultSsl = pg.defaults.ssl;

  before(async function () {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tls-test-'));
    fs.chmodSync(dir, 0o755);
    ca = new TestCa(dir, 'good');
    wrongCa = new TestCa(dir, 'wrong');
    // The Temporal front's certificate names only temporal.internal: reached at 127.0.0.1, the
    // client needs the server name override.
    const temporalCert = ca.issue('temporal', ['temporal.internal'], 'server');
    client = ca.issue('worker', ['worker-1'], 'client');
    const [host, port] = env.temporalAddress.split(':');
    front = tls.createServer(
      { cert: fs.readFileSync(temporalCert.cert), key: fs.readFileSync(temporalCert.key), ca: fs.readFileSync(ca.cert), requestCert: true, rejectUnauthorized: true, ALPNProtocols: ['h2'] },
      (socket) => {
        const upstream = net.connect(Number(port), host);
        socket.pipe(upstream).pipe(socket);
        const close = () => (socket.destroy(), upstream.destroy());
        socket.on('error', close);
        upstream.on('error', close);
      },
    );
    front.on('tlsClientError', () => undefined); // refused handshakes are what some tests make
    await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
    frontAddress = `127.0.0.1:${(front.address() as net.AddressInfo).port}`;

    // PostgreSQL with ssl=on; its certificate names localhost (not 127.0.0.1): verify-full must be
    // given the name, verify-ca accepts the address.
    const dbCert = ca.issue('postgres', ['localhost'], 'server');
    if (process.getuid?.() === 0) {
      // run as root, PostgreSQL runs as 'postgres', which must own its key (mode 600)
      const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
      fs.chownSync(dbCert.key, uid, uid);
      fs.chmodSync(dbCert.key, 0o600);
    }
    dbPort = await freePort();
    db = await startEmbeddedPostgres({
      dir: path.join(dir, 'pg'),
      port: dbPort,
      database: 'tls',
      persistent: false,
      logger: createLogger('error'),
      flags: ['-c', 'ssl=on', '-c', `ssl_cert_file=${dbCert.cert}`, '-c', `ssl_key_file=${dbCert.key}`],
    });
  });

  after(async function () {
    pg.defaults.ssl = defaultSsl;
    await new Promise((r) => front?.close(r));
    await db?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const temporalEnv = (extra: Record<string, string> = {}) => ({ TEMPORAL_ADDRESS: frontAddress, TEMPORAL_TLS_SERVER_CA_CERT_PATH: ca.cert, TEMPORAL_TLS_CLIENT_CERT_PATH: client.cert, TEMPORAL_TLS_CLIENT_KEY_PATH: client.key, TEMPORAL_TLS_SERVER_NAME: 'temporal.internal', ...extra });
  const configError = (vars: Record<string, string>) => {
    try {
      loadConfig(vars);
    } catch (err) {
      assert.ok(err instanceof ConfigError, `a ConfigError: ${String(err)}`);
      return err.message;
    }
    assert.fail(`loadConfig accepted ${JSON.stringify(vars)}`);
  };

  it('loadConfig refuses incomplete or wrong TLS settings, naming the variable and the file', function () {
    assert.match(configError({ TEMPORAL_ADDRESS: frontAddress, TEMPORAL_TLS_CLIENT_CERT_PATH: client.cert }), /TEMPORAL_TLS_CLIENT_KEY_PATH: the client certificate and its key \(mTLS\) are set together/, 'cert without key');
    const other = ca.issue('other', ['other'], 'client');
    assert.match(configError(temporalEnv({ TEMPORAL_TLS_CLIENT_KEY_PATH: other.key })), new RegExp(`TEMPORAL_TLS_CLIENT_KEY_PATH: is not the key of the certificate in ${client.cert}`), 'a key of another certificate');
    assert.match(configError(temporalEnv({ TEMPORAL_TLS_SERVER_CA_CERT_PATH: client.key })), new RegExp(`TEMPORAL_TLS_SERVER_CA_CERT_PATH: ${client.key} is not a PEM certificate`), 'a key given as the CA');
    assert.match(configError(temporalEnv({ TEMPORAL_TLS_SERVER_CA_CERT_PATH: path.join(dir, 'missing.pem') })), /TEMPORAL_TLS_SERVER_CA_CERT_PATH: cannot read .*missing\.pem: ENOENT/, 'a missing CA file');
    assert.match(configError({ TEMPORAL_TLS_SERVER_CA_CERT_PATH: ca.cert }), /TEMPORAL_ADDRESS: must be set with TLS settings/, 'TLS to the embedded dev server');
    assert.match(configError(temporalEnv({ TEMPORAL_TLS: 'false' })), /TEMPORAL_TLS: is false while TLS settings/, 'TLS off with TLS files');
    assert.match(configError({ DATABASE_URL: db.url, DATABASE_SSLMODE: 'require', DATABASE_SSL_CA: ca.cert }), /DATABASE_SSL_CA: is used by DATABASE_SSLMODE verify-ca or verify-full only/, 'a CA that require would not check');
    assert.match(configError({ DATABASE_URL: `${db.url}?sslmode=require`, DATABASE_SSLMODE: 'verify-full' }), /DATABASE_SSLMODE: is set while DATABASE_URL has its own ssl parameters/, 'two sources of sslmode');
    assert.match(configError({ DATABASE_SSLMODE: 'verify-full' }), /DATABASE_URL: must be set with DATABASE_SSLMODE/, 'TLS to the embedded PostgreSQL');
    assert.match(configError({ DATABASE_SSLMODE: 'verify-all' }), /DATABASE_SSLMODE/, 'an unknown sslmode');
  });

  it('pool size per role: DB_POOL_MAX_<ROLE>, else DB_POOL_MAX', function () {
    const c = loadConfig({ DB_POOL_MAX: '7', DB_POOL_MAX_GATEWAY: '40', DB_POOL_MAX_WORKER: '12' });
    assert.deepEqual([poolSize(c, 'gateway'), poolSize(c, 'worker'), poolSize(c, 'panel')], [40, 12, 7], 'gateway, worker, panel pools');
  });

  it('Temporal over mTLS with a server name override: client and worker connections work', async function () {
    const address = frontAddress;
    const security = temporalSecurity(loadConfig(temporalEnv()));
    await checkTemporalTls(address, security);
    const connection = await Connection.connect(temporalConnectOptions(address, security));
    try {
      const ns = await connection.workflowService.describeNamespace({ namespace: 'default' });
      assert.equal(ns.namespaceInfo?.name, 'default', 'the dev server answers through TLS');
    } finally {
      await connection.close();
    }
    const native = await NativeConnection.connect(temporalConnectOptions(address, security));
    try {
      const info = await native.workflowService.getSystemInfo({});
      assert.ok(info.capabilities, 'the worker connection (Rust core) answers through TLS');
    } finally {
      await native.close();
    }
  });

  it('Temporal Cloud style: an API key rides on the TLS connection', async function () {
    const security = temporalSecurity(loadConfig(temporalEnv({ TEMPORAL_API_KEY: 'test-api-key' })));
    assert.equal(security.apiKey, 'test-api-key', 'the API key is passed to the connection');
    const connection = await Connection.connect(temporalConnectOptions(frontAddress, security));
    try {
      const ns = await connection.workflowService.describeNamespace({ namespace: 'default' });
      assert.equal(ns.namespaceInfo?.name, 'default', 'the connection with an API key answers (the dev server does not check keys)');
    } finally {
      await connection.close();
    }
  });

  it('a wrong CA, a missing client certificate or a name the certificate lacks stop the start with what failed', async function () {
    const check = (vars: Record<string, string>) => checkTemporalTls(frontAddress, temporalSecurity(loadConfig(temporalEnv(vars))));
    await assert.rejects(check({ TEMPORAL_TLS_SERVER_CA_CERT_PATH: wrongCa.cert }), (err: Error) => {
      assert.match(err.message, new RegExp(`^Temporal at ${frontAddress} \\(TLS, server name temporal.internal, CA from TEMPORAL_TLS_SERVER_CA_CERT_PATH, client certificate\\): ${NOT_SIGNED}: the server's certificate is not signed by the CA in TEMPORAL_TLS_SERVER_CA_CERT_PATH$`), err.message);
      return true;
    }, 'wrong CA');
    await assert.rejects(checkTemporalTls(frontAddress, temporalSecurity(loadConfig({ TEMPORAL_ADDRESS: frontAddress, TEMPORAL_TLS_SERVER_CA_CERT_PATH: ca.cert }))), (err: Error) => {
      assert.match(err.message, new RegExp(`^Temporal at ${frontAddress} \\(TLS, CA from TEMPORAL_TLS_SERVER_CA_CERT_PATH\\): .*(Hostname/IP does not match certificate's altnames|IP: 127.0.0.1 is not in the cert's list)`), err.message);
      return true;
    }, 'no server name override: the certificate does not name 127.0.0.1');
    const withoutClientCertificate = temporalSecurity(loadConfig({ TEMPORAL_ADDRESS: frontAddress, TEMPORAL_TLS_SERVER_CA_CERT_PATH: ca.cert, TEMPORAL_TLS_SERVER_NAME: 'temporal.internal' }));
    await assert.rejects(checkTemporalTls(frontAddress, withoutClientCertificate), /certificate required|closed the connection|handshake failure/, 'no client certificate: refused by the server');
  });

  /** Runs `fn` with this process's pg connections on DATABASE_SSLMODE's TLS, as a role would run. */
  async function withDatabase(vars: Record<string, string>, fn: (url: string) => Promise<void>) {
    try {
      await fn(databaseUrl(loadConfig(vars)));
    } finally {
      pg.defaults.ssl = defaultSsl; // the suite's other connections stay plain
    }
  }
  const sslInUse = async (url: string) => {
    const k = createDb(url, 1, 0);
    try {
      await checkDatabase(k);
      return (await k.raw('SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()')).rows[0] as { ssl: boolean; version: string };
    } finally {
      await k.destroy();
    }
  };

  it('PostgreSQL: require encrypts, verify-ca checks the signer, verify-full the name too', async function () {
    const byName = db.url.replace('127.0.0.1', 'localhost');
    for (const [mode, url] of [['require', db.url], ['verify-ca', db.url], ['verify-full', byName]] as const) {
      await withDatabase({ DATABASE_URL: url, DATABASE_SSLMODE: mode, ...(mode === 'require' ? {} : { DATABASE_SSL_CA: ca.cert }) }, async (u) => {
        const s = await sslInUse(u);
        assert.equal(s.ssl, true, `${mode}: the session is encrypted`);
        assert.match(s.version, /^TLSv1\.[23]$/, `${mode}: TLS version`);
      });
    }
    // LISTEN connections and the relay use plain pg clients with the URL: encrypted too.
    await withDatabase({ DATABASE_URL: byName, DATABASE_SSLMODE: 'verify-full', DATABASE_SSL_CA: ca.cert }, async (u) => {
      const c = new pg.Client({ connectionString: u });
      await c.connect();
      try {
        assert.equal((await c.query('SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()')).rows[0].ssl, true, 'a LISTEN-style client is encrypted');
      } finally {
        await c.end();
      }
    });
    await withDatabase({ DATABASE_URL: db.url }, async (u) => assert.equal((await sslInUse(u)).ssl, false, 'no DATABASE_SSLMODE: plain, as before'));
  });

  it('PostgreSQL: a wrong CA or a host the certificate does not name stop the start, naming the server', async function () {
    await withDatabase({ DATABASE_URL: db.url.replace('127.0.0.1', 'localhost'), DATABASE_SSLMODE: 'verify-full', DATABASE_SSL_CA: wrongCa.cert }, async (u) => {
      await assert.rejects(sslInUse(u), new RegExp(`^Error: PostgreSQL at localhost:${dbPort}/tls \\(TLS, verified\\): unable to verify the first certificate \\(UNABLE_TO_VERIFY_LEAF_SIGNATURE\\): the server's certificate is not signed by the CA in DATABASE_SSL_CA`), 'wrong CA');
    });
    await withDatabase({ DATABASE_URL: db.url, DATABASE_SSLMODE: 'verify-full', DATABASE_SSL_CA: ca.cert }, async (u) => {
      await assert.rejects(sslInUse(u), new RegExp(`^Error: PostgreSQL at 127.0.0.1:${dbPort}/tls \\(TLS, verified\\): Hostname/IP does not match certificate's altnames: IP: 127.0.0.1 is not in the cert's list`), 'verify-full with an address the certificate lacks');
    });
  });

  it('panel-api serve runs on TLS to both (mTLS to Temporal, verify-full to PostgreSQL), and a wrong CA stops it naming the host', async function () {
    const ports = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort()]);
    const dataDir = path.join(dir, 'data');
    fs.mkdirSync(dataDir, { mode: 0o755 });
    const roleEnv = {
      ...process.env,
      ...temporalEnv(),
      DATABASE_URL: db.url.replace('127.0.0.1', 'localhost'),
      DATABASE_SSLMODE: 'verify-full',
      DATABASE_SSL_CA: ca.cert,
      DATA_DIR: dataDir,
      LOG_LEVEL: 'warn',
      PANEL_PORT: String(ports[0]),
      PANEL_HOSTING_WEB_PORT: String(ports[1]),
      PANEL_HOSTING_TLS_PORT: String(ports[2]),
      PANEL_HOSTING_DB_PORT: String(ports[3]),
      PANEL_NODE_API_PORT: String(ports[4]),
    };
    const run = (vars: Record<string, string>) => {
      const child = spawn(process.execPath, ['--require', 'tsx/cjs', path.join(ROOT, 'main/panel-api-cli.ts'), 'serve'], { cwd: ROOT, env: { ...roleEnv, ...vars }, stdio: ['ignore', 'pipe', 'pipe'] });
      let output = '';
      child.stdout.on('data', (d) => (output += d));
      child.stderr.on('data', (d) => (output += d));
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      return { child, exited, output: () => output };
    };

    const wrongDb = run({ DATABASE_SSL_CA: wrongCa.cert });
    assert.equal(await wrongDb.exited, 1, `a wrong database CA stops the start: ${wrongDb.output()}`);
    assert.match(wrongDb.output(), new RegExp(`PostgreSQL at localhost:${dbPort}/tls \\(TLS, verified\\): unable to verify the first certificate \\(UNABLE_TO_VERIFY_LEAF_SIGNATURE\\): the server's certificate is not signed by the CA in DATABASE_SSL_CA`), 'the message names the server and what failed');
    const wrongTemporal = run({ TEMPORAL_TLS_SERVER_CA_CERT_PATH: wrongCa.cert });
    assert.equal(await wrongTemporal.exited, 1, `a wrong Temporal CA stops the start: ${wrongTemporal.output()}`);
    assert.match(wrongTemporal.output(), new RegExp(`Temporal at ${frontAddress} \\(TLS, server name temporal.internal, CA from TEMPORAL_TLS_SERVER_CA_CERT_PATH, client certificate\\): ${NOT_SIGNED}: the server's certificate is not signed by the CA in TEMPORAL_TLS_SERVER_CA_CERT_PATH`), `the message names the address and what failed: ${wrongTemporal.output()}`);

    const good = run({});
    try {
      let ready: { status: number; body: unknown } | null = null;
      for (const deadline = Date.now() + 90_000; Date.now() < deadline && good.child.exitCode === null; await new Promise((r) => setTimeout(r, 300))) {
        const res = await fetch(`http://127.0.0.1:${ports[0]}/readyz`).catch(() => null);
        if (res) {
          ready = { status: res.status, body: await res.json() };
          if (res.status === 200) break;
        }
      }
      assert.deepEqual(ready, { status: 200, body: { ready: true, postgres: 'up', temporal: 'up', draining: false } }, `panel-api ready over TLS: ${good.output()}`);
      const check = new pg.Client({ connectionString: db.url });
      await check.connect();
      try {
        const r = await check.query("SELECT count(*)::int AS plain FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.datname = 'tls' AND NOT s.ssl AND a.pid <> pg_backend_pid()");
        assert.equal(r.rows[0].plain, 0, 'every connection of the panel to PostgreSQL is encrypted');
      } finally {
        await check.end();
      }
      good.child.kill('SIGTERM');
      assert.equal(await good.exited, 0, `panel-api stops cleanly: ${good.output()}`);
    } finally {
      good.child.kill('SIGKILL');
    }
  });
});
