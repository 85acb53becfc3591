import path from 'node:path';
import { Writable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import type { ReadEntry } from 'tar';
import type { DnsRecord } from '../../../domain/panel/dns';
import {
  choosePhp,
  entryProblem,
  isImportDomain,
  isMailPath,
  parseCron,
  parseGrants,
  parseKeyValues,
  parseUserdata,
  parseZone,
  partOf,
  phpVersionOf,
  type ImportLimits,
  type ItemClass,
  type ReportItem,
} from '../../../domain/panel/import-archive';
import { analyzeHtaccess, htaccessNote } from '../../../domain/panel/htaccess';
import { checkStatement, SANDBOX_LINE, SqlSplitter, StatementTooLong } from '../../../domain/panel/import-sql';
import type { PhpValues } from '../../../domain/panel/php-values';
import { planCertificates, type CertificatePlan } from './certificates';
import { collect, eachEntry, LimitHit, topFolder } from './stream';

// Reads a legacy account archive in one streaming pass (spec 2 section 4.4.4): gzip and tar are
// decoded as they arrive, limits (entries, expanded bytes, nesting, compression ratio) are checked
// on the way, SQL dumps are split and checked statement by statement, and nothing is written to
// disk: the small metadata files (at most 1 MB each) are the only bodies held in memory, and file
// bodies are only counted. The result is the plan and the compatibility report of every item.

export class ArchiveUnreadable extends Error {}

export interface ReadSettings {
  limits: ImportLimits;
  /** PHP versions the target nodes offer */
  phpVersions: string[];
}

export interface WebsitePlan {
  domain: string;
  aliases: string[];
  php: string | null;
  /** the document root, relative to the archive's homedir/ */
  docroot: string;
  cron: string[];
  /** PHP values carried from the document root's .htaccess (absent in plans made before they were) */
  php_values?: PhpValues;
  files: number;
  bytes: number;
}

export interface DatabasePlan {
  name: string;
  statements: number;
  users: string[];
}

export interface ImportPlan {
  user: string | null;
  main_domain: string | null;
  websites: WebsitePlan[];
  dns_zones: Array<{ name: string; records: DnsRecord[] }>;
  databases: DatabasePlan[];
  /** certificates attached to imported websites (archive paths only; absent in plans made before the step existed) */
  certificates?: CertificatePlan[];
  /** what the import adds: counted items, disk and inodes */
  totals: { websites: number; domains: number; databases: number; dns_zones: number; disk_mb: number; inodes: number };
}

export interface ArchiveReport {
  archive: string;
  top: string | null;
  /** safe: nothing refused; refused: some entries (or a limit) are refused as unsafe */
  status: 'safe' | 'refused';
  /** the safety limit that stopped the reading (a tar bomb): the archive was not read whole */
  stopped_by?: { limit: keyof ImportLimits; message: string } | null;
  read: { entries: number; compressed_bytes: number; expanded_bytes: number };
  plan: ImportPlan;
  items: ReportItem[];
  counts: Record<ItemClass, number>;
}

const SMALL_FILE = 1024 * 1024;
/** .htaccess files are read up to this size; a larger one is reported unread */
const HTACCESS_MAX = 256 * 1024;
const REFUSED_LISTED = 200;

interface HomeFile {
  rel: string;
  size: number;
}

/** Reads `file` and returns its plan and report; throws ArchiveUnreadable when it is not a readable gzip'd tar. */
export async function readArchive(file: string, s: ReadSettings): Promise<ArchiveReport> {
  const items: ReportItem[] = [];
  const add = (kind: string, name: string, cls: ItemClass, note?: string) => items.push({ kind, name, class: cls, ...(note ? { note } : {}) });
  const read = { entries: 0, compressed_bytes: 0, expanded_bytes: 0 };
  let refusedCount = 0;
  const refuse = (name: string, why: string) => {
    refusedCount++;
    if (refusedCount <= REFUSED_LISTED) add('entry', name, 'refused', why);
  };
  const small = new Map<string, string>();
  const homeFiles: HomeFile[] = [];
  const htaccess = new Map<string, string | null>(); // home-relative path → text (null: too large to read)
  const dumps = new Map<string, { statements: number; refused: string[]; sandbox: boolean }>();
  const creates = new Set<string>();
  const other: Array<{ rel: string; part: ReturnType<typeof partOf> }> = [];
  let top: string | null = null;
  let limitHit: LimitHit | null = null;

  const onEntry = async (rel: string, entry: ReadEntry, body: (w: NodeJS.WritableStream) => Promise<void>) => {
    if (top === null) top = topFolder(entry);
    const problem = entryProblem({ path: entry.path, type: entry.type, mode: entry.mode ?? 0, size: entry.size ?? 0, linkpath: entry.linkpath }, s.limits.maxDepth);
    if (problem) return refuse(entry.path, problem);
    const part = partOf(rel, entry.type === 'Directory');
    if (part.part === 'home') {
      if (entry.type === 'Directory') return;
      homeFiles.push({ rel: part.rel, size: entry.size ?? 0 });
      if (entry.type === 'File' && path.posix.basename(part.rel) === '.htaccess') htaccess.set(part.rel, (entry.size ?? 0) > HTACCESS_MAX ? null : await collect(body));
      return;
    }
    if (part.part === 'mysql_dump') return dumps.set(part.database, await checkDump(body, part.database));
    if (part.part === 'mysql_create') creates.add(part.database);
    other.push({ rel, part });
    if (!['account', 'userdata', 'zone', 'grants', 'cert', 'key', 'tls', 'cron', 'mysql_create'].includes(part.part)) return;
    if ((entry.size ?? 0) > SMALL_FILE) return refuse(entry.path, `a metadata file larger than ${SMALL_FILE} bytes`);
    small.set(rel, await collect(body));
  };
  try {
    await eachEntry(file, s.limits, onEntry, read);
  } catch (err) {
    if (!(err instanceof LimitHit)) throw new ArchiveUnreadable(`${path.basename(file)} cannot be read as a gzip'd tar archive: ${(err as Error).message}`);
    limitHit = err;
  }
  if (limitHit) {
    refusedCount++;
    add('archive', path.basename(file), 'refused', `a tar bomb: ${limitHit.message}; reading stopped there`);
  } else if (read.entries === 0) throw new ArchiveUnreadable(`${path.basename(file)} holds no entries`);

  // ---- what the parts become ------------------------------------------------------------------
  const accountFile = other.find((o) => o.part.part === 'account');
  const account = accountFile ? parseKeyValues(small.get(accountFile.rel) ?? '') : {};
  const user = accountFile?.part.part === 'account' ? accountFile.part.user : null;
  if (accountFile) add('account', user!, 'migrated_with_changes', 'the account metadata names the main domain; its plan and contact are not copied: the target account keeps its own package and logins');
  const main = parseUserdata(small.get('userdata/main') ?? '');
  const mainDomain = (typeof main.main_domain === 'string' && main.main_domain) || account.DNS || null;
  if (!mainDomain && !limitHit) throw new ArchiveUnreadable(`${path.basename(file)} is not a cPanel account backup: neither cp/<user> nor userdata/main names a main domain`);
  const parked = Array.isArray(main.parked_domains) ? main.parked_domains : [];
  const addonOf = new Map<string, string>(); // sub domain serving an addon → the addon domain
  if (main.addon_domains && typeof main.addon_domains === 'object' && !Array.isArray(main.addon_domains)) for (const [addon, subName] of Object.entries(main.addon_domains)) addonOf.set(subName, addon);

  const websites: WebsitePlan[] = [];
  const vhosts = other.filter((o) => o.part.part === 'userdata' && o.part.name !== 'main' && !/(_SSL|\.cache|\.json|\.yaml)$/.test(o.part.name) && o.part.name !== 'cache');
  for (const v of vhosts) {
    const data = parseUserdata(small.get(v.rel) ?? '');
    const servername = String(data.servername || (v.part.part === 'userdata' ? v.part.name : '')).toLowerCase();
    // an addon domain is served by its own sub domain: the site is named after the addon
    const domain = addonOf.get(servername) ?? servername;
    const changes: string[] = [];
    if (domain !== servername) changes.push(`the addon domain becomes its own website (cPanel served it as ${servername})`);
    if (!isImportDomain(domain)) {
      add('website', domain, 'refused', 'not a valid domain name');
      refusedCount++;
      continue;
    }
    const aliasWords = String(data.serveralias ?? '').toLowerCase().split(/\s+/).filter(Boolean);
    const aliases = [...new Set(aliasWords.filter((a) => a !== domain && isImportDomain(a)).concat(domain === mainDomain ? parked.filter((p) => !aliasWords.includes(p)) : []))];
    if (domain === mainDomain && parked.length) changes.push(`parked domains become aliases (${parked.join(', ')})`);
    if (domain !== servername && aliasWords.includes(servername)) changes.push(`${servername} is not kept`);
    const wanted = phpVersionOf(typeof data.phpversion === 'string' ? data.phpversion : undefined);
    const php = choosePhp(wanted, s.phpVersions);
    if (php.change) changes.push(php.change);
    const docrootAbs = String(data.documentroot ?? '');
    const homedir = String(data.homedir ?? (user ? `/home/${user}` : ''));
    const docroot = docrootAbs.startsWith(`${homedir}/`) ? docrootAbs.slice(homedir.length + 1) : /^\/home\d*\/[^/]+\/(.+)$/.exec(docrootAbs)?.[1] ?? 'public_html';
    websites.push({ domain, aliases: aliases.filter((a) => a !== domain), php: php.php, docroot, cron: [], files: 0, bytes: 0 });
    add('website', domain, changes.length ? 'migrated_with_changes' : 'migrated', changes.join('; ') || undefined);
  }
  const mainSite = websites.find((w) => w.domain === mainDomain) ?? websites[0];

  // cron lines run as the account's user: they go to the main website
  for (const c of other.filter((o) => o.part.part === 'cron')) {
    const { lines, dropped } = parseCron(small.get(c.rel) ?? '');
    if (!mainSite) {
      add('cron', c.rel, 'not_migrated', 'no website to run it');
      continue;
    }
    mainSite.cron.push(...lines);
    add('cron', c.rel, dropped.length ? 'migrated_with_changes' : 'migrated', `${lines.length} line(s) run as the website ${mainSite.domain}${dropped.length ? `; dropped: ${dropped.join(' | ')}` : ''}; paths under /home/${user ?? '<user>'} are not rewritten`);
  }

  // site files: each file belongs to the deepest document root that holds it
  const roots = [...websites].sort((a, b) => b.docroot.length - a.docroot.length);
  let mail = { files: 0, bytes: 0 };
  let outside = { files: 0, bytes: 0 };
  for (const f of homeFiles) {
    if (isMailPath(f.rel)) mail = { files: mail.files + 1, bytes: mail.bytes + f.size };
    else {
      const site = roots.find((w) => f.rel === w.docroot || f.rel.startsWith(`${w.docroot}/`));
      if (site) {
        site.files++;
        site.bytes += f.size;
      } else outside = { files: outside.files + 1, bytes: outside.bytes + f.size };
    }
  }
  // Apache habits: each .htaccess of a website, what is carried and what nginx ignores
  for (const [rel, text] of htaccess) {
    const site = roots.find((w) => rel.startsWith(`${w.docroot}/`));
    if (!site) continue; // outside every document root: counted with the home files
    const inSite = rel.slice(site.docroot.length + 1);
    if (text === null) {
      add('htaccess', `${site.domain}/${inSite}`, 'not_migrated', `larger than ${HTACCESS_MAX} bytes: not read; the file is copied with the site, nginx does not read it`);
      continue;
    }
    const a = analyzeHtaccess(text, inSite === '.htaccess');
    if (Object.keys(a.php).length) site.php_values = a.php;
    add('htaccess', `${site.domain}/${inSite}`, a.ignored.length ? (a.carried.length ? 'migrated_with_changes' : 'not_migrated') : 'migrated', htaccessNote(a));
  }
  for (const w of websites) add('site_files', w.domain, 'migrated', `${w.files} file(s), ${w.bytes} bytes from homedir/${w.docroot}, written into the website's root on its node as the website's own system user (where the node has site users)`);
  if (mail.files) add('email', 'mail', 'not_migrated', `email is not importable yet (${mail.files} file(s) of Maildirs and mail accounts)`);
  if (outside.files) add('home_files', 'homedir', 'not_migrated', `${outside.files} file(s), ${outside.bytes} bytes of the home folder lie outside every website's document root`);

  const zones: ImportPlan['dns_zones'] = [];
  for (const z of other.filter((o) => o.part.part === 'zone')) {
    const name = z.part.part === 'zone' ? z.part.zone : '';
    if (!isImportDomain(name)) {
      add('dns_zone', name, 'refused', 'not a valid zone name');
      refusedCount++;
      continue;
    }
    const { records, dropped } = parseZone(name, small.get(z.rel) ?? '');
    zones.push({ name, records });
    add('dns_zone', name, 'migrated_with_changes', `${records.length} record(s); SOA and apex NS are the panel's own${dropped.length ? `; dropped: ${dropped.join(' | ')}` : ''}`);
  }

  const grantsFile = other.find((o) => o.part.part === 'grants');
  const grants = grantsFile ? parseGrants(small.get(grantsFile.rel) ?? '', user ?? '') : new Map<string, string[]>();
  const databases: DatabasePlan[] = [];
  for (const name of [...new Set([...creates, ...dumps.keys()])].sort()) {
    const dump = dumps.get(name);
    const users = [...grants].filter(([, dbs]) => dbs.includes(name)).map(([u]) => u);
    if (dump && dump.refused.length) {
      refusedCount++;
      add('sql_dump', name, 'refused', `statements outside the allowed set: ${dump.refused.slice(0, 3).join('; ')}${dump.refused.length > 3 ? ` and ${dump.refused.length - 3} more` : ''}`);
      continue;
    }
    databases.push({ name, statements: dump?.statements ?? 0, users });
    const extra = users.slice(1);
    add('database', name, 'migrated_with_changes', `created on a node with the db role; its user ${users[0] ?? name} gets a new random password, shown once after the run${extra.length ? `; further users (${extra.join(', ')}) are not created: a panel database has one user` : ''}`);
    if (dump) add('sql_dump', name, dump.sandbox ? 'migrated_with_changes' : 'migrated', `${dump.statements} statement(s) checked${dump.sandbox ? "; the MariaDB sandbox-mode first line is dropped (a client command, not SQL)" : ''}`);
  }
  const tls = planCertificates(
    other.flatMap((o) => (o.part.part === 'cert' || o.part.part === 'key' || o.part.part === 'tls' ? [{ rel: o.rel, part: o.part.part, name: o.part.domain, text: small.get(o.rel) ?? '' }] : [])),
    websites,
  );
  items.push(...tls.items);
  if (grantsFile) add('grants', 'mysql.sql', 'migrated_with_changes', 'the grants are not run: each imported database gets its own user with rights on that database only');

  for (const o of other) {
    const p = o.part;
    if (p.part === 'postgresql') add('postgresql_dump', p.name, 'not_migrated', 'PostgreSQL dumps are not importable yet');
    else if (p.part === 'skip') add('part', o.rel, 'not_migrated', p.why);
    else if (p.part === 'unknown') add('part', o.rel, 'unknown', 'not part of a cPanel account backup the panel knows');
  }
  if (refusedCount > REFUSED_LISTED) add('entry', `${refusedCount - REFUSED_LISTED} more`, 'refused', 'further refused entries are not listed');

  const counts = { migrated: 0, migrated_with_changes: 0, not_migrated: 0, refused: 0, unknown: 0 } as Record<ItemClass, number>;
  for (const i of items) counts[i.class]++;
  const siteBytes = websites.reduce((n, w) => n + w.bytes, 0);
  const domains = websites.reduce((n, w) => n + 1 + w.aliases.length, 0);
  return {
    archive: path.basename(file),
    top: top || null,
    status: refusedCount ? 'refused' : 'safe',
    stopped_by: limitHit ? { limit: limitHit.limit, message: limitHit.message } : null,
    read,
    plan: {
      user,
      main_domain: mainDomain,
      websites,
      dns_zones: zones,
      databases,
      certificates: tls.plan,
      totals: { websites: websites.length, domains, databases: databases.length, dns_zones: zones.length, disk_mb: Math.ceil(siteBytes / 1024 / 1024), inodes: websites.reduce((n, w) => n + w.files, 0) },
    },
    items,
    counts,
  };
}

/** Splits and checks a dump as it streams: counts statements and keeps the reasons of refused ones. */
async function checkDump(body: (w: NodeJS.WritableStream) => Promise<void>, database: string): Promise<{ statements: number; refused: string[]; sandbox: boolean }> {
  const splitter = new SqlSplitter();
  const decoder = new StringDecoder('utf8');
  const r = { statements: 0, refused: [] as string[], sandbox: false };
  let first = true;
  const take = (next: () => ReturnType<SqlSplitter['push']>) => {
    // once refused, the rest is only drained
    if (r.refused.length >= 20) return;
    try {
      for (const st of next()) {
        const v = checkStatement(st, database);
        if (v.action === 'run') r.statements++;
        else if (v.action === 'refuse') r.refused.push(v.why);
      }
    } catch (err) {
      if (!(err instanceof StatementTooLong)) throw err;
      r.refused.push(err.message);
    }
  };
  await body(
    new Writable({
      write(c: Buffer, _e, cb) {
        const text = decoder.write(c);
        if (first && text) {
          first = false;
          r.sandbox = text.startsWith(SANDBOX_LINE);
        }
        take(() => splitter.push(text));
        cb();
      },
      final(cb) {
        take(() => splitter.push(decoder.end()).concat(splitter.end()));
        cb();
      },
    }),
  );
  return r;
}
