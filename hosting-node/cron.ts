import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { cronSchedule, parseCronLine, type CronLine, type CronRun } from '../domain/panel/cron';
import { sitePaths } from '../domain/panel/node-config';
import type { SiteSpec } from '../domain/panel/node-ops';
import type { Logger } from '../platform/logger';
import { readIfExists, readJson, writeFileAtomic, writeJson } from './files';
import { inGroup } from './cgroups';
import type { SiteUser } from './site-users';

// The node's cron daemon (PANEL.md section 2): every minute it runs the due cron lines of each
// applied, unsuspended site with /bin/sh -c, as the site's own system user, in its home (the site
// folder), inside the site's control group, with a time limit per run and never two runs of the same
// line at once. `@reboot` lines run once per machine boot, as Debian's cron does. The last runs of
// each site (status, exit code, the tail of the output) are kept under <root>/state/ and reported to
// the panel with heartbeats.

/** Runs kept per site (on the node; the panel keeps as many). */
export const RUNS_KEPT = 20;
/** Output kept per run: its last bytes. */
const OUTPUT_KEPT = 16 * 1024;
/** A clock that jumped further forward than this runs only the current minute, not every minute missed. */
const CATCH_UP_MINUTES = 5;

export interface CronOptions {
  root: string;
  /** the sites the node applied (read at every minute) */
  sites: () => SiteSpec[];
  /** the user a site's lines run as; `null`: the site has no user (yet), its lines do not run */
  userOf: (siteId: string) => SiteUser | null;
  /** where a run writes its pid to enter the site's control group (none: the node enforces no limits) */
  procsFiles?: (site: SiteSpec) => string[];
  /** kill a run after this long (default 15 minutes) */
  timeoutMs?: number;
  /** the clock (default Date.now; tests move it and call tick) */
  now?: () => number;
  logger: Logger;
}

export interface CronDaemon {
  /** the kept runs of a site, newest first */
  runs(siteId: string): CronRun[];
  /** runs started or finished after `seq` (newest last) and the seq to ask from next time */
  changedSince(seq: number): { runs: CronRun[]; seq: number };
  /** runs what is due up to the current minute (the timer calls it at every minute) */
  tick(): void;
  /** stops scheduling and kills the runs in progress */
  stop(): Promise<void>;
}

const minuteOf = (ms: number) => Math.floor(ms / 60_000) * 60_000;

