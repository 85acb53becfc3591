import { z } from 'zod';
import type { KeyFormat } from '../services/keys/key-format';
import { parseFlags, stringFlags, UsageError } from '../platform/cli-args';
import { loadConfig } from '../platform/config';
import { withRunningSettings } from '../platform/running-settings';
import { createDb, type Db } from '../platform/db';
import { databaseUrl } from '../platform/database-url';
import type { KeySettingsInput } from '../services/keys/keys';
import { InvalidInput } from '../services/shared/errors';
import { addCredits, createAccount, deactivateAccount, getAccount, reactivateAccount, updateAccount } from '../services/accounts/accounts';
import { listModels, modelInput, providerInput, setModel, setProvider } from '../services/catalog/entries';
import { createKey, getKey, listKeyRequests, listKeys, revokeKey, updateKey } from '../services/keys/keys';
import { uncoveredReport } from '../services/credits/uncovered';
import { startNewCycle } from '../services/accounts/cycles';
import { createEndpoint, deleteEndpoint, listDeliveries, listEndpoints, setLowBalanceThreshold } from '../services/accounts/webhooks';
import { allowList } from '../services/shared/webhook-targets';
import { listRoutes, removeRoute, routeInput, routeKey, setRoute } from '../services/catalog/routes';
import { TESTRUN_COMMANDS } from './testrun-commands';
import { createUser } from '../services/dashboard/users';
import { loadSealingKey } from '../platform/secret-box';

// Operator CLI: `npm run -s admin -- <command> [flags]`. Prints exactly one JSON object on
// stdout; failures print {"error": …} and exit non-zero.

type Flags = Record<string, string | undefined>;
type Command = (db: Db, f: Flags) => Promise<unknown>;

const need = (f: Flags, name: string): string => {
  const v = f[name];
  if (!v) throw new UsageError(`--${name} is required`);
  return v;
};

const webhookDeps = (db: Db) => ({ db, sealingKey: loadSealingKey(), allowed: allowList(loadConfig(withRunningSettings()).GATEWAY_WEBHOOK_ALLOW_TARGETS) });

// Per-key settings of mt keys; on `key update` the word `none` removes a setting.
const KEY_SETTING_FLAGS = ['spend-limit', 'rpm', 'expires-at', 'models', 'cache-ttl'];
function keySettings(f: Flags): KeySettingsInput {
  const v = (name: string) => (f[name] === 'none' ? null : f[name]);
  return { spend_limit: v('spend-limit'), rpm: v('rpm'), expires_at: v('expires-at'), models: v('models'), cache_ttl: v('cache-ttl') };
}

