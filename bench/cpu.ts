import { readProcs, TICKS_PER_SECOND } from './proc';

// CPU time per process group of the benchmark, read from /proc (Linux only; elsewhere the
// sampler reports nothing). Shows where the two cores went during a phase, including what
// other programs on the machine took.

interface ProcStat {
  pid: number;
  comm: string;
  ppid: number;
  pgrp: number;
  ticks: number;
}

const readAll = (): ProcStat[] => [...readProcs().values()].map((p) => ({ pid: p.pid, comm: p.comm, ppid: p.ppid, pgrp: p.pgrp, ticks: p.ticks }));

export interface CpuGroups {
  /** process group id of the `main/start.ts` child (tsx + node: gateway, worker; Temporal CLI; postmaster) */
  systemPgid: number;
  barePgid: number | null;
  /** the simulator's process group, when it runs in a process of its own */
  simulatorPgid?: number;
}

export type CpuSnapshot = { at: number; procs: Map<number, { category: string; ticks: number }> };

/**
 * The system's processes: its process group and every descendant of its leader (PostgreSQL and the
 * Temporal dev server run in process groups of their own, so that a terminal's Ctrl-C reaches node alone).
 */
function systemProcs(list: ProcStat[], systemPgid: number): Set<number> {
  const children = new Map<number, number[]>();
  for (const p of list) children.set(p.ppid, [...(children.get(p.ppid) ?? []), p.pid]);
  const out = new Set(list.filter((p) => p.pgrp === systemPgid).map((p) => p.pid));
  const todo = [...out];
  while (todo.length > 0) {
    for (const c of children.get(todo.pop()!) ?? []) {
      if (!out.has(c)) {
        out.add(c);
        todo.push(c);
      }
    }
  }
  return out;
}

function categorize(list: ProcStat[], g: CpuGroups): CpuSnapshot['procs'] {
  const system = systemProcs(list, g.systemPgid);
  const procs: CpuSnapshot['procs'] = new Map();
  for (const p of list) {
    let category: string;
    if (p.pid === process.pid) category = 'bench client';
    else if (system.has(p.pid) && p.comm === 'postgres') category = 'postgres';
    else if (system.has(p.pid) && p.comm === 'temporal') category = 'temporal dev server';
    else if (system.has(p.pid)) category = g.simulatorPgid ? 'system node (gateway+worker)' : 'system node (gateway+worker+sim)';
    else if (g.simulatorPgid && p.pgrp === g.simulatorPgid) category = 'simulator';
    else if (g.barePgid !== null && p.pgrp === g.barePgid) category = 'bare proxy';
    else category = 'other processes';
    procs.set(p.pid, { category, ticks: p.ticks });
  }
  return procs;
}

export function cpuSnapshot(g: CpuGroups): CpuSnapshot {
  return { at: Date.now(), procs: categorize(readAll(), g) };
}

/**
 * CPU seconds used per category between two snapshots, per process; a process that ended in
 * between is not counted (the measured phases start and end none of their own).
 */
export function cpuSecondsBetween(a: CpuSnapshot, b: CpuSnapshot): Array<[string, number]> {
  const totals = new Map<string, number>();
  for (const [pid, p] of b.procs) {
    const delta = Math.max(0, p.ticks - (a.procs.get(pid)?.ticks ?? 0));
    totals.set(p.category, (totals.get(p.category) ?? 0) + delta);
  }
  return [...totals].map(([k, v]): [string, number] => [k, v / TICKS_PER_SECOND]).sort((x, y) => y[1] - x[1]);
}

/** Cores used per category between two snapshots (CPU seconds over wall seconds). */
export function cpuBetween(a: CpuSnapshot, b: CpuSnapshot): Array<[string, number]> {
  const seconds = (b.at - a.at) / 1000;
  if (seconds <= 0) return [];
  return cpuSecondsBetween(a, b).map(([k, v]): [string, number] => [k, v / seconds]);
}
