import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { Pool } from 'undici';
import { startPanelApi, type PanelRuntime } from '../main/panel-api';
import { createDb, migrate, type Db } from '../platform/db';
import { writeFileAtomic } from '../hosting-node/files';
import { installedPhpVersions } from '../hosting-node/php-fpm';
import { createLogger } from '../platform/logger';
import { parsePanelFlags } from '../platform/panel-flags';
import { freePort } from '../platform/ports';
import { deriveKey } from '../platform/secret-box';
import { ensureHostingNode } from '../services/panel/nodes/nodes';
import { ensurePlatform } from '../services/panel/orgs/bootstrap';
import { specOf, type SiteRow } from '../services/panel/sites/sites';
import { appendResults, dirtyNote, firstSignIn, machine, onCleanup, progress, revision, runBench, send, startBackends } from './panel-harness';
import { readProcs, treeCpuSeconds, treeOf } from './proc';
import { fixed, num, table } from './stats';

// Reconciliation benchmark (issue 17: "a pass over 2,000 sites on the hosting node — pass duration
// and per-site cost"). Own embedded PostgreSQL and Temporal dev server; one panel process running
// the hosting node (real nginx, PHP-FPM for every 10th site when installed) and the panel worker,
// `-reconcile on`. BENCH_SITES sites are seeded as the node would have written them (rows in
// panel_sites, each site's files rendered by the node and written to disk, the node's record of
// them), then the panel restarts on that root. Pass 1: every site in sync (observe). Pass 2:
// BENCH_DRIFT vhosts edited by hand, half of those sites opted in to remediate. Each pass is
// started with POST /v1/reconcile/run and timed until its report is stored. Appends to
// bench/history/. `npx tsx bench/panel-reconcile.ts`.

const P = {
  sites: num('BENCH_SITES', 2000),
  batch: num('BENCH_RECONCILE_BATCH', 100),
  drift: num('BENCH_DRIFT', 100),
  budgetMs: num('BENCH_BUDGET_MS', 540_000),
};
const log = progress('bench:panel-reconcile');
const PASSWORD = 'bench reconcile password 2026';

