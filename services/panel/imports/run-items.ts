import { spawn } from 'node:child_process';
import { randomBytes, X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import { PassThrough, Writable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import type { Client } from '@temporalio/client';
import { PanelError } from '../../../domain/panel/errors';
import { entryProblem, normalPath, type ImportLimits } from '../../../domain/panel/import-archive';
import { checkStatement, SqlSplitter } from '../../../domain/panel/import-sql';
import { HOSTING_NODE } from '../../../domain/panel/node-ops';
import type { NodeFiles, SiteWriter } from '../../../domain/panel/own-node';
import type { Db } from '../../../platform/db';
import type { Logger } from '../../../platform/logger';
import type { Actor } from '../shared/actor';
import type { NodeOpSettings } from '../sites/client';
import { createDatabase } from '../databases/databases';
import { createZone, type DnsSettings } from '../dns/dns';
import { createSite, sitesDeps, type SiteSettings } from '../sites/sites';
import { attachCertificate } from '../certificates/certificates';
import { readCertificate } from './certificates';
import { holdPasswords, type ImportItemRow, type ImportRow } from './imports';
import { eachEntry } from './stream';

// The items of an import run, one at a time (PANEL.md section 4, `import-<id>`): each is performed
// with the panel's own services (zones, sites, databases — the same checks and node operations as
// any create) or, for site files and SQL dumps, by streaming the kept archive copy onto the panel's
// hosting node, and then recorded done. An item is safe to perform again after a crash: a zone,
// site or database created by an earlier attempt is adopted, files are rewritten whole (same
// content), and a dump is loaded into a freshly emptied database, so nothing ends up twice.

export interface ImportRunDeps {
  db: Db;
  temporal: Client;
  logger: Logger;
  nodeOps: NodeOpSettings;
  dns: DnsSettings;
  sites?: SiteSettings;
  limits: ImportLimits;
  /** the panel's own hosting node this process drives (site files and SQL loads go there), else null */
  hostingNode: () => NodeFiles | null;
  /** how long a site or database may take to become active */
  waitMs?: number;
  /** imported certificates' keys are sealed with it (the panel's sealing key) */
  sealingKey: Buffer;
}

/** Tells Temporal the item is alive (long copies and loads); a dead worker's attempt is retried elsewhere. */
export type Beat = () => void;

function throttled(beat: Beat | undefined): Beat {
  let last = 0;
  return () => {
    if (!beat || Date.now() - last < 1000) return;
    last = Date.now();
    beat();
  };
}

async function actorOf(db: Db, loginId: string): Promise<Actor> {
  const l = await db('panel_logins as l').join('panel_orgs as o', 'o.id', 'l.org_id').where('l.id', loginId).first('l.id', 'l.username', 'l.role', 'l.org_id', 'o.path', 'o.type');
  if (!l) throw new Error(`the login ${loginId} that uploaded the import is gone`);
  return { loginId: l.id, username: l.username, role: l.role, orgId: l.org_id, orgPath: l.path, orgType: l.type };
}

/** Waits for the node to apply the site or database, heartbeating meanwhile: a slow node must not look like a dead worker (the activity's heartbeat timeout is 20 s). */
async function waitActive(db: Db, table: 'panel_sites' | 'panel_databases', id: string, ms: number, beat: Beat): Promise<void> {
  const until = Date.now() + ms;
  for (;;) {
    beat();
    const row = await db(table).where({ id }).first('status', 'error');
    if (row?.status === 'active') return;
    if (!row || row.status === 'failed') throw new Error(`${table === 'panel_sites' ? 'the website' : 'the database'} failed on its node: ${row?.error ?? 'gone'}`);
    if (Date.now() > until) throw new Error(`${table === 'panel_sites' ? 'the website' : 'the database'} is not active after ${ms} ms`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

const conflictOnly = async <T>(create: () => Promise<T>): Promise<T | null> => {
  try {
    return await create();
  } catch (err) {
    if (err instanceof PanelError && err.code === 'conflict') return null;
    throw err;
  }
};

/** Performs item `seq` of import `importId` (if not done yet) and records it done. */
export async function runImportItem(deps: ImportRunDeps, importId: string, seq: number, heartbeat?: Beat): Promise<{ state: ImportItemRow['state']; detail: Record<string, unknown> }> {
  const imp: ImportRow = await deps.db('panel_imports').where({ id: importId }).first();
  const item: ImportItemRow = await deps.db('panel_import_items').where({ import_id: importId, seq }).first();
  if (!imp || !item) throw new Error(`no item ${seq} of import ${importId}`);
  if (item.state === 'done' || item.state === 'pre_existing') return { state: item.state, detail: item.detail };
  await deps.db('panel_import_items').where({ import_id: importId, seq }).update({ state: 'running', attempts: item.attempts + 1, error: null });
  const actor = await actorOf(deps.db, imp.created_by);
  const base = { db: deps.db, temporal: deps.temporal, nodeOps: deps.nodeOps, logger: deps.logger };
  const waitMs = deps.waitMs ?? 120_000;
  let detail: Record<string, unknown> = { ...item.detail };
  const beat = throttled(heartbeat);
  switch (item.step) {
    case 'dns_zones': {
      const zone = imp.plan.dns_zones.find((z) => z.name === item.name)!;
      const made = await conflictOnly(() => createZone(deps.db, deps.dns, actor, imp.org_id, { name: zone.name, records: zone.records }));
      if (!made && !(await deps.db('panel_dns_zones').where({ org_id: imp.org_id, name: zone.name }).first('id'))) throw new Error(`the zone ${zone.name} is now held by another account`);
      break;
    }
    case 'websites': {
      const w = imp.plan.websites.find((x) => x.domain === item.name)!;
      await conflictOnly(() => createSite(sitesDeps(deps, deps.sites), actor, imp.org_id, { domain: w.domain, aliases: w.aliases, php_version: w.php, cron: w.cron, php_values: w.php_values }));
      const site = await deps.db('panel_sites').where({ org_id: imp.org_id, domain: w.domain }).first('id', 'node_name');
      if (!site) throw new Error(`the domain ${w.domain} is now used by another account`);
      await waitActive(deps.db, 'panel_sites', site.id, waitMs, beat);
      detail = { ...detail, node: site.node_name };
      break;
    }
    case 'certificates': {
      const c = (imp.plan.certificates ?? []).find((x) => x.site === item.name)!;
      const site = await deps.db('panel_sites').where({ org_id: imp.org_id, domain: c.site }).first('id', 'tls_certificate');
      if (!site) throw new Error(`the website ${c.site} is not in the account`);
      // attached by an earlier attempt: not sent again
      if (!site.tls_certificate || new X509Certificate(site.tls_certificate).fingerprint256 !== c.fingerprint_sha256) {
        const pem = await readCertificate(imp.archive_path!, c, deps.limits);
        try {
          await attachCertificate({ ...sitesDeps(deps, deps.sites), sealingKey: deps.sealingKey }, actor, site.id, { certificate: pem.certificate, private_key: pem.key });
        } catch (err) {
          // valid at the dry run, not any more (expired since): reported, the import goes on
          if (!(err instanceof PanelError && err.code === 'validation_failed')) throw err;
          detail = { ...detail, not_migrated: String(err.details.detail) };
          break;
        }
      }
      await waitActive(deps.db, 'panel_sites', site.id, waitMs, beat);
      break;
    }
    case 'databases': {
      const d = imp.plan.databases.find((x) => x.name === item.name)!;
      const user = d.users.find((u) => /^[a-z0-9_]{1,32}$/.test(u.toLowerCase()))?.toLowerCase();
      const made = await conflictOnly(() => createDatabase(base, actor, imp.org_id, { name: d.name, ...(user ? { user } : {}) }));
      const row = await deps.db('panel_databases').where({ org_id: imp.org_id, name: d.name }).first('id', 'db_user', 'node_name');
      if (!row) throw new Error(`the database name ${d.name} is taken on its node by another account`);
      await waitActive(deps.db, 'panel_databases', row.id, waitMs, beat);
      // the password exists only now: held in memory for the run's result, never written anywhere
      if (made && 'password' in made) holdPasswords(importId, [{ database: d.name, user: row.db_user, password: String(made.password) }]);
      detail = {
        ...detail,
        database_id: row.id,
        user: row.db_user,
        node: row.node_name,
        password: made ? 'shown once in the result of this run (held by the process that ran this step)' : 'created by an earlier attempt and not shown by this run',
        // a worker that died, or another process than the one read, never shows it: a reset gives a new one
        password_reset: `if it was not noted: POST /v1/databases/${row.id}/password {"confirm":"${row.id}"} (the console: Reset password)`,
      };
      break;
    }
    case 'site_files': {
      const site = await deps.db('panel_sites').where({ org_id: imp.org_id, domain: item.name }).first('id', 'node_name');
      const node = deps.hostingNode();
      if (!site || site.node_name !== HOSTING_NODE || !node) {
        detail = { ...detail, not_migrated: 'file copy for a site on another node is not importable yet' };
        break;
      }
      const docroots = imp.plan.websites.map((w) => w.docroot);
      const files = node.site({ id: site.id, domain: item.name });
      // the node's placeholder pages of a new site go (only while unchanged), so the imported index is what is served
      files.removeWelcomePages();
      // as the website's own user (spec 2 section 4.4.4), where the node has site users
      const copied = await copySiteFiles(imp.archive_path!, String(item.detail.docroot), docroots, files.writer(), deps.limits, beat);
      detail = { ...detail, ...copied };
      break;
    }
    case 'sql_loads': {
      const row = await deps.db('panel_databases').where({ org_id: imp.org_id, name: item.name }).first('node_name');
      const node = deps.hostingNode();
      if (!row || row.node_name !== HOSTING_NODE || !node) {
        detail = { ...detail, not_migrated: 'the database is not on the panel’s hosting node' };
        break;
      }
      detail = { ...detail, ...(await loadDump(imp.archive_path!, item.name, node.mariadbSocket, deps.limits, beat)) };
      break;
    }
  }
  await deps.db('panel_import_items').where({ import_id: importId, seq }).update({ state: 'done', detail: JSON.stringify(detail), done_at: deps.db.fn.now() });
  return { state: 'done', detail };
}

/** Records an item's failure (the run stops; run again to retry it). */
export async function failImportItem(db: Db, importId: string, seq: number, error: string): Promise<void> {
  await db('panel_import_items').where({ import_id: importId, seq }).update({ state: 'failed', error: error.slice(0, 2000) });
}

/** Ends a run: done (archive copy deleted) when every item is done or pre-existing, else stopped with the error. */
export async function finishImportRun(db: Db, importId: string, error: string | null): Promise<{ status: 'done' | 'stopped' }> {
  const left = await db('panel_import_items').where({ import_id: importId }).whereNotIn('state', ['done', 'pre_existing']).count<{ n: string }[]>('* as n');
  const status = Number(left[0].n) === 0 && !error ? 'done' : 'stopped';
  const imp = await db('panel_imports').where({ id: importId }).first('archive_path');
  await db('panel_imports').where({ id: importId }).update({ status, error, updated_at: db.fn.now(), ...(status === 'done' ? { archive_path: null } : {}) });
  if (status === 'done' && imp?.archive_path) fs.rmSync(imp.archive_path, { force: true });
  return { status };
}

/** The items a run still has to perform, in order. */
export async function importItemsToRun(db: Db, importId: string): Promise<Array<{ seq: number; step: string; name: string }>> {
  return db('panel_import_items').where({ import_id: importId }).whereNotIn('state', ['done', 'pre_existing']).orderBy('seq').select('seq', 'step', 'name');
}

// ---- files and dumps from the archive ----------------------------------------------------------

const TEMP_FILE = /\.import-\d+\.tmp$/;

/**
 * Copies homedir/<docroot>/** (minus nested document roots of other sites) into the site's docroot
 * through `writer` (the node's, running as the site's own user where it has site users), each file
 * written whole then renamed. The writer is ended here, whatever happens.
 */
export async function copySiteFiles(archive: string, docroot: string, allDocroots: string[], writer: SiteWriter, limits: ImportLimits, beat: Beat) {
  const prefix = `homedir/${docroot}/`;
  const nested = allDocroots.filter((d) => d !== docroot && d.startsWith(`${docroot}/`)).map((d) => `homedir/${d}/`);
  let files = 0;
  let bytes = 0;
  const skipped: string[] = [];
  try {
    // an attempt killed mid-file left its half-written temp file: the files are copied again whole
    await writer.sweep(TEMP_FILE);
    await eachEntry(archive, limits, async (rel, entry, body) => {
      beat();
      if (!rel.startsWith(prefix) || nested.some((n) => rel.startsWith(n))) return false;
      if (entryProblem({ path: entry.path, type: entry.type, mode: entry.mode ?? 0, size: entry.size ?? 0, linkpath: entry.linkpath }, limits.maxDepth)) throw new Error(`the archive holds an unsafe entry ${JSON.stringify(entry.path)}`);
      const inner = rel.slice(prefix.length).replace(/\/$/, '');
      const segs = normalPath(inner);
      if (!segs || !segs.length) return false;
      const dest = segs.join('/');
      const folder = entry.type === 'Directory' ? dest : segs.slice(0, -1).join('/');
      if (folder) await writer.mkdir(folder);
      if (entry.type === 'Directory') return false;
      if (entry.type === 'SymbolicLink') {
        // a link is kept only when it stays inside this site's document root
        const to = normalPath([...segs.slice(0, -1), entry.linkpath ?? ''].join('/'));
        if (!to) skipped.push(inner);
        else await writer.symlink(dest, entry.linkpath!);
        return false;
      }
      if (entry.type === 'Link') {
        const src = entry.linkpath ?? '';
        const relSrc = src.split('/').slice(1).join('/');
        if (!relSrc.startsWith(prefix)) skipped.push(inner);
        else await writer.copy(normalPath(relSrc.slice(prefix.length))!.join('/'), dest);
        return false;
      }
      const data = new PassThrough();
      await Promise.all([body(data), writer.file(dest, `${dest}.import-${process.pid}.tmp`, (entry.mode ?? 0o644) & 0o755, data)]);
      files++;
      bytes += entry.size ?? 0;
      return true;
    });
    await writer.done();
  } catch (err) {
    await writer.done().catch(() => {});
    throw err;
  }
  return { copied_files: files, copied_bytes: bytes, ...(skipped.length ? { links_not_kept: skipped.slice(0, 20) } : {}) };
}

/** Empties the database and loads its dump, every statement checked again on the way; returns the statements run. */
export async function loadDump(archive: string, database: string, socket: string, limits: ImportLimits, beat: Beat = () => {}): Promise<{ statements: number }> {
  // a delimiter the dump cannot predict (the client takes at most 15 characters), so no statement
  // text can end a checked statement early
  const DELIMITER = `_${randomBytes(6).toString('hex')}_`;
  const child = spawn('mariadb', ['--no-defaults', `--socket=${socket}`, `--user=${os.userInfo().username}`, '--batch', `--delimiter=${DELIMITER}`], { stdio: ['pipe', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()).slice(-4000));
  const exited = new Promise<number>((resolve) => child.on('close', (code) => resolve(code ?? 1)));
  const write = (s: string) => (child.stdin.write(s) ? Promise.resolve() : new Promise<void>((r) => child.stdin.once('drain', () => r())));
  // a dump loaded again (a crash mid-load) starts from an empty database; its grants stay
  await write(`DROP DATABASE IF EXISTS \`${database}\`\n${DELIMITER}\nCREATE DATABASE \`${database}\`\n${DELIMITER}\nUSE \`${database}\`\n${DELIMITER}\n`);
  let statements = 0;
  const splitter = new SqlSplitter();
  const send = async (list: ReturnType<SqlSplitter['push']>) => {
    for (const st of list) {
      const v = checkStatement(st, database);
      if (v.action === 'refuse') throw new Error(`refused statement: ${v.why}`);
      if (v.action === 'skip') continue;
      if (v.sql.includes(DELIMITER)) throw new Error(`refused statement on line ${st.line}: it holds the load's delimiter`);
      statements++;
      beat();
      await write(`${v.sql}\n${DELIMITER}\n`);
    }
  };
  try {
    await eachEntry(archive, limits, async (rel, _entry, body) => {
      if (rel !== `mysql/${database}.sql`) return false;
      const decoder = new StringDecoder('utf8');
      await body(
        new Writable({
          write(chunk: Buffer, _e, cb) {
            send(splitter.push(decoder.write(chunk))).then(() => cb(), cb);
          },
          final(cb) {
            send(splitter.push(decoder.end()).concat(splitter.end())).then(() => cb(), cb);
          },
        }),
      );
      return true;
    });
  } finally {
    child.stdin.end();
  }
  const code = await exited;
  if (code !== 0) throw new Error(`mariadb failed loading ${database}: ${stderr.trim().split('\n').slice(-2).join(' | ')}`);
  return { statements };
}
