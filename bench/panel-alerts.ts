import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { createDb, migrate } from '../platform/db';
import { freePort } from '../platform/ports';
import { startEmbeddedPostgres } from '../platform/postgres';
import { evaluateAlerts } from '../services/panel/alerts/evaluate';
import { nodeChart, RAW_DAYS } from '../services/panel/alerts/samples';
import { ensurePlatform } from '../services/panel/orgs/bootstrap';
import { appendResults, dirtyNote, loadText, machine, onCleanup, progress, revision, runBench } from './panel-harness';
import { fixed, num, summarize, table } from './stats';

// Alert evaluation cost (issue 17): 100 nodes with 1-minute samples (the last 2 days) and hourly
// rows (up to 14 days), plus accounts with disk and inode limits and sites with
// measured use, every built-in rule enabled. Each round rewrites every node's latest metrics (what
// 100 heartbeats do; CPU drawn so some nodes cross the threshold and flap) and runs one evaluation
// (sample, prune, set-based rules, alert transitions, events), as the alert-eval schedule does once
// per metrics interval. Also times chart reads. Starts its own embedded PostgreSQL (or uses
// DATABASE_URL, which must hold an empty panel). `npx tsx bench/panel-alerts.ts`; appends to
// bench/history/.

const P = {
  nodes: num('BENCH_ALERT_NODES', 100),
  days: num('BENCH_ALERT_DAYS', 14),
  accounts: num('BENCH_ALERT_ACCOUNTS', 200),
  sitesPerAccount: num('BENCH_ALERT_SITES_PER_ACCOUNT', 10),
  rounds: num('BENCH_ALERT_ROUNDS', 120),
  budgetMs: num('BENCH_BUDGET_MS', 600_000),
};

const log = progress('bench:panel-alerts');
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

