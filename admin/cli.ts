import { parseArgs } from 'node:util';
import { z } from 'zod';
import type { KeyFormat } from '../platform/api-keys';
import { loadConfig } from '../platform/config';
import { createDb, type Db } from '../platform/db';
import { databaseUrl } from '../platform/database-url';
import { addCredits, createAccount, createKey, deactivateAccount, listModels, modelInput, providerInput, revokeKey, setModel, setProvider } from './operations';

// Operator CLI: `npm run -s admin -- <command> [flags]`. Prints exactly one JSON object on
// stdout; failures print {"error": …} and exit non-zero.

type Flags = Record<string, string | undefined>;
type Command = (db: Db, f: Flags) => Promise<unknown>;

const need = (f: Flags, name: string): string => {
  const v = f[name];
  if (!v) throw new UsageError(`--${name} is required`);
  return v;
};

class UsageError extends Error {}

const COMMANDS: Record<string, { flags: string[]; run: Command }> = {
  'account create': {
    flags: ['name', 'tier', 'credits', 'plan-expires-at'],
    run: (db, f) => createAccount(db, { name: need(f, 'name'), tier: f.tier as never, credits: f.credits, planExpiresAt: f['plan-expires-at'] ?? null }),
  },
  'account deactivate': { flags: ['account'], run: (db, f) => deactivateAccount(db, need(f, 'account')) },
  'credits add': { flags: ['account', 'credits'], run: (db, f) => addCredits(db, need(f, 'account'), need(f, 'credits')) },
  'key create': {
    flags: ['account', 'label', 'format', 'spend-limit', 'rpm', 'expires-at', 'models'],
    run: (db, f) => {
      const format = z.enum(['gw_ai', 'rk_live', 'mt']).parse(f.format ?? 'gw_ai') as KeyFormat;
      for (const keyed of ['spend-limit', 'rpm', 'expires-at', 'models']) {
        if (f[keyed] !== undefined) throw new UsageError(`--${keyed} belongs to keyed-variant keys, which this version does not manage yet`);
      }
      return createKey(db, { accountId: need(f, 'account'), label: f.label, format });
    },
  },
  'key revoke': { flags: ['id'], run: (db, f) => revokeKey(db, need(f, 'id')) },
  'model set': { flags: Object.keys(modelInput.shape), run: (db, f) => setModel(db, f as never) },
  'model list': { flags: [], run: async (db) => ({ models: await listModels(db) }) },
  'provider set': { flags: Object.keys(providerInput.shape), run: (db, f) => setProvider(db, f as never) },
};

async function main(argv: string[]): Promise<number> {
  const words = argv.filter((a) => !a.startsWith('-')).slice(0, 2).join(' ');
  const cmd = COMMANDS[words];
  if (!cmd) {
    throw new UsageError(`unknown command '${words}'; commands: ${Object.keys(COMMANDS).join(', ')}`);
  }
  const { values } = parseArgs({
    args: argv.slice(2),
    options: Object.fromEntries(cmd.flags.map((f) => [f, { type: 'string' as const }])),
    strict: true,
  });
  const db = createDb(databaseUrl(loadConfig()), 2);
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
    process.stdout.write(JSON.stringify({ error: { message, type: err instanceof UsageError || err instanceof z.ZodError ? 'usage_error' : 'operation_failed' } }) + '\n');
    process.exitCode = err instanceof UsageError || err instanceof z.ZodError ? 2 : 1;
  },
);