async function main(): Promise<void> {
  const logger = createLogger('warn');
  const backends = await startBackends({ logger, log, prefix: 'bench-reconcile-', database: 'bench_reconcile' });
  const db: Db = createDb(backends.databaseUrl, 20);
  onCleanup('database pool', () => db.destroy());
  await migrate(db);
  const initial = await ensurePlatform(db);
  await ensureHostingNode(db);
  const root = path.join(backends.tmp, 'node');
  fs.mkdirSync(root, { mode: 0o755 });
  const webPort = await freePort();
  const taskQueue = `bench-reconcile-${randomUUID()}`;
  const start = () =>
    startPanelApi({
      db,
      databaseUrl: backends.databaseUrl,
      temporalAddress: backends.temporalAddress,
      namespace: 'default',
      logger,
      port: 0,
      host: '127.0.0.1',
      flags: parsePanelFlags(['-reconcile', 'on']),
      sealingKey: deriveKey('bench-reconcile'),
      sessionIdleMs: 3_600_000,
      sessionMaxMs: 86_400_000,
      nodeOps: { taskQueue },
      reconcile: { batchSize: P.batch },
      hosting: { root, webPort, webHost: '127.0.0.1', reportEveryMs: 3_600_000 },
    });

  // ---- seed: rows, then the node's files and its record, as its applies would have left them ----
  const php = installedPhpVersions().some((v) => v.version === '8.2') ? '8.2' : null;
  const platform = await db('panel_orgs').whereNull('parent_id').first('id');
  const rows = Array.from({ length: P.sites }, (_, i) => ({
    id: randomUUID(),
    org_id: platform.id,
    domain: `s${String(i).padStart(5, '0')}.bench-reconcile.test`,
    php_version: php && i % 10 === 0 ? php : null,
    cron: ['*/5 * * * * true'],
    node_name: 'hosting',
    status: 'active',
    quota_mb: 1024,
    generation: 1,
    applied_generation: 1,
    placement: JSON.stringify({ mode: 'hosting', node: 'hosting', reason: 'benchmark seed', decided_at: new Date().toISOString(), decided_by: 'bench' }),
  }));
  for (let i = 0; i < rows.length; i += 500) await db('panel_sites').insert(rows.slice(i, i + 500));
  const sites: SiteRow[] = await db('panel_sites').where({ node_name: 'hosting' }).orderBy('id');
  log(`seeding ${sites.length} sites (${sites.filter((s) => s.php_version).length} with PHP ${php ?? '(none installed)'})`);
  let panel: PanelRuntime = await start();
  const record: Record<string, unknown> = {};
  for (const s of sites) {
    const spec = specOf(s);
    for (const f of panel.hostingNode!.renderSite(spec)) writeFileAtomic(f.path, f.text);
    record[s.id] = spec;
  }
  await panel.close();
  fs.writeFileSync(path.join(root, 'state/sites.json'), JSON.stringify(record));
  const t0 = Date.now();
  panel = await start();
  onCleanup('panel', () => panel.close());
  log(`panel restarted on ${sites.length} sites in ${Date.now() - t0} ms`);

  const pool = new Pool(panel.url, { connections: 4 });
  onCleanup('http pool', () => pool.close());
  if (!initial) throw new Error('the benchmark database already had a platform');
  const cookie = await firstSignIn(pool, initial.username, initial.password, PASSWORD);
  const temporal = new Client({ connection: await Connection.connect({ address: backends.temporalAddress }) });
  onCleanup('temporal client', () => temporal.connection.close());

  const cpu = () => {
    const procs = readProcs();
    const own = process.cpuUsage();
    return {
      panel: (own.user + own.system) / 1e6,
      temporal: backends.temporalPid ? treeCpuSeconds(treeOf(procs, backends.temporalPid)) : NaN,
      pg: backends.postmasterPid ? treeCpuSeconds(treeOf(procs, backends.postmasterPid)) : NaN,
    };
  };
  const pass = async (label: string) => {
    const before = cpu();
    const t = process.hrtime.bigint();
    const r = await send(pool, 'POST', '/v1/reconcile/run', cookie);
    if (r.status !== 202) throw new Error(`run: ${r.status} ${r.text}`);
    const id: string = JSON.parse(r.text).pass.id;
    let row;
    for (;;) {
      row = await db('panel_reconcile_passes').where({ id }).first();
      if (row.status !== 'running') break;
      await new Promise((res) => setTimeout(res, 20));
    }
    const ms = Number(process.hrtime.bigint() - t) / 1e6;
    const after = cpu();
    if (row.status !== 'done') throw new Error(`pass ${id}: ${row.status} ${row.error}`);
    const history = await temporal.workflow.getHandle(`reconcile-${id}`).fetchHistory();
    log(`${label}: ${fixed(ms, 0)} ms, ${JSON.stringify(row.counts)}, ${row.remediated} rewritten`);
    return { label, ms, row, events: history.events?.length ?? 0, cpu: { panel: after.panel - before.panel, temporal: after.temporal - before.temporal, pg: after.pg - before.pg } };
  };

  const inSync = await pass('every site in sync');
  // drift: BENCH_DRIFT vhosts edited by hand; half of those sites opted in to remediate
  const drifted = sites.filter((_, i) => i % Math.floor(sites.length / P.drift) === 0).slice(0, P.drift);
  for (const s of drifted) fs.appendFileSync(path.join(root, 'etc/nginx/sites', `${s.domain}.conf`), '# edited by hand\n');
  const optedIn = drifted.filter((_, i) => i % 2 === 0);
  await db('panel_reconcile_sites').whereIn('site_id', optedIn.map((s) => s.id)).update({ policy: 'remediate' });
  const withDrift = await pass(`${drifted.length} drifted, ${optedIn.length} rewritten`);
  const again = await pass('after the rewrite');
  const rewrites = fs.readFileSync(path.join(root, 'state/reconcile.log'), 'utf8').trim().split('\n').length;

  const rev = revision(/^(activities|services|workflows|platform|domain|bench)\//);
  const rowsOut = [inSync, withDrift, again].map((p) => [
    p.label,
    fixed(p.ms / 1000, 2),
    fixed(p.ms / P.sites, 2),
    fixed((p.cpu.panel * 1000) / P.sites, 2),
    `${fixed(p.cpu.panel, 1)} / ${fixed(p.cpu.temporal, 1)} / ${fixed(p.cpu.pg, 1)}`,
    JSON.stringify(p.row.counts),
    p.row.remediated,
    p.events,
  ]);
  appendResults('panel-reconcile', 
    [
      `## Reconciliation pass over ${P.sites} sites on the hosting node (${new Date().toISOString().slice(0, 16)}Z, commit ${rev.commit}${dirtyNote(rev.dirty)})`,
      '',
      `${machine().join(', ')}; shared with other work. One panel process (API, hosting node with nginx${php ? ` and PHP-FPM ${php} for every 10th site` : ''}, panel worker), own PostgreSQL and Temporal dev server; batch ${P.batch} sites per activity (${Math.ceil(P.sites / P.batch)} batches); passes started with POST /v1/reconcile/run, timed until the report is stored.`,
      '',
      table(['pass', 'duration s', 'per site ms', 'panel CPU per site ms', 'CPU s panel / Temporal / PostgreSQL', 'counts', 'rewritten', 'history events'], rowsOut),
      '',
      `- Per site a pass renders the site's files from the panel's record, reads and hashes them on disk, and records the verdict (one upsert per batch of results, views and events). The rewrite pass wrote ${rewrites} sites' files back with one \`nginx -t\` and one reload per batch that held rewrites.`,
    ].join('\n'),
  );
}

runBench(main, { budgetMs: P.budgetMs, log });
