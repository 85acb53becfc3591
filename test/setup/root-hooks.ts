import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import { installTemporalRuntime } from '../../platform/temporal-metrics';
import { seedSimulatorCatalog } from '../../simulator/seed';
import { createDb, migrate, type Db } from '../../platform/db';
import { pruneSiteUsers } from '../../hosting-node/site-users';
import { createLogger } from '../../platform/logger';
import { freePort } from '../../platform/ports';
import { startEmbeddedPostgres, type EmbeddedDatabase } from '../../platform/postgres';
import { startTemporalDevServer, type DevServer } from '../../platform/temporal-server';
import { startSimulator } from '../../simulator/server';
import { workflowsPath, type WorkflowDomain } from '../../workers/base';
import { env } from './env';

// One PostgreSQL, one Temporal dev server and one simulator for the whole run, on free ports.
// Torn down even when tests fail. Each test file gets its own database, cloned from a migrated
// and seeded template before the file's first hook, so suites never see each other's rows.


export { freePort };

let pg: EmbeddedDatabase | undefined;
let temporal: DevServer | undefined;
let tmp: string | undefined;
let admin: Db | undefined;
const TEMPLATE = 'gateway_template';
/** every file's pool, kept open until the run ends: a file's stray background work never hits a closed pool */
const pools: Db[] = [];

/**
 * Puts a hook before the first hook of each top-level suite that, once per test file, clones the
 * template into the file's own database and points `env` at it (on every suite of the file, so a
 * `--grep` that skips the first still gets it). Pools idle down to no connection.
 */
function giveEachFileItsDatabase(root: Mocha.Suite, templateUrl: string): void {
  const names = new Map<string, string>();
  let current: string | undefined;
  for (const suite of root.suites) {
    if (!suite.file) continue;
    const file = suite.file;
    if (!names.has(file)) names.set(file, `test_${names.size + 1}`);
    const name = names.get(file)!;
    suite.beforeAll(`own database for ${path.basename(file)}`, async function () {
      if (current === name) return;
      this.timeout(60_000);
      await admin!.raw(`CREATE DATABASE ${name} TEMPLATE ${TEMPLATE}`);
      current = name;
      env.databaseUrl = templateUrl.replace(/\/[^/]+$/, `/${name}`);
      env.db = createDb(env.databaseUrl, 30, 0);
      pools.push(env.db);
    });
    // Mocha appends hooks; this one must run before the suite's own.
    const hooks = (suite as unknown as { _beforeAll: unknown[] })._beforeAll;
    hooks.unshift(hooks.pop());
  }
}

export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(180_000);
    const logger = createLogger(process.env.TEST_LOG_LEVEL ?? 'error');
    installTemporalRuntime({ logger: new DefaultLogger('WARN'), metrics: true }); // SDK metrics on /metrics, as METRICS defaults
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-test-'));
    fs.chmodSync(tmp, 0o755);
    const [pgPort, temporalPort] = await Promise.all([freePort(), freePort()]);
    const quiet = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} } as never;
    const bundle = (domain: WorkflowDomain) => bundleWorkflowCode({ workflowsPath: workflowsPath(domain), logger: quiet });
    // Every start is awaited, even when one fails, so afterAll stops whichever servers came up.
    const started = await Promise.allSettled([
      startEmbeddedPostgres({ dir: path.join(tmp, 'pg'), port: pgPort, database: TEMPLATE, persistent: false, logger }).then((s) => (pg = s)),
      startTemporalDevServer({ port: temporalPort, namespace: 'default', logger }).then((s) => (temporal = s)),
      Promise.all([bundle('credits'), bundle('media'), bundle('testruns'), bundle('panel')]),
    ]);
    const failed = started.find((r) => r.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
    const [db, dev] = [pg!, temporal!];
    const [credits, media, testruns, panel] = (started[2] as PromiseFulfilledResult<Awaited<ReturnType<typeof bundle>>[]>).value;
    env.temporalAddress = dev.address;
    env.bundles = { credits, media, testruns, panel };
    env.logger = logger;
    env.simulator = await startSimulator({ port: 0 });
    const template = createDb(db.url, 2);
    await migrate(template);
    await seedSimulatorCatalog(template, env.simulator.url);
    await template.destroy(); // a template must have no sessions while it is cloned
    admin = createDb(db.url.replace(/\/[^/]+$/, '/postgres'), 1);
    giveEachFileItsDatabase(this.test!.parent!, db.url);
  },
  async afterAll(this: Mocha.Context) {
    this.timeout(60_000);
    await env.simulator?.close().catch(() => {});
    await Promise.all(pools.map((p) => p.destroy().catch(() => {})));
    await admin?.destroy().catch(() => {});
    await temporal?.stop().catch(() => {});
    await pg?.stop().catch(() => {});
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
    // the system users of sites whose test node roots are gone (tests drop roots without deleting every site)
    await pruneSiteUsers({}).catch(() => {});
  },
};
