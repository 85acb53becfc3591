import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePorts, sleep } from './children';
import { createLogger } from '../platform/logger';
import { startEmbeddedPostgres } from '../platform/postgres';
import { startTemporalDevServer } from '../platform/temporal-server';

// `npm run deploy-guide` (issue 35: the guide is followed word for word by a script): runs the shell
// blocks of docs/deploy.md marked `sh deploy-guide` on scratch hosts, one per role of
// DEPLOY_GUIDE_ROLES (default worker,gateway). A host is a private mount namespace whose /opt and
// /etc are its own (a bind mount and an overlay, both under a scratch directory: the machine's are
// not touched) and whose /usr/bin/node is Node 24 (the guide's prerequisite). Between the blocks the
// script edits /etc/durable-gateway/env as the guide asks an operator to (the database, Temporal
// and secrets of this run). systemd does not run here: a `systemctl` of the script's own
// (daemon-reload; enable --now starts the unit's ExecStart with its EnvironmentFile and
// WorkingDirectory) stands in for it, and `systemd-analyze verify` checks each unit. A role passes
// when it is ready (gateway: GET /readyz 200; worker: `worker ready`). Appends
// bench/deploy-guide-results.md; exits 1 when a role fails. Needs root; REPOSITORY is this
// repository's committed HEAD.

const ROOT = path.resolve(__dirname, '..');
const RESULTS = path.join(__dirname, 'deploy-guide-results.md');
/** the guide's Node 24 (`npm run tools` puts it into .tools/, temporal-config/NODE_VERSION) */
const NODE24 = path.join(ROOT, '.tools', `node-${fs.readFileSync(path.join(ROOT, 'temporal-config', 'NODE_VERSION'), 'utf8').trim()}`, 'bin', 'node');
const ROLES = (process.env.DEPLOY_GUIDE_ROLES ?? 'worker,gateway').split(',');
const T0 = Date.now();
const log = (msg: string) => process.stderr.write(`[deploy-guide +${((Date.now() - T0) / 1000).toFixed(0)}s] ${msg}\n`);

/** The blocks of the guide marked for this script, in order. */
function guideBlocks(): string[] {
  const text = fs.readFileSync(path.join(ROOT, 'docs', 'deploy.md'), 'utf8');
  return [...text.matchAll(/^```sh deploy-guide\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
}

// systemd's part, for hosts without it: the unit's EnvironmentFile (KEY=VALUE lines, values taken
// whole), WorkingDirectory and ExecStart (its $VAR and ${VAR} expanded), started in the background.
const SYSTEMCTL = `#!/usr/bin/env bash
set -euo pipefail
case "$1" in
  daemon-reload) exit 0 ;;
  enable) [ "$2" = --now ] || { echo "systemctl (deploy-guide): only enable --now" >&2; exit 1; } ;;
  *) echo "systemctl (deploy-guide): $1 is not supported" >&2; exit 1 ;;
esac
unit="\${3%.service}"
file="/etc/systemd/system/$unit.service"
get() { sed -n "s/^$1=//p" "$file" | head -1; }
envfile="$(get EnvironmentFile)"
while IFS= read -r line; do
  case "$line" in ''|'#'*) continue ;; esac
  export "\${line%%=*}=\${line#*=}"
