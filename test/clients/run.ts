import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { createAccount } from '../../services/accounts/accounts';
import { createKey } from '../../services/keys/keys';
import { createDb, type Db } from '../../platform/db';
import { freePorts, sleep, spawnChild, stopAll, TSX_BIN } from '../../bench/children';
import { table } from '../../bench/stats';
import { CASES } from './drivers';
import { CLIENT_NAMES, installClient, newestVersion, PINS, type ClientName, type InstalledClient } from './install';
import { errorSummary, requestShape, startSuite, type Row, type Suite } from './suite';

// `npm run clients` (issue 29 item 7): the real coding clients against a whole running system.
// Installs Claude Code, Codex and llm at their pinned versions (`-- --newest`: the newest the
// registries serve, so a new release is tried before users try it), starts the system as
// `npm start` does (own DATA_DIR and ports) and runs the suite (suite.ts) on every text model of
// the catalog: a text prompt, a tool round trip with one of the client's own tools, a streamed
// answer. Prints the table and writes it, with the refusals and outside traffic seen, to
// test/clients/results.md (results-newest.md); `--clients`, `--models`, `--cases` narrow it.

const ROOT = path.resolve(__dirname, '../..');
const T0 = Date.now();
const log = (msg: string) => process.stderr.write(`[clients +${((Date.now() - T0) / 1000).toFixed(0)}s] ${msg}\n`);

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      newest: { type: 'boolean', default: false },
      clients: { type: 'string' },
      models: { type: 'string' },
      cases: { type: 'string' },
      out: { type: 'string' },
    },
  });
  const clients = pick(values.clients, CLIENT_NAMES, 'client');
  const cases = pick(values.cases, CASES, 'case');
  const out = path.resolve(values.out ?? path.join(__dirname, values.newest ? 'results-newest.md' : 'results.md'));

  const installed = new Map<ClientName, InstalledClient>();
  for (const name of clients) {
    const version = values.newest ? await newestVersion(name) : PINS[name];
    log(`installing ${name} ${version}`);
    const c = await installClient(name, version);
    log(`${name}: ${c.reported}${c.fresh ? ' (installed now)' : ''}`);
    installed.set(name, c);
  }

  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-clients-'));
  fs.chmodSync(dataDir, 0o755); // as root, the embedded PostgreSQL runs as the `postgres` user
  const ports = await freePorts(10);
  const portEnv = ['GATEWAY_PORT', 'PANEL_PORT', 'PANEL_HOSTING_WEB_PORT', 'PANEL_HOSTING_TLS_PORT', 'PANEL_NODE_API_PORT', 'PANEL_HOSTING_DB_PORT', 'TEMPORAL_PORT', 'TEMPORAL_UI_PORT', 'PG_PORT', 'SIMULATOR_PORT'];
  const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: dataDir, LOG_LEVEL: 'warn', ...Object.fromEntries(portEnv.map((k, i) => [k, String(ports[i])])) };
  delete env.DATABASE_URL;
  delete env.TEMPORAL_ADDRESS;
  log(`starting the system (DATA_DIR ${dataDir})`);
  const system = spawnChild('main/start.ts', TSX_BIN, ['main/start.ts'], env, ROOT);
  const gatewayUrl = `http://127.0.0.1:${env.GATEWAY_PORT}`;
  let db: Db | undefined;
  let suite: Suite | undefined;
  try {
    // connection.json is written once everything (the panel too) has started.
    const connection = path.join(dataDir, 'connection.json');
    await waitFor(async () => fs.existsSync(connection) && (await fetch(`${gatewayUrl}/healthz`).then((r) => r.ok, () => false)), () => system.exited(), 150_000, () => system.output());
    const settings = JSON.parse(fs.readFileSync(connection, 'utf8')) as { DATABASE_URL: string };
    db = createDb(settings.DATABASE_URL, 4);
    const account = await createAccount(db, { name: `clients-${new Date().toISOString()}`, tier: 'pro', credits: '1000' });
    const { id: keyId, key } = await createKey(db, { accountId: account.id, label: 'clients' });
    suite = await startSuite({ gatewayUrl, db, key, keyId });
    const { catalog } = suite;
    const models = values.models ? values.models.split(',').filter((m) => catalog.includes(m) || fail(`model ${m} is not a text model of the catalog (${catalog.join(', ')})`)) : catalog;
    log(`text models: ${models.join(', ')}`);
    const rows: Row[] = [];
    for (const client of clients) {
      const home = await suite.prepareHome(client, models);
      for (const model of models) {
        for (const c of cases) {
          const row = await suite.runCase(client, installed.get(client)!.bin, home, model, c);
          rows.push(row);
          log(`${client} ${model} ${c}: ${row.ok ? 'pass' : `FAIL ${row.reasons.join('; ')}`} (${(row.ms / 1000).toFixed(1)} s)`);
        }
      }
    }
    const report = render(rows, [...installed.values()], models, values.newest ?? false, suite.notes);
    fs.writeFileSync(out, report);
    process.stdout.write(`\n${report}\n`);
    log(`results written to ${path.relative(ROOT, out)}`);
    return rows.every((r) => r.ok) ? 0 : 1;
  } finally {
    await suite?.close();
    await db?.destroy();
    for (const line of await stopAll()) log(line);
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

async function waitFor(ready: () => Promise<boolean>, exited: () => boolean, timeoutMs: number, output: () => string): Promise<void> {
  const stopAt = Date.now() + timeoutMs;
  while (Date.now() < stopAt) {
    if (exited()) throw new Error(`the system exited before it was ready:\n${output()}`);
    if (await ready()) return;
    await sleep(500);
  }
  throw new Error(`the system was not ready within ${timeoutMs} ms:\n${output()}`);
}

function render(rows: Row[], clients: InstalledClient[], models: string[], newest: boolean, notes: string[]): string {
  const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();
  const commit = `${git('rev-parse', '--short', 'HEAD')} on ${git('rev-parse', '--abbrev-ref', 'HEAD')}`;
  const cell = (s: string) => s.replace(/\|/g, '\\|');
  const passed = rows.filter((r) => r.ok).length;
  const refusals = new Set<string>();
  const shapes = new Set<string>();
  for (const r of rows) {
    for (const e of r.refusals) {
      refusals.add(`${r.client} · ${r.model} · ${e.method} ${e.path.split('?')[0]} → ${e.status} ${errorSummary(e)}`);
      shapes.add(`${r.client} · ${e.method} ${e.path.split('?')[0]}: ${requestShape(e.body)}`);
    }
  }
  const egress = new Set(rows.flatMap((r) => r.egress.map((e) => `${r.client}: ${e}`)));
  return [
    `# Real clients against the gateway (${new Date().toISOString().slice(0, 10)}, commit ${commit})`,
    '',
    `\`npm run clients${newest ? ' -- --newest' : ''}\`: ${clients.map((c) => `${c.name} ${c.version} (\`${c.reported}\`)`).join(', ')}; models ${models.join(', ')}. ${passed}/${rows.length} cases passed.`,
    '',
    table(['client', 'model', 'case', 'result', 'reason', 'billed', 'ignored by the gateway', 's'], rows.map((r) => [r.client, r.model, r.c, r.ok ? 'pass' : 'FAIL', cell(r.reasons.join('; ')), r.billed, cell(r.ignored.join(' · ')), (r.ms / 1000).toFixed(1)])),
    '',
    '## Refusals seen',
    '',
    ...(refusals.size ? [...refusals].map((k) => `- ${k}`) : ['none']),
    ...(shapes.size ? ['', 'What the refused requests held (fields, conversation roles, tool types):', '', ...[...shapes].map((k) => `- ${k}`)] : []),
    '',
    '## Outside traffic seen',
    '',
    ...(egress.size ? [...egress].map((e) => `- ${e}`) : ['none (egress trap on HTTP(S)_PROXY' + (notes.some((n) => n.startsWith('strace')) ? ')' : ', strace connect/DNS record)')]),
    ...(notes.length ? ['', '## Notes', '', ...notes.map((n) => `- ${n}`)] : []),
    '',
  ].join('\n');
}

function pick<T extends string>(given: string | undefined, all: readonly T[], what: string): T[] {
  if (!given) return [...all];
  return given.split(',').map((v) => (all.includes(v as T) ? (v as T) : fail(`unknown ${what} ${v} (${all.join(', ')})`)));
}

function fail(message: string): never {
  throw new Error(message);
}

main().then(
  (code) => process.exit(code),
  async (err) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    await stopAll();
    process.exit(2);
  },
);
