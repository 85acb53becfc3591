import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

// The real clients of the compatibility suite, each installed once into
// .tools/clients/<name>-<version>/ with its ordinary package manager: Claude Code and Codex from npm
// (their native binaries come as npm optional dependencies), llm from PyPI into a venv. A directory
// counts as installed only once its `.installed` marker is written, after the client ran `--version`.

const run = promisify(execFile);
const ROOT = path.resolve(__dirname, '../..');
export const CLIENTS_DIR = path.join(ROOT, '.tools', 'clients');

export type ClientName = 'claude-code' | 'codex' | 'llm';
export const CLIENT_NAMES: readonly ClientName[] = ['claude-code', 'codex', 'llm'];

/** The versions `npm run clients` tries (issue 29 names the first two); `--newest` asks the registries instead. */
export const PINS: Record<ClientName, string> = { 'claude-code': '2.1.197', codex: '0.171.0', llm: '0.36' };

const PACKAGES: Record<ClientName, { registry: 'npm' | 'pypi'; name: string; bin: string }> = {
  'claude-code': { registry: 'npm', name: '@anthropic-ai/claude-code', bin: 'node_modules/.bin/claude' },
  codex: { registry: 'npm', name: '@openai/codex', bin: 'node_modules/.bin/codex' },
  llm: { registry: 'pypi', name: 'llm', bin: 'bin/llm' },
};

export interface InstalledClient {
  name: ClientName;
  version: string;
  /** what `<bin> --version` printed */
  reported: string;
  bin: string;
  /** false when an earlier run had installed it already */
  fresh: boolean;
}

/** The newest version the client's registry serves. */
export async function newestVersion(name: ClientName): Promise<string> {
  const pkg = PACKAGES[name];
  if (pkg.registry === 'npm') return (await run('npm', ['view', pkg.name, 'version'])).stdout.trim();
  // `pip index versions llm` prints "llm (0.36)" first.
  const { stdout } = await run('python3', ['-m', 'pip', 'index', 'versions', '--disable-pip-version-check', pkg.name]);
  const m = new RegExp(`^${pkg.name} \\(([^)]+)\\)`, 'm').exec(stdout);
  if (!m) throw new Error(`pip index versions ${pkg.name}: no version in ${stdout.slice(0, 200)}`);
  return m[1]!;
}

export async function installClient(name: ClientName, version: string): Promise<InstalledClient> {
  const pkg = PACKAGES[name];
  const dir = path.join(CLIENTS_DIR, `${name}-${version}`);
  const bin = path.join(dir, pkg.bin);
  const marker = path.join(dir, '.installed');
  const fresh = !fs.existsSync(marker);
  if (fresh) {
    fs.rmSync(dir, { recursive: true, force: true });
    fs.mkdirSync(dir, { recursive: true });
    if (pkg.registry === 'npm') {
      // --prefix keeps the client out of the project's node_modules; optional dependencies
      // (the platform's native binary) are installed as for any user.
      await run('npm', ['install', '--prefix', dir, '--no-save', '--no-audit', '--no-fund', '--loglevel=error', `${pkg.name}@${version}`], { maxBuffer: 16 << 20 });
    } else {
      await run('python3', ['-m', 'venv', dir]);
      await run(path.join(dir, 'bin', 'pip'), ['install', '--quiet', '--disable-pip-version-check', `${pkg.name}==${version}`], { maxBuffer: 16 << 20 });
    }
  }
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'client-version-'));
  const ran = await run(bin, ['--version'], { env: { PATH: process.env.PATH ?? '', HOME: home }, timeout: 30_000 })
    .catch((err: Error) => {
      // an install that no longer runs (a Python venv is not relocatable: its folder was copied or moved) is made again, once
      if (fresh) throw err;
      fs.rmSync(marker, { force: true });
      return null;
    })
    .finally(() => fs.rmSync(home, { recursive: true, force: true }));
  if (!ran) return installClient(name, version);
  const reported = ran.stdout.trim();
  if (!reported.includes(version)) throw new Error(`${name}: ${bin} --version printed "${reported}", expected ${version}`);
  fs.writeFileSync(marker, `${reported}\n`);
  return { name, version, reported, bin, fresh };
}
