import fs from 'node:fs';

// The process table from /proc (Linux only; elsewhere it is empty): CPU ticks and resident memory
// of each process, and of a process with everything below it (a "tree"). Used by bench/cpu.ts
// (CPU per process group) and bench/panel-sites.ts (CPU and memory of each agent with its nginx
// and PHP-FPM).

export const TICKS_PER_SECOND = 100; // USER_HZ, 100 on every mainstream Linux
const PAGE_BYTES = 4096;

export interface ProcInfo {
  pid: number;
  comm: string;
  ppid: number;
  pgrp: number;
  /** user + system ticks of the process itself */
  ticks: number;
  /** user + system ticks of its children that exited and were waited for (cutime + cstime) */
  reapedTicks: number;
  rssBytes: number;
}

/** One parse of /proc/<pid>/stat; null when the process is gone. */
export function readProc(pid: number): ProcInfo | null {
  let s: string;
  try {
    s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  // the command name may hold spaces and parentheses: fields start after the last ')'
  const close = s.lastIndexOf(')');
  const comm = s.slice(s.indexOf('(') + 1, close);
  const f = s.slice(close + 2).split(' '); // f[0] = state (field 3)
  return {
    pid,
    comm,
    ppid: Number(f[1]),
    pgrp: Number(f[2]),
    ticks: Number(f[11]) + Number(f[12]),
    reapedTicks: Number(f[13]) + Number(f[14]),
    rssBytes: Number(f[21]) * PAGE_BYTES,
  };
}

/** Every process now, by pid. */
export function readProcs(): Map<number, ProcInfo> {
  const out = new Map<number, ProcInfo>();
  let entries: string[];
  try {
    entries = fs.readdirSync('/proc');
  } catch {
    return out;
  }
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    const p = readProc(Number(e));
    if (p) out.set(p.pid, p);
  }
  return out;
}

/** `root` and every process below it (by parent pid); empty when `root` is gone. */
export function treeOf(procs: Map<number, ProcInfo>, root: number): ProcInfo[] {
  if (!procs.has(root)) return [];
  const children = new Map<number, ProcInfo[]>();
  for (const p of procs.values()) {
    const list = children.get(p.ppid) ?? [];
    list.push(p);
    children.set(p.ppid, list);
  }
  const out: ProcInfo[] = [];
  const walk = (pid: number) => {
    out.push(procs.get(pid)!);
    for (const c of children.get(pid) ?? []) walk(c.pid);
  };
  walk(root);
  return out;
}

/**
 * CPU seconds a tree has used: its live processes plus the children each of them waited for. The
 * difference between two readings counts the processes that ran and ended in between (an
 * `nginx -t`, an nginx worker replaced by a reload) as long as their parent is in the tree.
 */
export const treeCpuSeconds = (tree: ProcInfo[]): number => tree.reduce((a, p) => a + p.ticks + p.reapedTicks, 0) / TICKS_PER_SECOND;

/** Resident memory of a tree (the sum over its processes: pages they share are counted in each). */
export const treeRssBytes = (tree: ProcInfo[]): number => tree.reduce((a, p) => a + p.rssBytes, 0);

/** The peak resident set of one process (VmHWM of /proc/<pid>/status), bytes; null when unknown. */
export function peakRssBytes(pid: number): number | null {
  try {
    const kb = /^VmHWM:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb === undefined ? null : Number(kb) * 1024;
  } catch {
    return null;
  }
}

/** Direct children of `pid` whose command name is `comm`. */
export const childrenNamed = (pid: number, comm: string): number[] =>
  [...readProcs().values()].filter((p) => p.ppid === pid && p.comm === comm).map((p) => p.pid);
