import fs from 'node:fs';

// The top entries of a `node --cpu-prof` profile (bench/gateway-overhead.ts writes them with
// BENCH_CPU_PROF_DIR) within time windows, idle left out: by the nearest package or project
// folder on the stack (so a syscall counts for whoever made it), and by function (self time).
//   npx tsx bench/profile-top.ts <file.cpuprofile> [from-to,… seconds after the profile's start] [rows]

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

const [file, windowArg = '0-1e9', rowsArg = '12'] = process.argv.slice(2);
if (!file) throw new Error('usage: npx tsx bench/profile-top.ts <file.cpuprofile> [from-to,…] [rows]');
const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as Profile;
const windows = windowArg.split(',').map((w) => w.split('-').map(Number));
const rows = Number(rowsArg);
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

/** node_modules package, or the project's top two folders; null for node's own code. */
function ownerOfUrl(url: string): string | null {
  const pkgs = url.match(/node_modules\/((?:@[^/]+\/)?[^/]+)/g);
  if (pkgs) return pkgs[pkgs.length - 1].replace('node_modules/', '');
  if (!url || url.startsWith('node:')) return null;
  const own = /\/((?:api|services|platform|domain|activities|workflows|workers|main|simulator)\/[^/]+)/.exec(url);
  return own ? own[1] : null;
}
function ownerOf(id: number): string {
  for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
    const owner = ownerOfUrl(byId.get(cur)!.callFrame.url);
    if (owner) return owner;
  }
  const name = byId.get(id)!.callFrame.functionName;
  return name.startsWith('(') ? name : '(node internals, no user frame)';
}

const byOwner = new Map<string, number>();
const byFunction = new Map<string, number>();
let busy = 0;
let t = 0;
profile.samples.forEach((id, i) => {
  const d = profile.timeDeltas[i] ?? 0;
  t += d;
  const s = t / 1e6;
  const frame = byId.get(id)!.callFrame;
  if (!windows.some(([a, b]) => s >= a && s < b) || frame.functionName === '(idle)') return;
  busy += d;
  const where = frame.url.includes('node_modules/') ? frame.url.replace(/.*node_modules\//, '') : frame.url.replace(/^.*?\/(?=(api|services|platform|domain|simulator)\/)/, '');
  const fn = `${frame.functionName || '(anonymous)'} ${where}:${frame.lineNumber}`;
  byFunction.set(fn, (byFunction.get(fn) ?? 0) + d);
  const owner = ownerOf(id);
  byOwner.set(owner, (byOwner.get(owner) ?? 0) + d);
});

const table = (title: string, m: Map<string, number>) =>
  [`| ${title} | self ms | % of busy |`, '| --- | --- | --- |', ...[...m].sort((a, b) => b[1] - a[1]).slice(0, rows).map(([k, v]) => `| \`${k}\` | ${(v / 1000).toFixed(0)} | ${((100 * v) / busy).toFixed(1)} |`)].join('\n');
process.stdout.write(`Busy ${(busy / 1e6).toFixed(2)} s in ${windowArg} s\n\n${table('nearest package or project folder on the stack', byOwner)}\n\n${table('function', byFunction)}\n`);
