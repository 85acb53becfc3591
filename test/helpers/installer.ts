import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

// The installer scripts as a user gets them: downloaded from a running gateway into a folder, run
// with bash against a throwaway HOME (test/gateway/installer*.test.ts).

export interface ScriptRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Downloads install.sh and uninstall.sh from the gateway into dir. */
export async function downloadShellScripts(base: string, dir: string): Promise<void> {
  for (const name of ['install.sh', 'uninstall.sh']) {
    const res = await fetch(`${base}/${name}`);
    if (res.status !== 200) throw new Error(`GET /${name}: ${res.status}`);
    fs.writeFileSync(path.join(dir, name), await res.text());
  }
}

/** bash DIR/SCRIPT ARGS with HOME set; detached, so there is no /dev/tty and prompts read stdin. */
export function runScript(dir: string, script: string, args: string[], home: string, opts: { input?: string; env?: Record<string, string> } = {}): Promise<ScriptRun> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [path.join(dir, script), ...args], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, LANG: 'C.UTF-8', ...opts.env },
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(opts.input ?? '');
  });
}

/** Every file under dir with its content (directories as '<dir>'): equal snapshots mean nothing was written or deleted. */
export function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of fs.readdirSync(dir, { recursive: true, withFileTypes: true })) {
    const full = path.join(entry.parentPath, entry.name);
    out[path.relative(dir, full)] = entry.isFile() ? fs.readFileSync(full, 'utf8') : '<dir>';
  }
  return out;
}

/** The files (not directories) under dir, relative. */
export const filesUnder = (dir: string): string[] =>
  Object.entries(snapshot(dir))
    .filter(([, v]) => v !== '<dir>')
    .map(([k]) => k)
    .sort();

/** The .bak-* copies of file. */
export const backupsOf = (file: string): string[] =>
  fs.existsSync(path.dirname(file)) ? fs.readdirSync(path.dirname(file)).filter((n) => n.startsWith(`${path.basename(file)}.bak-`)).map((n) => path.join(path.dirname(file), n)) : [];