const COMMANDS: Record<string, { flags: string[]; run: Command }> = {
  'account create': {
    flags: ['name', 'tier', 'credits', 'plan-expires-at'],
    run: (db, f) => createAccount(db, { name: need(f, 'name'), tier: f.tier as never, credits: f.credits, planExpiresAt: f['plan-expires-at'] ?? null }),
  },
  'account deactivate': { flags: ['account'], run: (db, f) => deactivateAccount(db, need(f, 'account')) },
  'account reactivate': { flags: ['account'], run: (db, f) => reactivateAccount(db, need(f, 'account')) },
  'account show': { flags: ['account'], run: (db, f) => getAccount(db, need(f, 'account')) },
  // --plan-expires-at none: no expiry
  'account update': {
    flags: ['account', 'tier', 'plan-expires-at'],
    run: (db, f) => updateAccount(db, need(f, 'account'), { tier: f.tier as never, planExpiresAt: f['plan-expires-at'] === 'none' ? null : f['plan-expires-at'] }),
  },
  // A new purchase cycle: the remaining balance carries over, --credits are granted with it.
  'account new-cycle': { flags: ['account', 'credits'], run: (db, f) => startNewCycle(db, { account: need(f, 'account'), credits: f.credits }) },
  // Account webhooks (balance.low, key.spend_limit_reached); the secret is shown once. --threshold none: no balance.low.
  'webhook create': { flags: ['account', 'url'], run: (db, f) => createEndpoint(webhookDeps(db), need(f, 'account'), need(f, 'url')) },
  'webhook list': { flags: ['account'], run: (db, f) => listEndpoints(db, need(f, 'account')) },
  'webhook delete': { flags: ['id'], run: (db, f) => deleteEndpoint(db, need(f, 'id')) },
  'webhook deliveries': { flags: ['id'], run: (db, f) => listDeliveries(db, need(f, 'id')) },
  'account threshold': { flags: ['account', 'threshold'], run: (db, f) => setLowBalanceThreshold(db, need(f, 'account'), need(f, 'threshold') === 'none' ? null : f.threshold!) },
  'credits add': { flags: ['account', 'credits'], run: (db, f) => addCredits(db, need(f, 'account'), need(f, 'credits')) },
  'key create': {
    flags: ['account', 'label', 'format', ...KEY_SETTING_FLAGS],
    run: (db, f) => createKey(db, { accountId: need(f, 'account'), label: f.label, format: f.format as KeyFormat | undefined, settings: keySettings(f), variant: loadConfig(withRunningSettings()).GATEWAY_VARIANT }),
  },
  'key update': {
    flags: ['id', 'label', ...KEY_SETTING_FLAGS],
    run: (db, f) => updateKey(db, need(f, 'id'), { label: f.label, ...keySettings(f) }),
  },
  'key show': { flags: ['id'], run: (db, f) => getKey(db, need(f, 'id')) },
  'key list': { flags: ['account'], run: async (db, f) => ({ keys: await listKeys(db, need(f, 'account')) }) },
  'key requests': { flags: ['id', 'limit', 'before'], run: (db, f) => listKeyRequests(db, need(f, 'id'), { limit: f.limit, before: f.before }) },
  'key revoke': { flags: ['id'], run: (db, f) => revokeKey(db, need(f, 'id')) },
  'model set': { flags: Object.keys(modelInput.shape), run: (db, f) => setModel(db, f as never) },
  'model list': { flags: [], run: async (db) => ({ models: await listModels(db) }) },
  'provider set': { flags: Object.keys(providerInput.shape), run: (db, f) => setProvider(db, f as never) },
  // A model's upstream routes, tried by priority (lowest first) with weights among equals (docs/admin.md).
  'route set': { flags: Object.keys(routeInput.shape), run: (db, f) => setRoute(db, f as never) },
  'route list': { flags: ['model'], run: (db, f) => listRoutes(db, need(f, 'model')) },
  'route remove': { flags: Object.keys(routeKey.shape), run: (db, f) => removeRoute(db, f as never) },
  'report uncovered': { flags: ['since', 'limit'], run: (db, f) => uncoveredReport(db, { since: f.since, limit: f.limit }) },
  ...TESTRUN_COMMANDS,
  // A dashboard user of an account; without --password one is generated and shown once, as is the TOTP secret of --totp yes.
  'user create': {
    flags: ['account', 'email', 'password', 'role', 'totp'],
    run: (db, f) => createUser(db, loadSealingKey(), { accountId: need(f, 'account'), email: need(f, 'email'), password: f.password, role: f.role as never, totp: f.totp === 'yes' }),
  },
};

/** `admin help`: every command with its flags, as text for people. */
function help(): string {
  const lines = Object.entries(COMMANDS).map(([name, c]) => `  ${name}${c.flags.map((f) => ` [--${f} …]`).join('')}`);
  return [
    'usage: npm run -s admin -- <command> [--flag value …]   (docs/admin.md)',
    'Each command prints one JSON object; failures {"error": …} with exit code 2 (usage) or 1.',
    'The database is DATABASE_URL, else the one `npm start` recorded in DATA_DIR/connection.json',
    '(DATA_DIR defaults to .data: export it if npm start ran with another), else the defaults.',
    '',
    'commands:',
    ...lines,
    '',
  ].join('\n');
}

async function main(argv: string[]): Promise<number> {
  const words = argv.filter((a) => !a.startsWith('-')).slice(0, 2).join(' ');
  if (words === 'help' || words === '' || argv.includes('--help')) {
    process.stdout.write(help());
    return 0;
  }
  const cmd = COMMANDS[words];
  if (!cmd) {
    throw new UsageError(`unknown command '${words}' (npm run -s admin -- help lists them); commands: ${Object.keys(COMMANDS).join(', ')}`);
  }
  const { values } = parseFlags(argv.slice(2), stringFlags(cmd.flags), { dash: '--' });
  const db = createDb(databaseUrl(loadConfig(withRunningSettings())), 2);
  try {
    const out = await cmd.run(db, values as Flags);
    process.stdout.write(JSON.stringify(out) + '\n');
    return 0;
  } finally {
    await db.destroy();
  }
}

main(process.argv.slice(2)).then(
  (code) => (process.exitCode = code),
  (err: unknown) => {
    const message = err instanceof z.ZodError ? err.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ') : err instanceof Error ? err.message : String(err);
    const usage = err instanceof UsageError || err instanceof z.ZodError || err instanceof InvalidInput;
    process.stdout.write(JSON.stringify({ error: { message, type: usage ? 'usage_error' : 'operation_failed' } }) + '\n');
    process.exitCode = usage ? 2 : 1;
  },
);
