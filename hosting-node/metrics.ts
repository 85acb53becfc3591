import fs from 'node:fs';
import type { NodeMetrics } from '../domain/panel/node-ops';

// Node metrics from the real /proc (spec 2.6, PANEL.md section 2), and disk use of a tree.

interface CpuSample {
  busy: number;
  total: number;
}

/** The `cpu` line of /proc/stat: busy and total jiffies of all CPUs since boot. */
export function readCpu(): CpuSample {
  const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal (guest time is already inside user)
  const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
  const idle = f[3] + (f[4] ?? 0);
  return { busy: total - idle, total };
}

const round = (n: number, digits = 1) => Math.round(n * 10 ** digits) / 10 ** digits;

/** Samples metrics; CPU is the busy share since the previous call (or since the sampler was made). */
export function createMetricsSampler(): () => Promise<NodeMetrics> {
  let prev = readCpu();
  return async () => {
    const cpu = readCpu();
    const dTotal = cpu.total - prev.total;
    const cpuPercent = dTotal > 0 ? round((100 * (cpu.busy - prev.busy)) / dTotal) : 0;
    prev = cpu;
    const [loadavg, meminfo, uptime, netdev, bootId, fsStat] = await Promise.all([
      fs.promises.readFile('/proc/loadavg', 'utf8'),
      fs.promises.readFile('/proc/meminfo', 'utf8'),
      fs.promises.readFile('/proc/uptime', 'utf8'),
      fs.promises.readFile('/proc/net/dev', 'utf8'),
      fs.promises.readFile('/proc/sys/kernel/random/boot_id', 'utf8'),
      fs.promises.statfs('/'),
    ]);
    const load = loadavg.trim().split(/\s+/).slice(0, 3).map(Number) as [number, number, number];
    const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(meminfo)?.[1] ?? 0);
    const network = { rxBytes: 0, txBytes: 0 };
    for (const line of netdev.split('\n').slice(2)) {
      const m = /^\s*([^:]+):\s*(.*)$/.exec(line);
      if (!m || m[1] === 'lo') continue;
      const cols = m[2].trim().split(/\s+/).map(Number);
      network.rxBytes += cols[0];
      network.txBytes += cols[8];
    }
    const mb = (blocks: number) => Math.floor((blocks * fsStat.bsize) / 1048576);
    return {
      bootId: bootId.trim(),
      uptimeSeconds: Math.floor(Number(uptime.split(/\s+/)[0])),
      cpuPercent: Math.min(100, Math.max(0, cpuPercent)),
      load,
      memory: { totalMb: Math.floor(kb('MemTotal') / 1024), availableMb: Math.floor(kb('MemAvailable') / 1024) },
      rootFs: { totalMb: mb(fsStat.blocks), freeMb: mb(fsStat.bavail) },
      network,
      sampledAt: new Date().toISOString(),
    };
  };
}

/** Allocated disk space (like du) and inode count of a tree, without following symlinks; hard links count once. */
export async function treeUsage(dir: string): Promise<{ bytes: number; inodes: number }> {
  const seen = new Set<number>();
  let bytes = 0;
  let inodes = 0;
  const visit = async (p: string): Promise<void> => {
    let st: fs.Stats;
    try {
      st = await fs.promises.lstat(p);
    } catch {
      return; // removed while walking
    }
    if (seen.has(st.ino)) return;
    seen.add(st.ino);
    inodes++;
    bytes += st.blocks * 512;
    if (!st.isDirectory()) return;
    let names: string[];
    try {
      names = await fs.promises.readdir(p);
    } catch {
      return;
    }
    for (const n of names) await visit(`${p}/${n}`);
  };
  await visit(dir);
  return { bytes, inodes };
}
