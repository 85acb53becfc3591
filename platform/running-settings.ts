import fs from 'node:fs';
import path from 'node:path';

// What `npm start` is connected to, kept in DATA_DIR/connection.json, so the operator CLI reaches
// the running system (its database, variant, Temporal) without the same environment exported.

const FILE = 'connection.json';

export interface RunningSettings {
  DATABASE_URL: string;
  GATEWAY_VARIANT: string;
  TEMPORAL_ADDRESS: string;
  TEMPORAL_NAMESPACE: string;
  /** for people reading the file */
  GATEWAY_URL: string;
}

/** Written at every start (mode 600: the database URL holds its password). */
export function writeRunningSettings(dataDir: string, s: RunningSettings): void {
  const file = path.join(dataDir, FILE);
  fs.writeFileSync(file, JSON.stringify(s, null, 2) + '\n', { mode: 0o600 });
  fs.chmodSync(file, 0o600);
}

/** `env` over the settings of the system last started with this DATA_DIR: variables set win. */
export function withRunningSettings(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const file = path.join(path.resolve(env.DATA_DIR || '.data'), FILE);
  let saved: Partial<RunningSettings> = {};
  try {
    saved = JSON.parse(fs.readFileSync(file, 'utf8')) as Partial<RunningSettings>;
  } catch {
    // nothing started with this DATA_DIR: the defaults and the environment
  }
  const { GATEWAY_URL: _url, ...settings } = saved;
  void _url;
  return { ...settings, ...env };
}
