import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import { installTemporalRuntime } from '../../platform/temporal-metrics';
import { seedSimulatorCatalog } from '../../simulator/seed';
import { createDb, migrate } from '../../platform/db';
import { pruneSiteUsers } from '../../platform/hosting-node/site-users';
import { createLogger } from '../../platform/logger';
import { freePort } from '../../platform/ports';
import { startEmbeddedPostgres, type EmbeddedDatabase } from '../../platform/postgres';
import { startTemporalDevServer, type DevServer } from '../../platform/temporal-server';
import { startSimulator } from '../../simulator/server';
import { workflowsPath, type WorkflowDomain } from '../../workers/base';
import { env } from './env';

// One PostgreSQL, one Temporal dev server and one simulator for the whole run, on free ports.
// Torn down even when tests fail.


export { freePort };

let pg: EmbeddedDatabase | undefined;
let temporal: DevServer | undefined;
let tmp: string | undefined;

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
      startEmbeddedPostgres({ dir: path.join(tmp, 'pg'), port: pgPort, database: 'gateway_test', persistent: false, logger }).then((s) => (pg = s)),
      startTemporalDevServer({ port: temporalPort, namespace: 'default', logger }).then((s) => (temporal = s)),
      Promise.all([bundle('credits'), bundle('media'), bundle('testruns'), bundle('panel')]),
    ]);
    const failed = started.find((r) => r.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
    const [db, dev] = [pg!, temporal!];
    const [credits, media, testruns, panel] = (started[2] as PromiseFulfilledResult<Awaited<ReturnType<typeof bundle>>[]>).value;
    env.databaseUrl = db.url;
    env.temporalAddress = dev.address;
    env.bundles = { credits, media, testruns, panel };
    env.logger = logger;
    env.db = createDb(db.url, 30);
    await migrate(env.db);
    env.simulator = await startSimulator({ port: 0 });
    await seedSimulatorCatalog(env.db, env.simulator.url);
  },
  async afterAll(this: Mocha.Context) {
    this.timeout(60_000);
    await env.simulator?.close().catch(() => {});
    await env.db?.destroy().catch(() => {});
    await temporal?.stop().catch(() => {});
    await pg?.stop().catch(() => {});
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
    // the system users of sites whose test node roots are gone (tests drop roots without deleting every site)
    await pruneSiteUsers({}).catch(() => {});
  },
};
