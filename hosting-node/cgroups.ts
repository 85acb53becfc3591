import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { NO_SITE_LIMITS, type EnforcedLimits, type GroupUsage, type SiteLimits } from '../domain/panel/node-ops';
import type { Logger } from '../platform/logger';
import { sleep } from './processes';

// One control group per site (PANEL.md section 2, issue 34 §1), behind one interface for both
// layouts: cgroup v1 (a hierarchy per controller under /sys/fs/cgroup/<controller>) and the unified
// v2 tree (/sys/fs/cgroup with cgroup.controllers). A node claims only what a probe group it created
// at start accepted: a limit it cannot write is reported as not enforced, never pretended.

export interface Cgroups {
  layout: 'v1' | 'v2' | null;
  enforced: EnforcedLimits;
  /** the group's settings as reconciliation compares them: one `name=value` line per enforced limit */
  render(limits: SiteLimits): string;
  /** creates or updates the group `name` with `limits` (only what the node enforces) */
  apply(name: string, limits: SiteLimits): void;
  /** the group's settings as on the kernel, rendered like render(); null: no such group */
  read(name: string): string | null;
  /** where a process writes its pid to enter the group (one file per hierarchy) */
  procsFiles(name: string): string[];
  usage(name: string): GroupUsage | null;
  /** kills what is still in the group, then removes it */
  remove(name: string): Promise<void>;
  /** a path naming the group (reconciliation compares it like a managed file) */
  pathOf(name: string): string;
  /** the group a pathOf() path names; null: not a group path */
  nameOf(file: string): string | null;
  /** removes this node's base group (after its sites' groups were removed) */
  close(): void;
  /** the site groups this node has (one name per group) */
  names(): string[];
}

const NONE: EnforcedLimits = { cpu: false, memory: false, pids: false, io: false };
const PERIOD_US = 100_000;
const MB = 1048576;

/** A missing or unwritable file means "not here": the callers decide what that costs. */
const tryRead = (f: string): string | null => {
  try {
    return fs.readFileSync(f, 'utf8').trim();
  } catch {
    return null;
  }
};

/** `major:minor` of the whole disk holding `dir` (throttling rules name disks, not partitions); null: no block device. */
export function diskOf(dir: string): string | null {
  const dev = fs.statSync(dir).dev;
  const major = Math.floor(dev / 256) & 0xfff;
  const minor = (dev & 0xff) | ((Math.floor(dev / 4096) & ~0xff) >>> 0);
  const sys = `/sys/dev/block/${major}:${minor}`;
  if (!fs.existsSync(sys)) return null;
  if (!fs.existsSync(`${sys}/partition`)) return `${major}:${minor}`;
  return tryRead(`${path.dirname(fs.realpathSync(sys))}/dev`);
}

/** The settings text both layouts render and read back (so a drifted kernel value shows as a diff line). */
function renderLimits(limits: SiteLimits, enforced: EnforcedLimits): string {
  const v = (n: number | null, unit = '') => (n === null ? 'none' : `${n}${unit}`);
  return [
    // the kernel's floors: 1 % of a core, 1 MB (what a 0 limit becomes)
    ...(enforced.cpu ? [`cpu=${v(limits.cpuPercent === null ? null : Math.max(1, limits.cpuPercent), '%')}`] : []),
    ...(enforced.memory ? [`memory=${v(limits.memoryMb === null ? null : Math.max(1, limits.memoryMb), ' MB')}`] : []),
    ...(enforced.pids ? [`processes=${v(limits.processes)}`] : []),
    ...(enforced.io ? [`disk_io=${v(limits.diskIoBps, ' B/s')}`, `iops=${v(limits.iops)}`] : []),
  ]
    .map((l) => `${l}\n`)
    .join('');
}

interface Layout {
  layout: 'v1' | 'v2';
  /** every directory of the group (one per hierarchy) */
  dirs(name: string): string[];
  /** the writes for each limit, as [file relative to a group dir, value] per hierarchy dir */
  writes(name: string, limits: SiteLimits, which: keyof EnforcedLimits): Array<[string, string]>;
  readLimits(name: string): SiteLimits | null;
  usage(name: string): GroupUsage | null;
  kill(name: string): void;
  /** the base group(s) this node's groups live under, made at start */
  prepare(): void;
}

const pidsIn = (dir: string): number[] => (tryRead(`${dir}/cgroup.procs`) ?? '').split('\n').filter(Boolean).map(Number);

function killAll(dirs: string[]): void {
  for (const d of dirs)
    for (const pid of pidsIn(d)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone meanwhile
      }
    }
}

