import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { createDb, migrate } from '../platform/db';
import { createLogger } from '../platform/logger';
import { runMonthClose } from '../services/panel/billing/client';
import { recordHour } from '../services/panel/billing/metering';
import { runWorker } from '../workers/base';
import { createBillingWorker } from '../workers/panel-billing';
import { appendResults, dirtyNote, loadText, machine, onCleanup, progress, revision, runBench, startBackends } from './panel-harness';
import { SEED_DEFAULTS, seedPanel } from './panel-seed';
import { num } from './stats';

// Billing benchmark (issue 18): meters one hour for BENCH_ORGS orgs (10,000: the seeded tree of
// bench/panel-seed.ts, every org below the platform billed by a plan of its parent) and
// BENCH_SITES sites (100,000, spread over the customers and over 10 labelled nodes), then repeats
// the hour (a no-op), and closes a month for BENCH_CLOSE_ORGS customers (1,000) through
// `month-close-<org>-<YYYY-MM>` workflows on a billing worker, with BENCH_CLOSE_HOURS metered hours
// in that month. Durations and rows written; appends a section to bench/history/. Its own
// embedded PostgreSQL and Temporal dev server (bench/panel-harness.ts).
//   npx tsx bench/panel-billing.ts

const P = {
  orgs: num('BENCH_ORGS', 10_000),
  sites: num('BENCH_SITES', 100_000),
  databases: num('BENCH_DATABASES', 10_000),
  closeOrgs: num('BENCH_CLOSE_ORGS', 1_000),
  closeHours: num('BENCH_CLOSE_HOURS', 24),
};
const log = progress('billing');
const NODES = 10;
const HOUR0 = '2030-03-01T00';

const ms = (t0: number) => Math.round(performance.now() - t0);

