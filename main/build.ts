// `npm run build`, after tsc has compiled the runtime code into dist/ (tsconfig.build.json): copies
// the files the code reads beside itself (installer scripts, console and dashboard assets) and
// writes each domain's workflow bundle, plain and traced, so workers from dist/ do not bundle at start.
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import { bundleFile, WORKFLOW_DOMAINS, workflowsPath } from '../workers/base';
import { WORKFLOW_TRACING_MODULE } from '../workers/tracing';

const ROOT = path.resolve(__dirname, '..');
const DIST = path.join(ROOT, 'dist');

function copyAssets(): number {
  const { config, error } = ts.readConfigFile(path.join(ROOT, 'tsconfig.build.json'), ts.sys.readFile);
  if (error) throw new Error(ts.flattenDiagnosticMessageText(error.messageText, '\n'));
  let copied = 0;
  for (const dir of config.include as string[]) {
    for (const entry of fs.readdirSync(path.join(ROOT, dir), { recursive: true, withFileTypes: true })) {
      if (!entry.isFile() || entry.name.endsWith('.ts')) continue;
      const rel = path.relative(ROOT, path.join(entry.parentPath, entry.name));
      fs.mkdirSync(path.dirname(path.join(DIST, rel)), { recursive: true });
      fs.copyFileSync(path.join(ROOT, rel), path.join(DIST, rel));
      copied++;
    }
  }
  return copied;
}

async function main() {
  if (!fs.existsSync(path.join(DIST, 'workers', 'base.js'))) throw new Error('dist/ has no compiled code: run tsc -p tsconfig.build.json first (npm run build does)');
  console.log(`build: ${copyAssets()} asset files copied into dist/`);
  const logger = new DefaultLogger('WARN');
  for (const domain of WORKFLOW_DOMAINS) {
    for (const traced of [false, true]) {
      const { code } = await bundleWorkflowCode({ workflowsPath: workflowsPath(domain), workflowInterceptorModules: traced ? [WORKFLOW_TRACING_MODULE] : [], logger });
      fs.writeFileSync(path.join(DIST, 'workflows', bundleFile(domain, traced)), code);
      console.log(`build: dist/workflows/${bundleFile(domain, traced)} (${Math.round(code.length / 1024)} KiB)`);
    }
  }
}

main().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