async function main() {
  const logger = pino({ level: 'warn' });
  let url = process.env.DATABASE_URL;
  if (!url) {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-alerts-'));
    fs.chmodSync(tmp, 0o755);
    onCleanup('temp dir', async () => fs.rmSync(tmp, { recursive: true, force: true }));
    const port = await freePort();
    log(`starting embedded PostgreSQL on ${port}`);
    const pg = await startEmbeddedPostgres({ dir: path.join(tmp, 'pg'), port, database: 'bench_alerts', persistent: false, logger });
    onCleanup('PostgreSQL', () => pg.stop());
    url = pg.url;
  }
  const db = createDb(url, 5);
  onCleanup('database pool', () => db.destroy());
  await migrate(db);
  await ensurePlatform(db);
  const { commit, dirty } = revision(/^(bench\/panel-alerts|services\/panel\/alerts|domain\/panel\/alerts|migrations)/);

  log(`seeding ${P.nodes} nodes × ${P.days} days of 1-minute samples, ${P.accounts} accounts × ${P.sitesPerAccount} sites`);
  const t0 = Date.now();
  const platform = await db('panel_orgs').where({ type: 'platform' }).first('id', 'path');
  await db.raw(
    `INSERT INTO panel_nodes (name, kind, state, last_heartbeat_at, metrics_at, metrics)
     SELECT 'node-' || i, 'agent', 'alive', now(), now() - interval '1 minute', '{}'::jsonb FROM generate_series(1, ?) i`,
    [P.nodes],
  );
  // as the retention leaves them: 1-minute samples for the last RAW_DAYS, hourly rows before that
  const rawDays = Math.min(P.days, RAW_DAYS);
  await db.raw(
    `INSERT INTO panel_node_samples (node_name, at, cpu_percent, load1, load5, load15, memory_used_percent, rootfs_used_percent, uptime_seconds, rx_bytes, tx_bytes)
     SELECT 'node-' || i, date_trunc('minute', now()) - make_interval(mins => m), random() * 100, random() * 4, 1, 1, 40 + random() * 40, 50, 86400, 0, 0
     FROM generate_series(1, ?) i CROSS JOIN generate_series(1, ?) m`,
    [P.nodes, rawDays * 1440 - 60],
  );
  await db.raw(
    `INSERT INTO panel_node_samples_hourly (node_name, hour, samples, cpu_percent, cpu_percent_max, load1, load5, load15, memory_used_percent, rootfs_used_percent)
     SELECT 'node-' || i, date_trunc('hour', now()) - make_interval(hours => h), 60, random() * 100, 100, random() * 4, 1, 1, 40 + random() * 40, 50
     FROM generate_series(1, ?::int) i CROSS JOIN generate_series(?::int, ?::int) h`,
    [P.nodes, rawDays * 24 + 1, P.days * 24],
  );
  // accounts (customers) with limits directly below the platform, each with sites spread over the nodes
  await db.raw(
    `INSERT INTO panel_orgs (id, parent_id, path, depth, type, name, limits)
     SELECT id, ?::uuid, ? || id || '/', 1, 'customer', 'account ' || n, jsonb_build_object('disk_mb', 1000, 'inodes', 100000)
     FROM (SELECT gen_random_uuid() AS id, n FROM generate_series(1, ?) n) x`,
    [platform.id, platform.path, P.accounts],
  );
  await db.raw(
    `INSERT INTO panel_sites (id, org_id, domain, node_name, quota_mb, status, placement)
     SELECT gen_random_uuid(), o.id, 's' || s || '-' || o.id || '.example.com', 'node-' || (1 + (row_number() OVER () % ?)), 200, 'active', '{}'::jsonb
     FROM panel_orgs o CROSS JOIN generate_series(1, ?) s WHERE o.type = 'customer'`,
    [P.nodes, P.sitesPerAccount],
  );
  const samples = Number((await db.raw('SELECT count(*) AS n FROM panel_node_samples')).rows[0].n);
  const hours = Number((await db.raw('SELECT count(*) AS n FROM panel_node_samples_hourly')).rows[0].n);
  const sites = Number((await db.raw('SELECT count(*) AS n FROM panel_sites')).rows[0].n);
  await db.raw('ANALYZE');
  const seedS = (Date.now() - t0) / 1000;
  log(`seeded ${samples} samples, ${hours} hourly rows and ${sites} sites in ${seedS.toFixed(0)} s`);

  // One round = 100 heartbeats (one UPDATE) then one evaluation.
  const heartbeats = () =>
    db.raw(
      `UPDATE panel_nodes n SET last_heartbeat_at = now(), metrics_at = clock_timestamp(),
         metrics = jsonb_build_object('bootId', 'b', 'uptimeSeconds', 86400, 'cpuPercent', CASE WHEN random() < 0.05 THEN 95 ELSE random() * 60 END,
           'load', jsonb_build_array(random() * 4, 1, 1), 'memory', jsonb_build_object('totalMb', 8192, 'availableMb', 2000 + random() * 4000),
           'rootFs', jsonb_build_object('totalMb', 100000, 'freeMb', 30000), 'network', jsonb_build_object('rxBytes', 0, 'txBytes', 0), 'sampledAt', now()),
         site_usage = (SELECT coalesce(jsonb_agg(jsonb_build_object('siteId', s.id, 'diskMb', (abs(hashtext(s.id::text)) % 200) + random() * 4, 'inodes', 1000)), '[]'::jsonb) FROM panel_sites s WHERE s.node_name = n.name)
       WHERE kind = 'agent'`,
    );
  // time of each statement of the evaluation, by its first words
  const started = new Map<string, number>();
  const bySql = new Map<string, number>();
  let timing = false;
  db.on('query', (q: { __knexQueryUid: string }) => timing && started.set(q.__knexQueryUid, performance.now()));
  db.on('query-response', (_r: unknown, q: { __knexQueryUid: string; sql: string }) => {
    const t = started.get(q.__knexQueryUid);
    if (t === undefined) return;
    started.delete(q.__knexQueryUid);
    const key = q.sql.replace(/\s+/g, ' ').trim().slice(0, 70);
    bySql.set(key, (bySql.get(key) ?? 0) + performance.now() - t);
  });
  const evalMs: number[] = [];
  const hbMs: number[] = [];
  let fired = 0;
  let reopened = 0;
  let resolved = 0;
  let events = 0;
  let observed = 0;
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < P.rounds; i++) {
    const h = performance.now();
    await heartbeats();
    hbMs.push(performance.now() - h);
    timing = i > 0;
    const r = await evaluateAlerts(db);
    timing = false;
    if (i > 0) evalMs.push(r.ms); // the first round opens the initial alerts
    fired += r.fired;
    reopened += r.reopened;
    resolved += r.resolved;
    events += r.events;
    observed += r.observed;
  }
  const cpu = process.cpuUsage(cpu0);
  const alerts = Number((await db.raw('SELECT count(*) AS n FROM panel_alerts')).rows[0].n);
  const e = summarize(evalMs);
  const hb = summarize(hbMs);

  const chartMs = async (hours: number, step: number) => {
    const ms: number[] = [];
    const to = new Date();
    const from = new Date(to.getTime() - hours * 3_600_000);
    let points = 0;
    for (let i = 0; i < 20; i++) {
      const t = performance.now();
      const c = await nodeChart(db, `node-${1 + (i % P.nodes)}`, { from: from.toISOString(), to: to.toISOString(), step: String(step) });
      ms.push(performance.now() - t);
      points = c.points.length;
    }
    return { ...summarize(ms), points };
  };
  const c1h = await chartMs(1, 60);
  const c1d = await chartMs(24, 300);
  const c14d = await chartMs(14 * 24, 3600);

  appendResults('panel-alerts', 
    [
      `## Panel: alert evaluation at ${P.nodes} nodes × 1-minute samples (${new Date().toISOString().slice(0, 10)}, commit ${commit}${dirtyNote(dirty)})`,
      '',
      `Machine: ${machine().join(', ')}; load before ${loadText(os.loadavg())}. PostgreSQL: embedded (same box). ${P.nodes} nodes × ${P.days} days of metrics as the retention keeps them: ${samples.toLocaleString('en')} 1-minute sample rows (the last ${rawDays} days) and ${hours.toLocaleString('en')} hourly rows (before that), ${P.accounts} accounts with disk and inode limits, ${sites} sites with measured use; every built-in rule enabled (for-times as built in). Seeding took ${seedS.toFixed(0)} s.`,
      '',
      table(
        ['per round (n = ' + evalMs.length + ')', 'p50 ms', 'p90 ms', 'p99 ms', 'mean ms'],
        [
          ['100 heartbeats (one UPDATE of every node record, with site usage)', fixed(hb.p50), fixed(hb.p90), fixed(hb.p99), fixed(mean(hbMs))],
          ['evaluation: sample + prune + rules + transitions + events', fixed(e.p50), fixed(e.p90), fixed(e.p99), fixed(mean(evalMs))],
        ],
      ),
      '',
      table(
        ['chart read (one node, 20 reads)', 'points', 'p50 ms', 'p99 ms'],
        [
          ['1 hour, step 60 s', c1h.points, fixed(c1h.p50), fixed(c1h.p99)],
          ['1 day, step 300 s', c1d.points, fixed(c1d.p50), fixed(c1d.p99)],
          ['14 days, step 3600 s', c14d.points, fixed(c14d.p50), fixed(c14d.p99)],
        ],
      ),
      '',
      `- Over ${P.rounds} rounds: ${observed} conditions held in all (mean ${fixed(observed / P.rounds)} per round), ${fired} alerts opened, ${reopened} re-opened, ${resolved} resolved, ${events} events; ${alerts} alert rows at the end. Node CPU drawn above 90 % in 5 % of heartbeats, so CPU alerts stay pending (for-time 300 s); each site's measured use stays near its own level (0-100 % of its 200 MB quota, ±2 %), so soft-quota alerts open in the first round (not timed) and those near 80 % or 100 % flap.`,
      `- Where an evaluation's time goes (mean ms per round, by statement): ${[...bySql.entries()].sort((a, b) => b[1] - a[1]).slice(0, 6).map(([k, v]) => `\`${k}…\` ${fixed(v / evalMs.length)}`).join('; ')}.`,
      `- The benchmark process (knex, pg driver) used ${fixed((cpu.user + cpu.system) / 1000 / P.rounds)} ms of CPU per round; the rest is PostgreSQL's.`,
      `- At a 60 s metrics interval an evaluation of p50 ${fixed(e.p50)} ms is ${fixed((e.p50 / 60_000) * 100, 3)} % of the interval.`,
    ].join('\n'),
  );
}

runBench(main, { budgetMs: P.budgetMs, log });