export function startCronDaemon(o: CronOptions): CronDaemon {
  const log = o.logger.child({ component: 'cron' });
  const now = o.now ?? Date.now;
  const timeoutMs = o.timeoutMs ?? 15 * 60_000;
  const runsFile = `${o.root}/state/cron-runs.json`;
  const kept = readJson<Record<string, CronRun[]>>(runsFile, {});
  // a run left `running` by a node that stopped: it was killed with the node
  for (const list of Object.values(kept)) for (const r of list) if (r.status === 'running') Object.assign(r, { status: 'failed', output: `${r.output}\n[the node stopped during this run]` });
  let seq = 0;
  const changed = new Map<string, number>();
  const touch = (r: CronRun) => changed.set(r.id, ++seq);
  for (const list of Object.values(kept)) for (const r of list) touch(r);
  const save = () => writeJson(runsFile, kept);

  const running = new Map<string, { pid: number; done: Promise<void> }>();
  const schedules = new Map<string, { parsed: CronLine; due: (m: Date) => boolean }>();
  const scheduleOf = (line: string) => {
    let s = schedules.get(line);
    if (!s) {
      const parsed = parseCronLine(line);
      // the node validated every applied line; one that no longer parses is skipped, never thrown
      if (typeof parsed === 'string') return null;
      s = { parsed, due: cronSchedule(parsed.when) };
      schedules.set(line, s);
    }
    return s;
  };

  const record = (r: CronRun) => {
    const list = (kept[r.siteId] ??= []);
    if (!list.includes(r)) list.unshift(r);
    for (const gone of list.splice(RUNS_KEPT)) changed.delete(gone.id);
    touch(r);
    save();
  };

  const runLine = (site: SiteSpec, line: string, parsed: CronLine) => {
    const user = o.userOf(site.id);
    const run: CronRun = { id: randomUUID(), siteId: site.id, line, startedAt: new Date(now()).toISOString(), finishedAt: null, status: 'running', exitCode: null, output: '', user: user?.name ?? '' };
    const key = `${site.id}\n${line}`;
    const finish = (status: CronRun['status'], exitCode: number | null, output: string) => {
      Object.assign(run, { status, exitCode, output: output.slice(-OUTPUT_KEPT), finishedAt: new Date().toISOString() });
      record(run);
    };
    if (!user) return finish('failed', null, "the site's system user does not exist on this node");
    if (running.has(key)) return finish('skipped', null, 'the previous run of this line is still running');
    const home = sitePaths(o.root, site.domain).siteDir;
    const self = os.userInfo().uid === user.uid;
    // in the site's group: entered as root, then setpriv takes the site user's ids (nothing runs in between)
    const files = o.procsFiles?.(site) ?? [];
    const asUser = self || !files.length ? [] : ['setpriv', `--reuid=${user.uid}`, `--regid=${user.gid}`, '--clear-groups'];
    const argv = inGroup(files, [...asUser, '/bin/sh', '-c', parsed.command]);
    const child = spawn(argv[0], argv.slice(1), {
      ...(self || files.length ? {} : { uid: user.uid, gid: user.gid }),
      cwd: home,
      env: { SHELL: '/bin/sh', PATH: '/usr/local/bin:/usr/bin:/bin', HOME: home, LOGNAME: user.name, USER: user.name },
      // its own process group, so a timeout or a stop kills whatever it started too
      detached: true,
      stdio: [parsed.stdin === null ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    record(run);
    let output = '';
    const collect = (d: Buffer) => void (output = (output + d.toString('utf8')).slice(-OUTPUT_KEPT));
    child.stdout!.on('data', collect);
    child.stderr!.on('data', collect);
    child.stdin?.on('error', () => {});
    child.stdin?.end(parsed.stdin ?? '');
    let timedOut = false;
    const killGroup = () => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // ended meanwhile
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
    }, timeoutMs);
    const done = new Promise<void>((resolve) => {
      child.once('error', (err) => {
        clearTimeout(timer);
        running.delete(key);
        finish('failed', null, `could not start: ${err.message}`);
        resolve();
      });
      child.once('close', (code, signal) => {
        clearTimeout(timer);
        running.delete(key);
        if (timedOut) finish('timeout', null, `${output}\n[killed after ${Math.round(timeoutMs / 1000)} s]`);
        else finish(code === 0 ? 'ok' : 'failed', code, signal ? `${output}\n[ended by ${signal}]` : output);
        resolve();
      });
    });
    if (child.pid) running.set(key, { pid: child.pid, done });
  };

  const runDue = (pick: (when: string, due: (m: Date) => boolean) => boolean) => {
    const sites = o.sites();
    // the runs of deleted sites go with them
    const ids = new Set(sites.map((s) => s.id));
    for (const id of Object.keys(kept)) {
      if (ids.has(id)) continue;
      for (const r of kept[id]) changed.delete(r.id);
      delete kept[id];
    }
    for (const site of sites) {
      if (site.suspended) continue;
      for (const line of site.cron) {
        const s = scheduleOf(line);
        if (s && pick(s.parsed.when, s.due)) {
          try {
            runLine(site, line, s.parsed);
          } catch (err) {
            log.warn({ err: (err as Error).message, site: site.id }, 'a cron line could not be run');
          }
        }
      }
    }
  };

  // @reboot: once per boot of the machine (the boot id the last run saw is kept under the root)
  const bootFile = `${o.root}/state/cron-boot-id`;
  const bootId = (readIfExists('/proc/sys/kernel/random/boot_id') ?? '').trim();
  if (bootId && readIfExists(bootFile)?.trim() !== bootId) {
    writeFileAtomic(bootFile, `${bootId}\n`, 0o600);
    runDue((when) => when === '@reboot');
  }

  let last = minuteOf(now());
  const tick = () => {
    const current = minuteOf(now());
    // a clock set back runs nothing until it passes the last minute run again
    if (current <= last) return;
    const from = current - last > CATCH_UP_MINUTES * 60_000 ? current : last + 60_000;
    for (let m = from; m <= current; m += 60_000) {
      const minute = new Date(m);
      runDue((_when, due) => due(minute));
    }
    last = current;
  };
  let timer: NodeJS.Timeout | null = null;
  let stopped = false;
  const next = () => {
    if (stopped) return;
    timer = setTimeout(() => {
      tick();
      next();
    }, minuteOf(Date.now()) + 60_000 - Date.now() + 20);
    timer.unref();
  };
  next();

  return {
    tick,
    runs: (siteId) => [...(kept[siteId] ?? [])],
    changedSince(since) {
      const ids = new Set([...changed].filter(([, s]) => s > since).map(([id]) => id));
      const runs = Object.values(kept).flat().filter((r) => ids.has(r.id));
      return { runs: runs.sort((a, b) => changed.get(a.id)! - changed.get(b.id)!), seq };
    },
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      const left = [...running.values()];
      for (const r of left) {
        try {
          process.kill(-r.pid, 'SIGKILL');
        } catch {
          // ended meanwhile
        }
      }
      await Promise.all(left.map((r) => r.done));
    },
  };
}