const num = (s: string | null): number | null => (s === null || !/^-?\d+$/.test(s) ? null : Number(s));

function v1(mount: string, base: string, disk: string | null): Layout {
  const CONTROLLERS = ['cpu', 'cpuacct', 'memory', 'pids', 'blkio'] as const;
  const dir = (c: string, name: string) => `${mount}/${c}/${base}/${name}`;
  const present = CONTROLLERS.filter((c) => fs.existsSync(`${mount}/${c}/cgroup.procs`));
  // a rule of 0 removes the device's rule (unlimited)
  const throttle = (value: number | null) => `${disk} ${value ?? 0}`;
  return {
    layout: 'v1',
    dirs: (name) => present.map((c) => dir(c, name)),
    prepare() {
      for (const c of present) fs.mkdirSync(`${mount}/${c}/${base}`, { recursive: true });
    },
    writes(name, l, which) {
      switch (which) {
        case 'cpu':
          return [
            [`${dir('cpu', name)}/cpu.cfs_period_us`, String(PERIOD_US)],
            [`${dir('cpu', name)}/cpu.cfs_quota_us`, l.cpuPercent === null ? '-1' : String(Math.max(1000, l.cpuPercent * 1000))],
          ];
        case 'memory': {
          const m = dir('memory', name);
          const bytes = l.memoryMb === null ? '-1' : String(Math.max(1, l.memoryMb) * MB);
          // memory+swap must stay ≥ memory: raising writes it first, lowering last (the site never swaps past its limit)
          const sw = fs.existsSync(`${m}/memory.memsw.limit_in_bytes`) ? [[`${m}/memory.memsw.limit_in_bytes`, bytes] as [string, string]] : [];
          const cur = num(tryRead(`${m}/memory.limit_in_bytes`)) ?? 0;
          const mem: [string, string] = [`${m}/memory.limit_in_bytes`, bytes];
          return l.memoryMb === null || Math.max(1, l.memoryMb) * MB > cur ? [...sw, mem] : [mem, ...sw];
        }
        case 'pids':
          return [[`${dir('pids', name)}/pids.max`, l.processes === null ? 'max' : String(l.processes)]];
        case 'io': {
          const b = dir('blkio', name);
          return [
            [`${b}/blkio.throttle.read_bps_device`, throttle(l.diskIoBps)],
            [`${b}/blkio.throttle.write_bps_device`, throttle(l.diskIoBps)],
            [`${b}/blkio.throttle.read_iops_device`, throttle(l.iops)],
            [`${b}/blkio.throttle.write_iops_device`, throttle(l.iops)],
          ];
        }
      }
    },
    readLimits(name) {
      if (!fs.existsSync(dir(present[0], name))) return null;
      const quota = num(tryRead(`${dir('cpu', name)}/cpu.cfs_quota_us`));
      const period = num(tryRead(`${dir('cpu', name)}/cpu.cfs_period_us`)) ?? PERIOD_US;
      const mem = num(tryRead(`${dir('memory', name)}/memory.limit_in_bytes`));
      const pids = num(tryRead(`${dir('pids', name)}/pids.max`));
      const rule = (f: string) => {
        const line = (tryRead(`${dir('blkio', name)}/${f}`) ?? '').split('\n').find((x) => x.startsWith(`${disk} `));
        return line ? Number(line.split(' ')[1]) : null;
      };
      return {
        cpuPercent: quota === null || quota < 0 ? null : Math.round((quota / period) * 100),
        // an unlimited group reads back as the largest page-aligned value
        memoryMb: mem === null || mem >= 2 ** 62 ? null : Math.round(mem / MB),
        processes: pids,
        diskIoBps: rule('blkio.throttle.read_bps_device'),
        iops: rule('blkio.throttle.read_iops_device'),
      };
    },
    usage(name) {
      if (!fs.existsSync(dir('memory', name))) return null;
      const ioLine = (tryRead(`${dir('blkio', name)}/blkio.throttle.io_service_bytes`) ?? '').split('\n').filter((x) => disk && x.startsWith(`${disk} `) && / (Read|Write) /.test(x));
      return {
        cpuSeconds: (num(tryRead(`${dir('cpuacct', name)}/cpuacct.usage`)) ?? 0) / 1e9,
        memoryMb: (num(tryRead(`${dir('memory', name)}/memory.usage_in_bytes`)) ?? 0) / MB,
        memoryPeakMb: (num(tryRead(`${dir('memory', name)}/memory.max_usage_in_bytes`)) ?? 0) / MB,
        processes: num(tryRead(`${dir('pids', name)}/pids.current`)) ?? 0,
        ioBytes: disk ? ioLine.reduce((n, x) => n + Number(x.split(' ')[2]), 0) : null,
      };
    },
    kill(name) {
      killAll(present.map((c) => dir(c, name)));
    },
  };
}

