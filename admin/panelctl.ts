import fs from 'node:fs';
import { PanelError } from '../domain/panel/errors';
import { DEFAULT_IMPORT_LIMITS, type ImportLimits, type ItemClass } from '../domain/panel/import-archive';
import { parseFlags, UsageError } from '../platform/cli-args';
import { loadConfig } from '../platform/config';
import { databaseUrl } from '../platform/database-url';
import { createDb } from '../platform/db';
import { withRunningSettings } from '../platform/running-settings';
import { ArchiveUnreadable, readArchive, type ArchiveReport } from '../services/panel/imports/reader';
import { operatorResetPassword } from '../services/panel/logins/logins';

// `panelctl import-legacy -archive F.tar.gz [-json]` (spec 2 sections 4.3, 4.4.4; PANEL.md section
// 1): the dry run reads a legacy account archive within safety limits and prints the plan and the
// compatibility report. Exit status exactly: 0 read and safe, 3 read but holds refused entries,
// 1 could not be read within the safety limits, 2 usage error.
// `panelctl reset-password -login NAME [-json]`, run where the panel's database is reachable: a
// one-time temporary password printed once (exit 0), 1 for an unknown login, 2 usage error.

export const EXIT = { safe: 0, unreadable: 1, usage: 2, refused: 3 } as const;

const USAGE = `usage: panelctl import-legacy -archive <legacy_archive>.tar.gz [-json]
         [-max-entries N] [-max-expanded-mb N] [-max-depth N] [-max-ratio N] [-php-versions 8.2,8.3]
       (dry run: prints the plan and the compatibility report; nothing is changed)
       panelctl import-legacy -archive F.tar.gz -account ID -api URL -token-file F [-run -yes] [-json]
       (uploads into the customer account: the panel's report and quota check; with -run -yes runs the import)
exit status: 0 read and safe, 3 read but holds refused entries, 1 unreadable within the safety limits, 2 usage error
       panelctl reset-password -login <username> [-json]
       (a lost password: prints a temporary password once, to be changed at the next sign-in; ends the
       login's sessions and API tokens. The database is DATABASE_URL, else the one npm start recorded in
       DATA_DIR/connection.json)`;

const DRY_RUN_FLAGS = {
  archive: { type: 'string' },
  account: { type: 'string' },
  api: { type: 'string' },
  'token-file': { type: 'string' },
  run: { type: 'boolean' },
  yes: { type: 'boolean' },
  json: { type: 'boolean' },
  'max-entries': { type: 'string' },
  'max-expanded-mb': { type: 'string' },
  'max-depth': { type: 'string' },
  'max-ratio': { type: 'string' },
  'php-versions': { type: 'string' },
} as const;

function positiveInt(raw: string | undefined, flag: string, fallback: number): number {
  if (raw === undefined) return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < 1) throw new UsageError(`-${flag} needs a whole number from 1`);
  return Number(raw);
}

