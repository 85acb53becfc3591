import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Client, Connection, ScheduleNotFoundError, WorkflowNotFoundError } from '@temporalio/client';
import { HOLD_SWEEPER_SCHEDULE_ID } from '../../domain/credits/reservation';
import { createDb, migrate } from '../../platform/db';
import { SINGLETON_LOCKS } from '../../platform/leader';
import { freePort } from '../../platform/ports';
import { env } from '../setup/env';

// Issue 35 items 1 and 2: the roles as commands, each started alone against DATABASE_URL and
// TEMPORAL_ADDRESS. Two `worker --queues credits` processes: one keeps the credits schedules (the
// singleton's advisory lock); kill -9 it and the other takes over within seconds. `gateway` with
// GATEWAY_PROCESSES=2: two API processes on one port, each its own liveness row; kill -9 one, the
// requests keep being answered and the primary starts another.

const ROOT = path.join(__dirname, '../..');

interface Role {
  child: ChildProcess;
  lines: Array<Record<string, unknown>>;
  exited: Promise<number | null>;
  /** resolves with the first log line (as it arrives) that matches */
  waitFor(what: string, match: (l: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
}

function startRole(entry: string, args: string[], extraEnv: Record<string, string>): Role {
  const child = spawn(process.execPath, ['--require', 'tsx/cjs', path.join(ROOT, entry), ...args], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: env.databaseUrl, TEMPORAL_ADDRESS: env.temporalAddress, LOG_LEVEL: 'info', ...extraEnv },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: Array<Record<string, unknown>> = [];
  const waiters = new Set<() => void>();
  let buffered = '';
  let stderr = '';
  child.stdout!.on('data', (d) => {
    buffered += String(d);
    for (let i = buffered.indexOf('\n'); i >= 0; i = buffered.indexOf('\n')) {
      const line = buffered.slice(0, i);
      buffered = buffered.slice(i + 1);
      try {
        lines.push({ ...JSON.parse(line), at: Date.now() });
      } catch {
        // not a log line
      }
    }
    for (const w of waiters) w();
  });
  child.stderr!.on('data', (d) => (stderr += String(d)));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const waitFor = (what: string, match: (l: Record<string, unknown>) => boolean, timeoutMs = 90_000) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const check = () => {
        const hit = lines.find(match);
        if (!hit) return;
        done();
        resolve(hit);
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`${entry}: no '${what}' within ${timeoutMs} ms; stderr: ${stderr.slice(-2000)}`));
      }, timeoutMs);
      const onExit = (code: number | null) => {
        done();
        reject(new Error(`${entry} exited ${code} before '${what}'; stderr: ${stderr.slice(-2000)}`));
      };
      const done = () => {
        clearTimeout(timer);
        waiters.delete(check);
        child.off('exit', onExit);
      };
      waiters.add(check);
      child.once('exit', onExit);
      check();
    });
  return { child, lines, exited, waitFor };
}

const keepsCredits = (l: Record<string, unknown>) => l.singleton === 'creditsSchedules' && l.msg === 'schedules kept';

async function lockHolders(): Promise<number> {
  const [classid, objid] = SINGLETON_LOCKS.creditsSchedules;
  const { rows } = await env.db.raw(`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND classid = ? AND objid = ? AND objsubid = 2 AND granted`, [classid, objid]);
  return rows[0].n;
}

