import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { env } from '../setup/env';

// The operator CLI (admin/cli.ts) as a real process against the test database.

const ROOT = path.resolve(__dirname, '../..');
const TSX = path.join(ROOT, 'node_modules', '.bin', 'tsx');

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
  /** the one JSON object on stdout */
  json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** Runs the CLI with extra environment; resolves with exit code and output whatever the exit code. */
export function cliWith(extraEnv: NodeJS.ProcessEnv, ...args: string[]): Promise<Run> {
  return new Promise((resolve, reject) => {
    execFile(
      TSX,
      ['admin/cli.ts', ...args],
      { cwd: ROOT, env: { ...process.env, DATABASE_URL: env.databaseUrl, ...extraEnv }, timeout: 30_000 },
      (err, stdout, stderr) => {
        if (err && typeof err.code !== 'number') return reject(err);
        const lines = stdout.split('\n').filter((l) => l.trim() !== '');
        let json: unknown;
        try {
          json = lines.length === 1 ? JSON.parse(lines[0]) : undefined;
        } catch {
          json = undefined;
        }
        resolve({ code: err ? (err.code as number) : 0, stdout, stderr, json });
      },
    );
  });
}

export const cli = (...args: string[]) => cliWith({}, ...args);

/** Exactly one JSON object on stdout. */
export function oneObject(r: Run) {
  const lines = r.stdout.split('\n').filter((l) => l.trim() !== '');
  assert.equal(lines.length, 1, `one line on stdout, got: ${r.stdout}\nstderr: ${r.stderr}`);
  assert.ok(r.json && typeof r.json === 'object' && !Array.isArray(r.json), `a JSON object on stdout: ${r.stdout}`);
  return r.json;
}
