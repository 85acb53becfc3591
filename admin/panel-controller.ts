import { PanelError } from '../domain/panel/errors';
import { parseFlags, stringFlags, UsageError } from '../platform/cli-args';
import { ConfigError, loadConfig } from '../platform/config';
import { databaseUrl } from '../platform/database-url';
import { createDb } from '../platform/db';
import { withRunningSettings } from '../platform/running-settings';
import { labelNode, setDraining, type NodeLabels } from '../services/panel/nodes/nodes';

// `panel-controller label|drain|undrain …` (spec 2 section 4.3, PANEL.md section 1): edits node
// records in the database of `npm start` (DATABASE_URL, else the one recorded in
// DATA_DIR/connection.json, as the admin CLI reads it), audited with no login as the actor
// (the operator's command line). Prints one JSON object; exit 0 done, 1 failed (an unknown node),
// 2 usage error.

const USAGE = `usage: panel-controller label -node N [-logical-region R] [-physical-region P] [-zone Z] [-cell C] [-roles web,db,...]
       panel-controller drain N      (the node gets no new sites)
       panel-controller undrain N
An empty value clears a label (-zone ''); -roles '' returns to the roles the node's facts say.`;

const LABEL_FLAGS = { 'logical-region': 'logical_region', 'physical-region': 'physical_region', zone: 'zone', cell: 'cell' } as const;
const LABEL_FLAG_NAMES = Object.keys(LABEL_FLAGS) as Array<keyof typeof LABEL_FLAGS>;

type Command = (argv: string[]) => { node: string; run: (db: ReturnType<typeof createDb>) => Promise<unknown> };

const drainCommand =
  (draining: boolean): Command =>
  (argv) => {
    const { values, positionals } = parseFlags(argv, stringFlags(['node']), { dash: '-', positionals: true });
    const names = [...positionals, ...(values.node ? [values.node] : [])];
    if (names.length !== 1) throw new UsageError(`${draining ? 'drain' : 'undrain'} takes one node name`);
    return { node: names[0], run: (db) => setDraining(db, null, names[0], draining) };
  };

const COMMANDS: Record<string, Command> = {
  label(argv) {
    const { values: flags } = parseFlags(argv, stringFlags(['node', 'roles', ...LABEL_FLAG_NAMES]), { dash: '-' });
    const node = flags.node;
    if (!node) throw new UsageError('label needs -node N');
    const labels: NodeLabels = {};
    for (const [flag, field] of Object.entries(LABEL_FLAGS)) {
      const v = flags[flag as keyof typeof flags];
      if (v !== undefined) labels[field] = v.trim() || null;
    }
    if (flags.roles !== undefined) {
      const roles = flags.roles.split(',').map((r) => r.trim()).filter(Boolean);
      labels.roles = roles.length ? roles : null;
    }
    if (!Object.keys(labels).length) throw new UsageError('label needs at least one of -logical-region, -physical-region, -zone, -cell, -roles');
    return { node, run: (db) => labelNode(db, null, node, labels) };
  },
  drain: drainCommand(true),
  undrain: drainCommand(false),
};

const print = (o: unknown) => process.stdout.write(JSON.stringify(o) + '\n');

async function main(argv: string[]): Promise<number> {
  let command: ReturnType<Command>;
  try {
    const cmd = COMMANDS[argv[0] ?? ''];
    if (!cmd) throw new UsageError(argv[0] ? `unknown command "${argv[0]}"` : 'a command is needed');
    command = cmd(argv.slice(1));
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    print({ error: { code: 'usage_error', message: err.message } });
    process.stderr.write(`panel-controller: ${err.message}\n${USAGE}\n`);
    return 2;
  }
  const db = createDb(databaseUrl(loadConfig(withRunningSettings())), 2);
  try {
    print(await command.run(db));
    return 0;
  } catch (err) {
    if (!(err instanceof PanelError)) throw err;
    if (err.code === 'not_found') {
      print({ error: { code: 'not_found', message: `no node named "${command.node}"`, details: { node: command.node } } });
      return 1;
    }
    print(err.toBody());
    if (err.code !== 'validation_failed') return 1;
    process.stderr.write(`panel-controller: ${err.message}\n${USAGE}\n`);
    return 2;
  } finally {
    await db.destroy();
  }
}

main(process.argv.slice(2)).then(
  (code) => (process.exitCode = code),
  (err: unknown) => {
    const message = err instanceof Error ? err.message : String(err);
    print({ error: { code: err instanceof ConfigError ? 'config_error' : 'operation_failed', message } });
    process.exitCode = 1;
  },
);