async function main() {
  const { commit, dirty } = revision(/^(bench\/panel-billing|services\/panel\/billing|domain\/panel\/billing|migrations)/);
  const logger = createLogger('error');
  const backends = await startBackends({ logger, log, prefix: 'billing-bench-', database: 'billing_bench' });
  const db = createDb(backends.databaseUrl, 10);
  onCleanup('database pool', () => db.destroy());
  await migrate(db);
  const loadStart = os.loadavg();

  log(`seeding ${P.orgs} orgs`);
  const seeded = await seedPanel(db, { ...SEED_DEFAULTS, orgs: P.orgs, logins: P.orgs });
  const t0 = performance.now();
  for (let i = 0; i < NODES; i++) {
    await db('panel_nodes').insert({ name: `bench-${i}`, kind: 'agent', logical_region: i < 5 ? 'eu' : 'us', zone: `z${i % 3}`, roles: ['web', 'db'] });
  }
  // one plan per org with orgs below it; every org below the platform billed by its parent's plan
  await db.raw(
    `INSERT INTO panel_billing_plans (id, owner_org_id, name, currency, minor_units, base_price, account_price, rates_text, rates)
     SELECT gen_random_uuid(), o.id, 'Standard', 'EUR', 2, 20, 3, ?, ?::jsonb FROM panel_orgs o WHERE EXISTS (SELECT 1 FROM panel_orgs c WHERE c.parent_id = o.id)`,
    ['node=bench-0 5 2 0.5\nregion=eu 4 2 0.4\ndefault 3 1 0.3', JSON.stringify([{ line: 1, selector: { key: 'node', value: 'bench-0' }, website: '5', database: '2', gib_disk: '0.5' }, { line: 2, selector: { key: 'region', value: 'eu' }, website: '4', database: '2', gib_disk: '0.4' }, { line: 3, selector: 'default', website: '3', database: '1', gib_disk: '0.3' }])],
  );
  await db.raw(
    `INSERT INTO panel_billing_assignments (org_id, plan_id, effective_from)
     SELECT o.id, p.id, ?::timestamptz FROM panel_orgs o JOIN panel_billing_plans p ON p.owner_org_id = o.parent_id`,
    [`${HOUR0}:00:00Z`],
  );
  await db.raw(
    `WITH c AS (SELECT array_agg(id ORDER BY id) AS ids FROM panel_orgs WHERE type = 'customer')
     INSERT INTO panel_sites (id, org_id, domain, node_name, status, quota_mb, placement)
     SELECT gen_random_uuid(), c.ids[1 + g % cardinality(c.ids)], 'site' || g || '.bench.test', 'bench-' || (g % ${NODES}), CASE WHEN g % 20 = 0 THEN 'suspended' ELSE 'active' END, 512 + (g % 4) * 512, '{}'
     FROM generate_series(0, ? - 1) g, c`,
    [P.sites],
  );
  await db.raw(
    `WITH c AS (SELECT array_agg(id ORDER BY id) AS ids FROM panel_orgs WHERE type = 'customer')
     INSERT INTO panel_databases (id, org_id, node_name, name, db_user, status)
     SELECT gen_random_uuid(), c.ids[1 + g % cardinality(c.ids)], 'bench-' || (g % ${NODES}), 'db' || g, 'u' || g, 'active' FROM generate_series(0, ? - 1) g, c`,
    [P.databases],
  );
  await db.raw('ANALYZE');
  const setupMs = ms(t0);
  const billed = Number((await db('panel_billing_assignments').count('* as n').first())!.n);
  log(`set up in ${setupMs} ms: ${billed} billed orgs, ${P.sites} sites, ${P.databases} databases`);

  // one hour, at full size
  const tm = performance.now();
  const first = await recordHour(db, HOUR0);
  const meterMs = ms(tm);
  log(`hour ${HOUR0}: ${meterMs} ms, ${first.orgs} org rows, ${first.sites} site rows, ${first.databases} database rows`);
  const tr = performance.now();
  const repeat = await recordHour(db, HOUR0);
  const repeatMs = ms(tr);
  const size = (await db.raw(`SELECT pg_size_pretty(sum(pg_total_relation_size(c))::bigint) AS s FROM unnest(array['panel_meter_orgs','panel_meter_sites','panel_meter_databases']::regclass[]) c`)).rows[0].s;

  // the month to close: BENCH_CLOSE_HOURS hours of it metered for BENCH_CLOSE_ORGS customers only
  // (the rows of the full tree for a whole month would not fit a few minutes on two cores)
  const closeOrgs: string[] = (await db('panel_orgs').where({ type: 'customer' }).orderBy('id').limit(P.closeOrgs).select('id')).map((r) => r.id);
  const tc = performance.now();
  await db.raw(
    `INSERT INTO panel_meter_orgs (hour, org_id, plan_id, billed_by, org_status, accounts)
     SELECT '2030-02-01'::timestamptz + h * interval '1 hour', m.org_id, m.plan_id, m.billed_by, m.org_status, m.accounts
     FROM panel_meter_orgs m, generate_series(0, ? - 1) h WHERE m.hour = ? AND m.org_id = ANY(?::uuid[])`,
    [P.closeHours, `${HOUR0}:00:00Z`, closeOrgs],
  );
  for (const t of ['panel_meter_sites', 'panel_meter_databases']) {
    const [item, extra] = t === 'panel_meter_sites' ? ['site_id', ', status, quota_mb'] : ['database_id', ''];
    await db.raw(
      `INSERT INTO ${t} (hour, org_id, ${item}, node_name, region, physical_region, zone, cell${extra})
       SELECT '2030-02-01'::timestamptz + h * interval '1 hour', m.org_id, m.${item}, m.node_name, m.region, m.physical_region, m.zone, m.cell${extra.replace(/, /g, ', m.')}
       FROM ${t} m, generate_series(0, ? - 1) h WHERE m.hour = ? AND m.org_id = ANY(?::uuid[])`,
      [P.closeHours, `${HOUR0}:00:00Z`, closeOrgs],
    );
  }
  await db.raw('ANALYZE');
  log(`February: ${P.closeHours} hours for ${closeOrgs.length} orgs copied in ${ms(tc)} ms`);

  const connection = await NativeConnection.connect({ address: backends.temporalAddress });
  onCleanup('worker connection', () => connection.close());
  const taskQueue = `billing-bench-${randomUUID()}`;
  const worker = await createBillingWorker({ connection, namespace: 'default', taskQueue, db, clock: () => new Date('2030-03-01T00:30:00Z') });
  const running = runWorker(worker);
  onCleanup('billing worker', () => running.stop());
  const client = new Client({ connection: await Connection.connect({ address: backends.temporalAddress }) });
  onCleanup('client', () => client.connection.close());
  const tw = performance.now();
  const results = await Promise.all(closeOrgs.map((id) => runMonthClose(client, taskQueue, id, '2030-02')));
  const closeMs = ms(tw);
  const statements = Number((await db('panel_statements').count('* as n').first())!.n);
  const tw2 = performance.now();
  await Promise.all(closeOrgs.slice(0, 100).map((id) => runMonthClose(client, taskQueue, id, '2030-02')));
  const againMs = ms(tw2);
  const sample = results[0];

  appendResults('panel-billing', 
    [
      `## Panel billing: one metered hour for ${P.orgs.toLocaleString('en')} orgs / ${P.sites.toLocaleString('en')} sites, a month closed for ${closeOrgs.length.toLocaleString('en')} orgs — ${new Date().toISOString()} · commit ${commit}${dirtyNote(dirty)}`,
      '',
      `${machine().join(' · ')} · load average ${loadText(loadStart)} at start, ${loadText(os.loadavg())} at end · own embedded PostgreSQL and Temporal dev server · \`npx tsx bench/panel-billing.ts\``,
      '',
      '| step | duration | rows written |',
      '| --- | --- | --- |',
      `| seed: ${seeded.counts.orgs} orgs, ${billed} billed by their parent's plan, ${P.sites} sites on ${NODES} labelled nodes, ${P.databases} databases | ${setupMs} ms (plus tree ${seeded.ms.total.toFixed(0)} ms) | — |`,
      `| meter one hour (recordHour: one transaction, 3 set-based INSERT … SELECT) | ${meterMs} ms | ${first.orgs + first.sites + first.databases + 1} (${first.orgs} org-hours, ${first.sites} site-hours: a site counts once per billed org above it, ${first.databases} database-hours, 1 hour row); ${size} on disk |`,
      `| the same hour again (a no-op) | ${repeatMs} ms | 0 (already: ${repeat.already}) |`,
      `| close February for ${closeOrgs.length} customers, ${P.closeHours} metered hours each (${closeOrgs.length} month-close workflows started at once, one worker) | ${closeMs} ms (${((closeOrgs.length / closeMs) * 1000).toFixed(1)} closes/s) | ${statements} statements |`,
      `| close 100 of them again (same statements returned) | ${againMs} ms | 0 |`,
      '',
      `Sample statement: ${sample.meteredHours} metered hours, totals ${JSON.stringify(sample.totals)}. The month's hours are copies of the metered hour${P.closeHours < 672 ? ` (scaled down: ${P.closeHours} of February's 672, to fit a few minutes on this shared 2-core machine)` : ' (all 672 of February)'}.`,
    ].join('\n'),
  );
}

runBench(main, { budgetMs: 20 * 60_000, log });
