import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { DEFAULT_IMPORT_LIMITS, type ImportLimits, type ItemClass } from '../domain/panel/import-archive';
import { ArchiveUnreadable, readArchive, type ArchiveReport } from '../services/panel/imports/reader';

// `panelctl import-legacy -archive F.tar.gz [-json]` (spec 2 sections 4.3, 4.4.4; PANEL.md section
// 1): the dry run reads a legacy account archive within safety limits and prints the plan and the
// compatibility report. Exit status exactly: 0 read and safe, 3 read but holds refused entries,
// 1 could not be read within the safety limits, 2 usage error.

export const EXIT = { safe: 0, unreadable: 1, usage: 2, refused: 3 } as const;

const USAGE = `usage: panelctl import-legacy -archive <legacy_archive>.tar.gz [-json]
         [-max-entries N] [-max-expanded-mb N] [-max-depth N] [-max-ratio N] [-php-versions 8.2,8.3]
       (dry run: prints the plan and the compatibility report; nothing is changed)
exit status: 0 read and safe, 3 read but holds refused entries, 1 unreadable within the safety limits, 2 usage error`;

class UsageError extends Error {}

const DRY_RUN_FLAGS = {
  archive: { type: 'string' },
  json: { type: 'boolean' },
  'max-entries': { type: 'string' },
  'max-expanded-mb': { type: 'string' },
  'max-depth': { type: 'string' },
  'max-ratio': { type: 'string' },
  'php-versions': { type: 'string' },
} as const;

/** The spec spells flags with one dash (`-archive`); node's parseArgs wants two. */
const dashes = (argv: string[]) => argv.map((a) => (/^-[a-z][a-z-]+(=.*)?$/s.test(a) ? `-${a}` : a));

function positiveInt(raw: string | undefined, flag: string, fallback: number): number {
  if (raw === undefined) return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < 1) throw new UsageError(`-${flag} needs a whole number from 1`);
  return Number(raw);
}

export function parseDryRun(argv: string[]) {
  let values;
  try {
    ({ values } = parseArgs({ args: dashes(argv), options: DRY_RUN_FLAGS, strict: true, allowPositionals: false }));
  } catch (err) {
    throw new UsageError((err as Error).message.replace(/--/g, '-').split('\n')[0]);
  }
  if (!values.archive) throw new UsageError('-archive <file>.tar.gz is needed');
  const limits: ImportLimits = {
    maxEntries: positiveInt(values['max-entries'], 'max-entries', DEFAULT_IMPORT_LIMITS.maxEntries),
    maxExpandedBytes: positiveInt(values['max-expanded-mb'], 'max-expanded-mb', DEFAULT_IMPORT_LIMITS.maxExpandedBytes / 1024 / 1024) * 1024 * 1024,
    maxDepth: positiveInt(values['max-depth'], 'max-depth', DEFAULT_IMPORT_LIMITS.maxDepth),
    maxRatio: positiveInt(values['max-ratio'], 'max-ratio', DEFAULT_IMPORT_LIMITS.maxRatio),
  };
  const phpVersions = (values['php-versions'] ?? '8.2').split(',').map((v) => v.trim()).filter(Boolean);
  if (!phpVersions.every((v) => /^\d{1,2}\.\d{1,2}$/.test(v))) throw new UsageError('-php-versions is a comma-separated list such as 8.2,8.3');
  return { archive: values.archive, json: values.json ?? false, limits, phpVersions };
}

const LABEL: Record<ItemClass, string> = {
  migrated: 'migrated',
  migrated_with_changes: 'migrated with changes',
  not_migrated: 'not migrated',
  refused: 'REFUSED (unsafe)',
  unknown: 'unknown',
};

/** A name as a person can read it: control characters escaped (a refused name may hold them). */
const shown = (s: string) => s.replace(/\p{Cc}/gu, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);

/** The report for a person: the plan, then every item by class. */
export function renderReport(r: ArchiveReport): string {
  const p = r.plan;
  const t = p.totals;
  const lines = [
    `Archive ${r.archive}${r.top ? ` (${r.top}/)` : ''}: ${r.read.entries} entries, ${r.read.compressed_bytes} bytes compressed, ${r.read.expanded_bytes} bytes expanded`,
    '',
    `Plan (main domain ${p.main_domain ?? 'unknown'}): ${t.websites} website(s), ${t.domains} domain(s), ${t.dns_zones} DNS zone(s), ${t.databases} database(s), ${t.disk_mb} MB and ${t.inodes} file(s) of site files`,
    '  1. DNS zones:  ' + (p.dns_zones.map((z) => `${z.name} (${z.records.length} records)`).join(', ') || 'none'),
    '  2. websites:   ' + (p.websites.map((w) => `${w.domain} [PHP ${w.php ?? 'none'}${w.aliases.length ? `, aliases ${w.aliases.join(' ')}` : ''}${w.cron.length ? `, ${w.cron.length} cron line(s)` : ''}]`).join(', ') || 'none'),
    '  3. databases:  ' + (p.databases.map((d) => `${d.name}${d.users.length ? ` (users ${d.users.join(', ')})` : ''}`).join(', ') || 'none'),
    '  4. site files: ' + (p.websites.map((w) => `${w.domain} ${w.files} file(s)`).join(', ') || 'none'),
    '  5. SQL loads:  ' + (p.databases.filter((d) => d.statements).map((d) => `${d.name} ${d.statements} statement(s)`).join(', ') || 'none'),
    '',
    'Compatibility report:',
  ];
  const order: ItemClass[] = ['migrated', 'migrated_with_changes', 'not_migrated', 'unknown', 'refused'];
  for (const cls of order) {
    const items = r.items.filter((i) => i.class === cls);
    if (!items.length) continue;
    lines.push(`  ${LABEL[cls]} (${items.length}):`);
    for (const i of items) lines.push(`    ${i.kind.padEnd(16)} ${shown(i.name)}${i.note ? ` — ${shown(i.note)}` : ''}`);
  }
  lines.push('', r.status === 'safe' ? 'Result: read and safe (exit 0).' : `Result: the archive holds ${r.counts.refused} refused item(s); it cannot be imported (exit 3).`);
  return lines.join('\n') + '\n';
}

async function dryRun(argv: string[]): Promise<number> {
  const o = parseDryRun(argv);
  if (!fs.existsSync(o.archive)) throw new UsageError(`no file ${o.archive}`);
  try {
    const report = await readArchive(o.archive, { limits: o.limits, phpVersions: o.phpVersions });
    process.stdout.write(o.json ? JSON.stringify(report) + '\n' : renderReport(report));
    return report.status === 'safe' ? EXIT.safe : EXIT.refused;
  } catch (err) {
    if (!(err instanceof ArchiveUnreadable)) throw err;
    process.stdout.write(o.json ? JSON.stringify({ error: { code: 'unreadable_archive', message: err.message } }) + '\n' : `panelctl: ${err.message}\n`);
    return EXIT.unreadable;
  }
}

export async function main(argv: string[]): Promise<number> {
  try {
    if (argv[0] !== 'import-legacy') throw new UsageError(argv[0] ? `unknown command "${argv[0]}"` : 'a command is needed');
    return await dryRun(argv.slice(1));
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`panelctl: ${err.message}\n${USAGE}\n`);
    return EXIT.usage;
  }
}