export function parseDryRun(argv: string[]) {
  const { values } = parseFlags(argv, DRY_RUN_FLAGS, { dash: '-' });
  if (!values.archive) throw new UsageError('-archive <file>.tar.gz is needed');
  const limits: ImportLimits = {
    maxEntries: positiveInt(values['max-entries'], 'max-entries', DEFAULT_IMPORT_LIMITS.maxEntries),
    maxExpandedBytes: positiveInt(values['max-expanded-mb'], 'max-expanded-mb', DEFAULT_IMPORT_LIMITS.maxExpandedBytes / 1024 / 1024) * 1024 * 1024,
    maxDepth: positiveInt(values['max-depth'], 'max-depth', DEFAULT_IMPORT_LIMITS.maxDepth),
    maxRatio: positiveInt(values['max-ratio'], 'max-ratio', DEFAULT_IMPORT_LIMITS.maxRatio),
  };
  const phpVersions = (values['php-versions'] ?? '8.2').split(',').map((v) => v.trim()).filter(Boolean);
  if (!phpVersions.every((v) => /^\d{1,2}\.\d{1,2}$/.test(v))) throw new UsageError('-php-versions is a comma-separated list such as 8.2,8.3');
  const remote = [values.account, values.api, values['token-file']];
  if (remote.some((v) => v !== undefined) && remote.some((v) => v === undefined)) throw new UsageError('-account, -api and -token-file go together');
  if ((values.run || values.yes) && !values.account) throw new UsageError('-run needs -account ID -api URL -token-file F');
  if (values.run && !values.yes) throw new UsageError('-run changes the account: confirm with -yes');
  const target = values.account ? { account: values.account, api: values.api!.replace(/\/$/, ''), tokenFile: values['token-file']!, run: values.run ?? false } : null;
  return { archive: values.archive, json: values.json ?? false, limits, phpVersions, target };
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

const LIMIT_FLAG: Record<keyof ImportLimits, string> = { maxEntries: '-max-entries', maxExpandedBytes: '-max-expanded-mb', maxDepth: '-max-depth', maxRatio: '-max-ratio' };

/** A tar bomb in words: which limit (and the flag that sets it) stopped the reading. */
const stoppedBy = (s: NonNullable<ArchiveReport['stopped_by']>) => `could not be read within the safety limits: the ${LIMIT_FLAG[s.limit]} limit stopped the reading at ${s.message}`;

/** The report for a person: the plan, then every item by class. */
export function renderReport(r: ArchiveReport): string {
  const p = r.plan;
  const t = p.totals;
  const lines = [
    `Archive ${r.archive}${r.top ? ` (${r.top}/)` : ''}: ${r.read.entries} entries, ${r.read.compressed_bytes} bytes compressed, ${r.read.expanded_bytes} bytes expanded`,
    '',
    `Plan (main domain ${p.main_domain ?? 'unknown'}): ${t.websites} website(s), ${t.domains} domain(s), ${t.dns_zones} DNS zone(s), ${t.databases} database(s), ${t.disk_mb} MB and ${t.inodes} file(s) of site files`,
    '  1. DNS zones:  ' + (p.dns_zones.map((z) => `${z.name} (${z.records.length} records)`).join(', ') || 'none'),
    '  2. websites:   ' + (p.websites.map((w) => `${w.domain} [PHP ${w.php ?? 'none'}${w.aliases.length ? `, aliases ${w.aliases.join(' ')}` : ''}${w.cron.length ? `, ${w.cron.length} cron line(s)` : ''}${w.php_values ? `, PHP values ${Object.entries(w.php_values).map(([k, v]) => `${k}=${v}`).join(' ')}` : ''}]`).join(', ') || 'none'),
    '  3. certificates: ' + ((p.certificates ?? []).map((c) => `${c.site} (${c.certificate}, until ${c.not_after.slice(0, 10)})`).join(', ') || 'none'),
    '  4. databases:  ' + (p.databases.map((d) => `${d.name}${d.users.length ? ` (users ${d.users.join(', ')})` : ''}`).join(', ') || 'none'),
    '  5. site files: ' + (p.websites.map((w) => `${w.domain} ${w.files} file(s)`).join(', ') || 'none'),
    '  6. SQL loads:  ' + (p.databases.filter((d) => d.statements).map((d) => `${d.name} ${d.statements} statement(s)`).join(', ') || 'none'),
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
  lines.push(
    '',
    r.stopped_by
      ? `Result: ${stoppedBy(r.stopped_by)} (exit 1).`
      : r.status === 'safe'
        ? 'Result: read and safe (exit 0).'
        : `Result: the archive holds ${r.counts.refused} refused item(s); it cannot be imported (exit 3).`,
  );
  return lines.join('\n') + '\n';
}

async function dryRun(argv: string[]): Promise<number> {
  const o = parseDryRun(argv);
  if (!fs.existsSync(o.archive)) throw new UsageError(`no file ${o.archive}`);
  if (o.target) {
    if (!fs.existsSync(o.target.tokenFile)) throw new UsageError(`no file ${o.target.tokenFile}`);
    return remoteImport(o.archive, o.target, o.json);
  }
  try {
    const report = await readArchive(o.archive, { limits: o.limits, phpVersions: o.phpVersions });
    process.stdout.write(o.json ? JSON.stringify(report) + '\n' : renderReport(report));
    // a tar bomb was not read whole: spec 4.4.4 gives it exit 1, not 3 (the report says how far it got)
    return report.stopped_by ? EXIT.unreadable : report.status === 'safe' ? EXIT.safe : EXIT.refused;
  } catch (err) {
    if (!(err instanceof ArchiveUnreadable)) throw err;
    process.stdout.write(o.json ? JSON.stringify({ error: { code: 'unreadable_archive', message: err.message } }) + '\n' : `panelctl: ${err.message}\n`);
    return EXIT.unreadable;
  }
}

const out = (json: boolean, value: unknown, text: string) => process.stdout.write(json ? JSON.stringify(value) + '\n' : text);

/** The import through the panel API: upload (report and quota check), then with -run: run and follow the progress. */
async function remoteImport(archive: string, t: { account: string; api: string; tokenFile: string; run: boolean }, json: boolean): Promise<number> {
  const token = fs.readFileSync(t.tokenFile, 'utf8').trim();
  const call = async (method: string, p: string, body?: Buffer) => {
    const res = await fetch(t.api + p, { method, headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/gzip' } : {}) }, body });
    const text = await res.text();
    return { status: res.status, json: text ? JSON.parse(text) : {} };
  };
  const up = await call('POST', `/v1/orgs/${encodeURIComponent(t.account)}/imports?name=${encodeURIComponent(archive.split('/').pop()!)}`, fs.readFileSync(archive));
  if (up.status !== 201) {
    out(json, up.json, `panelctl: the panel refused the import (${up.status}): ${up.json.error?.message ?? JSON.stringify(up.json)}\n`);
    return up.status === 422 ? EXIT.refused : EXIT.unreadable;
  }
  const quota = (up.json.quota.lines as Array<{ limit: string; used: number; adding: number; value: number; level: string }>).map((l) => `  ${l.limit}: ${l.used} used + ${l.adding} imported of ${l.value} (${l.level})`);
  if (!t.run) {
    out(json, up.json, `Import ${up.json.id} uploaded (status ${up.json.status}); quota check:\n${quota.join('\n') || '  no limits apply'}\nRun it with -run -yes, or in the console.\n`);
    return EXIT.safe;
  }
  const started = await call('POST', `/v1/imports/${up.json.id}/run`);
  if (started.status !== 202) {
    out(json, started.json, `panelctl: the run was refused (${started.status}): ${started.json.error?.message}\n`);
    return EXIT.unreadable;
  }
  const tty = !json && process.stdout.isTTY;
  for (;;) {
    const r = await call('GET', `/v1/imports/${up.json.id}`);
    const c = r.json.progress?.counts;
    if (tty && c) {
      const width = 30;
      const filled = Math.round(((c.done + c.pre_existing) / Math.max(1, c.total)) * width);
      const cur = r.json.progress.current;
      process.stdout.write(`\r[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${c.done + c.pre_existing}/${c.total} ${cur ? `${cur.step} ${cur.name}` : ''}`.padEnd(100));
    }
    if (r.json.status === 'done' || r.json.status === 'stopped') {
      if (tty) process.stdout.write('\n');
      const pw = (r.json.passwords ?? []) as Array<{ database: string; user: string; password: string }>;
      const failed = (r.json.items as Array<{ step: string; name: string; error: string | null }>).filter((i) => i.error);
      out(json, r.json, `Import ${r.json.id}: ${r.json.status}. ${c.done} item(s) done, ${c.pre_existing} pre-existing (left untouched).\n${failed.map((i) => `  failed: ${i.step} ${i.name}: ${i.error}\n`).join('')}${pw.length ? `New database passwords (shown once, stored nowhere):\n${pw.map((p) => `  ${p.database} user ${p.user}: ${p.password}\n`).join('')}` : ''}`);
      return r.json.status === 'done' ? EXIT.safe : EXIT.unreadable;
    }
    await new Promise((res) => setTimeout(res, 500));
  }
}

async function resetPassword(argv: string[]): Promise<number> {
  const { values } = parseFlags(argv, { login: { type: 'string' }, json: { type: 'boolean' } }, { dash: '-' });
  if (!values.login) throw new UsageError('reset-password needs -login <username>');
  const json = values.json ?? false;
  const db = createDb(databaseUrl(loadConfig(withRunningSettings())), 2);
  try {
    const r = await operatorResetPassword(db, values.login);
    out(
      json,
      r,
      `Temporary password for ${r.username} (shown once, stored nowhere; it must be changed at the next sign-in):\n  ${r.temporary_password}\n` +
        `${r.sessions_ended} session(s) ended, ${r.tokens_revoked} API token(s) revoked; the audit log has the reset.\n`,
    );
    return 0;
  } catch (err) {
    if (!(err instanceof PanelError) || err.code !== 'not_found') throw err;
    out(json, { error: { code: 'not_found', message: `no login named "${values.login}"` } }, `panelctl: no login named "${values.login}"\n`);
    return 1;
  } finally {
    await db.destroy();
  }
}

export async function main(argv: string[]): Promise<number> {
  try {
    if (argv[0] === 'reset-password') return await resetPassword(argv.slice(1));
    if (argv[0] !== 'import-legacy') throw new UsageError(argv[0] ? `unknown command "${argv[0]}"` : 'a command is needed');
    return await dryRun(argv.slice(1));
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`panelctl: ${err.message}\n${USAGE}\n`);
    return EXIT.usage;
  }
}