function v2(mount: string, base: string, disk: string | null): Layout {
  const dir = (name: string) => `${mount}/${base}/${name}`;
  const kv = (text: string | null) => new Map((text ?? '').split(/\s+/).filter((x) => x.includes('=')).map((x) => x.split('=') as [string, string]));
  return {
    layout: 'v2',
    dirs: (name) => [dir(name)],
    prepare() {
      fs.mkdirSync(`${mount}/${base}`, { recursive: true });
      // controllers reach a group only when every level above delegates them
      for (const d of [mount, `${mount}/${base}`]) {
        const offered = (tryRead(`${d}/cgroup.controllers`) ?? '').split(' ').filter((c) => ['cpu', 'memory', 'pids', 'io'].includes(c));
        for (const c of offered) {
          try {
            fs.writeFileSync(`${d}/cgroup.subtree_control`, `+${c}`);
          } catch {
            // not delegable here (a process in the root of a domain group): the probe reports it
          }
        }
      }
    },
    writes(name, l, which) {
      const d = dir(name);
      switch (which) {
        case 'cpu':
          return [[`${d}/cpu.max`, l.cpuPercent === null ? `max ${PERIOD_US}` : `${Math.max(1000, l.cpuPercent * 1000)} ${PERIOD_US}`]];
        case 'memory':
          return [[`${d}/memory.max`, l.memoryMb === null ? 'max' : String(Math.max(1, l.memoryMb) * MB)], ...(fs.existsSync(`${d}/memory.swap.max`) ? [[`${d}/memory.swap.max`, l.memoryMb === null ? 'max' : '0'] as [string, string]] : [])];
        case 'pids':
          return [[`${d}/pids.max`, l.processes === null ? 'max' : String(l.processes)]];
        case 'io': {
          const b = l.diskIoBps ?? 'max';
          const o = l.iops ?? 'max';
          return [[`${d}/io.max`, `${disk} rbps=${b} wbps=${b} riops=${o} wiops=${o}`]];
        }
      }
    },
    readLimits(name) {
      const d = dir(name);
      if (!fs.existsSync(d)) return null;
      const [quota, period] = (tryRead(`${d}/cpu.max`) ?? 'max').split(' ');
      const mem = tryRead(`${d}/memory.max`);
      const io = kv((tryRead(`${d}/io.max`) ?? '').split('\n').find((x) => x.startsWith(`${disk} `)) ?? null);
      const ioNum = (k: string) => (io.has(k) && io.get(k) !== 'max' ? Number(io.get(k)) : null);
      return {
        cpuPercent: quota === 'max' ? null : Math.round((Number(quota) / Number(period)) * 100),
        memoryMb: mem === null || mem === 'max' ? null : Math.round(Number(mem) / MB),
        processes: num(tryRead(`${d}/pids.max`)),
        diskIoBps: ioNum('rbps'),
        iops: ioNum('riops'),
      };
    },
    usage(name) {
      const d = dir(name);
      if (!fs.existsSync(d)) return null;
      const cpu = kv((tryRead(`${d}/cpu.stat`) ?? '').replace(/ (\d+)/g, '=$1'));
      const io = kv((tryRead(`${d}/io.stat`) ?? '').split('\n').find((x) => x.startsWith(`${disk} `)) ?? null);
      const peak = num(tryRead(`${d}/memory.peak`));
      return {
        cpuSeconds: Number(cpu.get('usage_usec') ?? 0) / 1e6,
        memoryMb: (num(tryRead(`${d}/memory.current`)) ?? 0) / MB,
        memoryPeakMb: peak === null ? null : peak / MB,
        processes: num(tryRead(`${d}/pids.current`)) ?? 0,
        ioBytes: disk ? Number(io.get('rbytes') ?? 0) + Number(io.get('wbytes') ?? 0) : null,
      };
    },
    kill(name) {
      try {
        fs.writeFileSync(`${dir(name)}/cgroup.kill`, '1');
      } catch {
        killAll([dir(name)]);
      }
    },
  };
}

/**
 * `argv` started inside a group: a shell writes its own pid into each of `procsFiles`, then execs
 * `argv`, so the process is in the group before it runs or forks anything (no files: `argv` as is).
 */
export function inGroup(procsFiles: string[], argv: string[]): string[] {
  if (!procsFiles.length) return argv;
  const enter = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 126; shift; n=$((n-1)); done; exec "$@"';
  return ['/bin/sh', '-c', enter, 'enter-group', String(procsFiles.length), ...procsFiles, ...argv];
}