describe('roles as commands (issue 35 items 1 and 2)', function () {
  this.timeout(240_000);
  const started: Role[] = [];
  let temporal: Client;

  before(async () => {
    temporal = new Client({ connection: await Connection.connect({ address: env.temporalAddress }) });
  });

  after(async () => {
    for (const r of started) r.child.kill('SIGKILL');
    // The schedule the workers kept lives in the shared dev server: later test files must not meet it.
    await temporal.schedule.getHandle(HOLD_SWEEPER_SCHEDULE_ID).delete().catch((err) => assert.ok(err instanceof ScheduleNotFoundError, `deleting the schedule: ${String(err)}`));
    await temporal.workflow.getHandle('hold-sweep').terminate('test over').catch((err) => assert.ok(err instanceof WorkflowNotFoundError || /already completed/.test(String(err)), `ending a sweep: ${String(err)}`));
    await temporal.connection.close();
  });

  it('two workers: exactly one keeps the credits schedules; kill -9 it and the other takes over within seconds', async () => {
    const a = startRole('main/worker.ts', ['--queues', 'credits'], {});
    const b = startRole('main/worker.ts', ['--queues', 'credits'], {});
    started.push(a, b);
    for (const r of [a, b]) {
      const starting = await r.waitFor('starting', (l) => l.msg === 'starting');
      assert.deepEqual(starting.queues, ['credits'], 'the worker says which queues it runs');
      assert.deepEqual(starting.schedules, ['creditsSchedules'], 'and which schedule group it competes for');
      await r.waitFor('worker ready', (l) => l.msg === 'worker ready');
    }
    const leaders = [a, b].filter((r) => r.lines.some(keepsCredits));
    assert.equal(leaders.length, 1, 'exactly one worker keeps the schedules');
    assert.equal(await lockHolders(), 1, 'one session holds the lock');
    const [leader, other] = leaders[0] === a ? [a, b] : [b, a];
    assert.ok(await temporal.schedule.getHandle(HOLD_SWEEPER_SCHEDULE_ID).describe(), 'the leader created the hold sweeper schedule');
    await temporal.schedule.getHandle(HOLD_SWEEPER_SCHEDULE_ID).delete();

    const killedAt = Date.now();
    leader.child.kill('SIGKILL');
    const took = await other.waitFor('takes over', keepsCredits, 30_000);
    const takeoverMs = Number(took.at) - killedAt;
    console.log(`      takeover of the credits schedules after kill -9: ${takeoverMs} ms`);
    assert.ok(takeoverMs < 10_000, `the other worker took over within seconds (${takeoverMs} ms)`);
    assert.ok(await temporal.schedule.getHandle(HOLD_SWEEPER_SCHEDULE_ID).describe(), 'the new keeper created the schedule again');
    assert.equal(await lockHolders(), 1, 'one session holds the lock after the takeover');

    other.child.kill('SIGTERM');
    assert.equal(await other.exited, 0, 'SIGTERM stops a worker cleanly');
    assert.equal(await lockHolders(), 0, 'a stopped keeper frees the lock');
  });

  it('GATEWAY_PROCESSES=2: one port, a liveness row each; kill -9 one child, requests keep being answered, it comes back', async () => {
    const port = await freePort();
    const g = startRole('main/gateway-cli.ts', [], { GATEWAY_PROCESSES: '2', GATEWAY_PORT: String(port), GATEWAY_DRAIN_SECONDS: '1' });
    started.push(g);
    const starting = await g.waitFor('starting', (l) => l.msg === 'starting');
    assert.equal(starting.processes, 2, 'the gateway says how many API processes it runs');
    const ready = await g.waitFor('gateway ready', (l) => l.msg === 'gateway ready');
    const pids = ready.pids as number[];
    assert.equal(pids.length, 2, 'two children');
    const rowPids = async () => (await env.db('api_processes').where('heartbeat_at', '>', env.db.raw("now() - interval '10 seconds'")).pluck('pid')).map(Number);
    assert.deepEqual((await rowPids()).filter((p) => pids.includes(p)).sort(), [...pids].sort(), 'each child has its own liveness row');

    const url = `http://127.0.0.1:${port}`;
    const served = new Set<number>();
    for (let i = 0; i < 20; i++) {
      const res = await fetch(`${url}/healthz`);
      assert.equal(res.status, 200, 'answered');
    }
    // Keep requests going through the kill: each with a short timeout, so a lost one shows.
    const results: Array<{ at: number; ok: boolean }> = [];
    let going = true;
    const load = (async () => {
      while (going) {
        const at = Date.now();
        const ok = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(2000) }).then((r) => r.status === 200, () => false);
        results.push({ at, ok });
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    await new Promise((r) => setTimeout(r, 500));
    const killedAt = Date.now();
    process.kill(pids[0], 'SIGKILL');
    const back = await g.waitFor('a new child', (l) => l.msg === 'gateway: child listening' && !pids.includes(Number(l.pid)), 60_000);
    const backMs = Number(back.at) - killedAt;
    await new Promise((r) => setTimeout(r, 1000));
    going = false;
    await load;
    const after = results.filter((r) => r.at > killedAt);
    const lost = after.filter((r) => !r.ok);
    console.log(`      kill -9 of one of 2 API processes: ${after.length} requests after it, ${lost.length} lost; a new process listened after ${backMs} ms`);
    assert.ok(after.length > 20, `requests kept going (${after.length})`);
    // A connection the primary hands to the child in the instant it dies is lost with it; every later one is answered.
    assert.ok(lost.every((r) => r.at < killedAt + 1000), `only requests of the first second may be lost: ${JSON.stringify(lost.map((r) => r.at - killedAt))}`);
    assert.ok(lost.length <= 2, `at most a connection or two lost (${lost.length})`);
    const newPid = Number(back.pid);
    assert.ok((await rowPids()).includes(newPid), 'the new child has its liveness row');
    for (let i = 0; i < 10; i++) served.add((await fetch(`${url}/healthz`)).status);
    assert.deepEqual([...served], [200], 'answered after the restart');

    g.child.kill('SIGTERM');
    assert.equal(await g.exited, 0, 'SIGTERM stops the primary after its children drained');
    for (const pid of [pids[1], newPid]) assert.throws(() => process.kill(pid, 0), /ESRCH/, `child ${pid} has exited`);
    assert.deepEqual((await rowPids()).filter((p) => p === pids[1] || p === newPid), [], 'children stopped cleanly remove their rows');
  });
  it('roles starting together on an empty database migrate one after another (the migrations lock)', async () => {
    const name = `roles_${randomUUID().replace(/-/g, '')}`;
    await env.db.raw(`CREATE DATABASE ${name}`);
    const dbs = [0, 1, 2].map(() => createDb(env.databaseUrl.replace(/\/[^/]+$/, `/${name}`), 5));
    try {
      const results = await Promise.allSettled(dbs.map((db) => migrate(db)));
      assert.deepEqual(results.map((r) => (r.status === 'rejected' ? String(r.reason) : 'ok')), ['ok', 'ok', 'ok'], 'none meets "migration table is already locked"');
      const files = fs.readdirSync(path.join(ROOT, 'migrations')).filter((f) => f.endsWith('.ts'));
      const { rows } = await dbs[0].raw('SELECT count(*)::int AS n FROM knex_migrations');
      assert.equal(rows[0].n, files.length, 'every migration applied once');
    } finally {
      await Promise.all(dbs.map((db) => db.destroy()));
      await env.db.raw(`DROP DATABASE ${name} WITH (FORCE)`);
    }
  });

  it('a process of the previous release starts on a schema a newer release expanded (rolling upgrade)', async () => {
    const future = '29991231000000_from_the_next_release.ts';
    await env.db('knex_migrations').insert({ name: future, batch: 999, migration_time: new Date() });
    const db = createDb(env.databaseUrl, 2);
    try {
      await migrate(db);
      assert.ok(await db('knex_migrations').where({ name: future }).first(), 'the newer migration stays recorded');
    } finally {
      await db.destroy();
      await env.db('knex_migrations').where({ name: future }).delete();
    }
  });

  it('worker --queues refuses the panel queue and unknown names, saying why', async () => {
    for (const [queues, says] of [['credits,panel', /panel queue runs in panel-api/], ['credits,nope', /unknown queue 'nope'/]] as const) {
      const r = startRole('main/worker.ts', ['--queues', queues], {});
      let stderr = '';
      r.child.stderr!.on('data', (d) => (stderr += String(d)));
      assert.equal(await r.exited, 1, `--queues ${queues} stops the worker`);
      assert.match(stderr, says, `--queues ${queues}: ${stderr}`);
      assert.match(stderr, /usage: worker/, 'with the usage');
    }
  });
});