done < "\${envfile#-}"
cd "$(get WorkingDirectory)"
setsid bash -c "exec $(get ExecStart)" > "$DEPLOY_GUIDE_LOGS/$unit.log" 2>&1 < /dev/null &
echo $! > "$DEPLOY_GUIDE_LOGS/$unit.pid"
`;

interface HostResult {
  role: string;
  ok: boolean;
  readyMs: number;
  note: string;
}

/** Runs `script` with bash -e on the host under `dir` (its mount namespace). */
function onHost(dir: string, script: string, env: NodeJS.ProcessEnv): { status: number | null; output: string } {
  const setup = [
    'set -e',
    `mount -t overlay overlay -o lowerdir=/etc,upperdir=${dir}/etc-upper,workdir=${dir}/etc-work /etc`,
    `mount --bind ${dir}/opt /opt`,
    `mount --bind ${NODE24} /usr/bin/node`,
    `export PATH=${dir}/bin:$PATH`,
    'cd /',
  ].join('\n');
  const r = spawnSync('unshare', ['--mount', '--propagation', 'private', 'bash', '-c', `${setup}\n${script}`], { env: { ...process.env, ...env }, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

/** The operator's edit of /etc/durable-gateway/env (docs/deploy.md): each key set to this run's value. */
function editEnv(file: string, values: Record<string, string>): void {
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  for (const [key, value] of Object.entries(values)) {
    const i = lines.findIndex((l) => l.replace(/^#/, '').startsWith(`${key}=`));
    if (i >= 0) lines[i] = `${key}=${value}`;
    else lines.push(`${key}=${value}`);
  }
  fs.writeFileSync(file, lines.join('\n'));
}

async function main(): Promise<number> {
  if (process.getuid?.() !== 0) {
    process.stderr.write('npm run deploy-guide needs root (mount namespaces); nothing was done\n');
    return 2;
  }
  const blocks = guideBlocks();
  if (blocks.length !== 2) throw new Error(`docs/deploy.md: expected 2 blocks marked sh deploy-guide (install, then start), found ${blocks.length}`);
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'deploy-guide-'));
  fs.chmodSync(scratch, 0o755); // PostgreSQL (as 'postgres') enters it
  const logger = createLogger('warn');
  const [pgPort, temporalPort, ...rolePorts] = await freePorts(2 + ROLES.length);
  const results: HostResult[] = [];
  const pids: number[] = [];
  let db: Awaited<ReturnType<typeof startEmbeddedPostgres>> | null = null;
  let temporal: Awaited<ReturnType<typeof startTemporalDevServer>> | null = null;
  try {
    db = await startEmbeddedPostgres({ dir: path.join(scratch, 'pg'), port: pgPort, database: 'gateway', persistent: false, logger });
    temporal = await startTemporalDevServer({ ip: '127.0.0.1', port: temporalPort, namespace: 'default', logger });
    log(`PostgreSQL ${db.url.replace(/:[^:@]*@/, ':…@')}, Temporal ${temporal.address}`);
    for (const [i, role] of ROLES.entries()) {
      const dir = path.join(scratch, role);
      for (const d of ['etc-upper', 'etc-work', 'opt', 'bin', 'logs', 'data']) fs.mkdirSync(path.join(dir, d), { recursive: true });
      fs.writeFileSync(path.join(dir, 'bin', 'systemctl'), SYSTEMCTL, { mode: 0o755 });
      const env = { REPOSITORY: ROOT, ROLE: role, DEPLOY_GUIDE_LOGS: path.join(dir, 'logs') };
      const t = Date.now();
      log(`${role}: installing (first block)`);
      const install = onHost(dir, blocks[0], env);
      if (install.status !== 0) throw new Error(`${role}: the install block failed (${install.status}):\n${install.output.slice(-3000)}`);
      editEnv(path.join(dir, 'etc-upper', 'durable-gateway', 'env'), {
        DATABASE_URL: db.url,
        TEMPORAL_ADDRESS: temporal.address,
        TEMPORAL_NAMESPACE: 'default',
        TESTRUN_SECRET: 'deploy guide run secret, not for production',
        PANEL_SECRET: 'deploy guide run secret, not for production',
        GATEWAY_PORT: String(rolePorts[i]),
        GATEWAY_PROCESSES: '1',
        WORKER_QUEUES: 'credits',
        DATA_DIR: path.join(dir, 'data'),
        LOG_LEVEL: 'info',
      });
      const unit = path.join(dir, 'etc-upper', 'systemd', 'system', `durable-${role}.service`);
      log(`${role}: starting (second block)`);
      const start = onHost(dir, blocks[1], env);
      if (start.status !== 0) throw new Error(`${role}: the start block failed (${start.status}):\n${start.output.slice(-3000)}`);
      const pidFile = path.join(dir, 'logs', `durable-${role}.pid`);
      pids.push(Number(fs.readFileSync(pidFile, 'utf8')));
      const verify = spawnSync('systemd-analyze', ['verify', unit], { encoding: 'utf8' });
      const roleLog = path.join(dir, 'logs', `durable-${role}.log`);
      const readyAt = Date.now();
      let ok = false;
      while (!ok && Date.now() - readyAt < 180_000) {
        await sleep(500);
        if (role === 'gateway') ok = await fetch(`http://127.0.0.1:${rolePorts[i]}/readyz`).then((r) => r.status === 200, () => false);
        else ok = /"msg":"worker ready"/.test(fs.readFileSync(roleLog, 'utf8'));
      }
      const verifyNote = verify.status === 0 ? 'systemd-analyze verify: clean' : `systemd-analyze verify: ${(verify.stderr || verify.stdout).trim().split('\n').join(' / ').slice(0, 300)}`;
      const note = `installed in ${((readyAt - t) / 1000).toFixed(0)} s (clone, npm ci, npm run build); ${verifyNote}${ok ? '' : `; last output: ${fs.readFileSync(roleLog, 'utf8').slice(-600).replace(/\n/g, ' ')}`}`;
      results.push({ role, ok, readyMs: Date.now() - readyAt, note });
      log(`${role}: ${ok ? 'ready' : 'NOT READY'} ${((Date.now() - readyAt) / 1000).toFixed(1)} s after systemctl enable --now`);
    }
  } catch (err) {
    results.push({ role: 'run', ok: false, readyMs: 0, note: err instanceof Error ? err.message.slice(0, 3000) : String(err) });
    log(`failed: ${err instanceof Error ? err.message : String(err)}`);
  } finally {
    for (const pid of pids) {
      try {
        process.kill(-pid, 'SIGTERM');
      } catch {
        // gone already
      }
    }
    await sleep(3000);
    await temporal?.stop().catch(() => {});
    await db?.stop().catch(() => {});
    fs.rmSync(scratch, { recursive: true, force: true });
  }
  const git = (args: string[]) => spawnSync('git', args, { cwd: ROOT }).stdout?.toString().trim() ?? '';
  const report = [
    `## ${new Date().toISOString()} — commit ${git(['rev-parse', '--short', 'HEAD'])}${git(['status', '--porcelain']) ? ' (uncommitted changes: the clone has only the committed HEAD)' : ''}`,
    '',
    '| role | result | ready after `systemctl enable --now` | notes |',
    '|---|---|---|---|',
    ...results.map((r) => `| ${r.role} | ${r.ok ? 'ready' : 'FAILED'} | ${(r.readyMs / 1000).toFixed(1)} s | ${r.note.replace(/\|/g, '\\|').replace(/\n/g, ' ')} |`),
    '',
  ].join('\n');
  fs.appendFileSync(RESULTS, `${report}\n`);
  return results.every((r) => r.ok) ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`deploy-guide failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