/** The group names of one node: its root's hash, so several nodes on one machine never share a group. */
export const nodeGroupBase = (root: string): string => `panel-node-${createHash('sha256').update(root).digest('hex').slice(0, 12)}`;

/**
 * Detects the layout and probes what it enforces by creating a group and writing each limit.
 * `mount` is where cgroups are mounted (/sys/fs/cgroup); a node that cannot create groups (not
 * root, read-only mount) gets layout null and enforces nothing.
 */
export function openCgroups(o: { root: string; logger: Logger; mount?: string }): Cgroups {
  const mount = o.mount ?? '/sys/fs/cgroup';
  const base = nodeGroupBase(o.root);
  const disk = diskOf(o.root);
  const isV2 = fs.existsSync(`${mount}/cgroup.controllers`);
  const isV1 = !isV2 && fs.existsSync(`${mount}/memory/cgroup.procs`);
  let impl: Layout | null = isV2 ? v2(mount, base, disk) : isV1 ? v1(mount, base, disk) : null;
  const enforced: EnforcedLimits = { ...NONE };
  const writeAll = (ws: Array<[string, string]>) => {
    for (const [f, v] of ws) {
      try {
        fs.writeFileSync(f, v);
      } catch (err) {
        // e.g. EBUSY: a memory limit below what the group holds and cannot reclaim
        throw new Error(`control group: cannot write ${v} to ${f}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, { cause: err });
      }
    }
  };
  const apply = (name: string, l: SiteLimits, which: Array<keyof EnforcedLimits>) => {
    for (const d of impl!.dirs(name)) fs.mkdirSync(d, { recursive: true });
    for (const k of which) writeAll(impl!.writes(name, l, k));
  };
  if (impl) {
    const probe = `probe-${process.pid}`;
    const sample: SiteLimits = { cpuPercent: 50, memoryMb: 64, processes: 10, diskIoBps: 1048576, iops: 100 };
    try {
      impl.prepare();
      for (const d of impl.dirs(probe)) fs.mkdirSync(d, { recursive: true });
      for (const k of Object.keys(NONE) as Array<keyof EnforcedLimits>) {
        if (k === 'io' && !disk) continue;
        try {
          writeAll(impl.writes(probe, sample, k));
          enforced[k] = true;
        } catch {
          // this controller is not available to the node: bookkeeping only
        }
      }
    } catch (err) {
      o.logger.warn({ err: (err as Error).message }, 'control groups cannot be created: no limit is enforced on this node');
      impl = null;
    } finally {
      for (const d of impl?.dirs(probe) ?? []) tryRmdir(d);
    }
  }
  const which = () => (Object.keys(enforced) as Array<keyof EnforcedLimits>).filter((k) => enforced[k]);
  o.logger.info({ layout: impl?.layout ?? null, enforced, disk }, 'control groups probed');
  return {
    layout: impl?.layout ?? null,
    enforced,
    render: (l) => renderLimits(l, enforced),
    apply(name, l) {
      if (impl && which().length) apply(name, l, which());
    },
    read(name) {
      const l = impl?.readLimits(name);
      return l ? renderLimits({ ...NO_SITE_LIMITS, ...l }, enforced) : null;
    },
    procsFiles: (name) => (impl && which().length ? impl.dirs(name).map((d) => `${d}/cgroup.procs`) : []),
    usage: (name) => (impl && which().length ? impl.usage(name) : null),
    async remove(name) {
      if (!impl) return;
      for (let i = 0; i < 50; i++) {
        impl.kill(name);
        const left = impl.dirs(name).filter((d) => !tryRmdir(d));
        if (!left.length) return;
        await sleep(100);
      }
      o.logger.warn({ group: name }, 'a site control group could not be removed (processes still in it)');
    },
    pathOf: (name) => (impl ? impl.dirs(name)[0] : `${mount}/${base}/${name}`),
    nameOf(file) {
      const dir = impl ? path.dirname(impl.dirs('x')[0]) : `${mount}/${base}`;
      return path.dirname(file) === dir ? path.basename(file) : null;
    },
    close() {
      for (const d of impl?.dirs('x') ?? []) tryRmdir(path.dirname(d));
    },
    names() {
      const base = impl ? path.dirname(impl.dirs('x')[0]) : null;
      return base && fs.existsSync(base) ? fs.readdirSync(base, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name) : [];
    },
  };
}

/** rmdir of a group directory (its control files are not files to remove); true when gone. */
function tryRmdir(d: string): boolean {
  try {
    fs.rmdirSync(d);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ENOENT';
  }
}
