// eslint-disable-next-line no-restricted-imports -- ./dns is the panel's DNS rules, not node:dns
import { RECORD_TYPES, recordProblem, type DnsRecord, type RecordType } from './dns';
import { isSiteCronLine } from './cron';
import { isDomain } from './node-ops';

// Legacy account archives (cPanel `cpmove-<user>.tar.gz`, spec 2 section 4.4.4): which entries are
// unsafe, what each part of the archive becomes in the panel, and the parsers of its small text
// files (account metadata, userdata, BIND zones, cron, grants). The report classifies every item as
// migrated, migrated with changes (which), not migrated (why), refused as unsafe, or unknown. Pure.

export interface ImportLimits {
  /** entries in the archive */
  maxEntries: number;
  /** bytes once decompressed */
  maxExpandedBytes: number;
  /** path segments of one entry */
  maxDepth: number;
  /** decompressed / compressed bytes, checked once 1 MB is decompressed */
  maxRatio: number;
}

export const DEFAULT_IMPORT_LIMITS: ImportLimits = { maxEntries: 500_000, maxExpandedBytes: 20 * 1024 ** 3, maxDepth: 32, maxRatio: 200 };

export type ItemClass = 'migrated' | 'migrated_with_changes' | 'not_migrated' | 'refused' | 'unknown';

export interface ReportItem {
  kind: string;
  name: string;
  class: ItemClass;
  /** the change (migrated_with_changes) or the reason (every other class but migrated) */
  note?: string;
}

export interface EntryHeader {
  path: string;
  type: string;
  mode: number;
  size: number;
  linkpath?: string;
}

const hasControl = (s: string) => /\p{Cc}/u.test(s);

/** Normalises an archive-relative path; null when it is absolute or climbs out with `..`. */
export function normalPath(p: string): string[] | null {
  if (p.startsWith('/')) return null;
  const out: string[] = [];
  for (const seg of p.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') {
      if (!out.length) return null;
      out.pop();
    } else out.push(seg);
  }
  return out;
}

/** Why an entry is refused as unsafe, or null. `depthLimit` is the configured nesting limit. */
export function entryProblem(e: EntryHeader, depthLimit: number): string | null {
  if (hasControl(e.path) || (e.linkpath && hasControl(e.linkpath))) return 'the name holds NUL or control characters';
  if (e.path.startsWith('/')) return 'an absolute path';
  if (e.path.split('/').includes('..')) return 'a ".." path segment';
  if (['CharacterDevice', 'BlockDevice', 'FIFO'].includes(e.type)) return `a ${e.type === 'FIFO' ? 'FIFO' : 'device'} entry`;
  if (!['File', 'OldFile', 'ContiguousFile', 'Directory', 'SymbolicLink', 'Link'].includes(e.type)) return `an entry of type ${e.type}`;
  if (e.mode & 0o6000) return 'a setuid or setgid bit';
  const segments = e.path.split('/').filter(Boolean);
  if (segments.length > depthLimit) return `nested ${segments.length} levels deep (the limit is ${depthLimit})`;
  if (e.type === 'SymbolicLink') {
    const target = e.linkpath ?? '';
    if (target.startsWith('/')) return `a symbolic link to the absolute path ${target}`;
    if (!normalPath([...segments.slice(0, -1), target].join('/'))) return `a symbolic link to ${target}, outside the archive`;
  }
  if (e.type === 'Link') {
    const target = e.linkpath ?? '';
    if (target.startsWith('/') || !normalPath(target) || target.split('/').includes('..')) return `a hard link to ${target}, outside the archive`;
  }
  return null;
}

// ---- the parts of an account archive -----------------------------------------------------------

export type Part =
  | { part: 'account'; user: string }
  | { part: 'userdata'; name: string }
  | { part: 'zone'; zone: string }
  | { part: 'home'; rel: string }
  | { part: 'mysql_create' | 'mysql_dump'; database: string }
  | { part: 'grants' }
  | { part: 'postgresql'; name: string }
  | { part: 'cert' | 'key' | 'tls'; domain: string }
  | { part: 'cron'; user: string }
  | { part: 'skip'; why: string }
  | { part: 'meta' }
  | { part: 'unknown' };

/** Parts cPanel writes that the panel knows and does not import, and why. */
const NOT_IMPORTED: Array<[RegExp, string]> = [
  [/^(va|vf|vad|vfilters|mm|mma|fp)(\/|$)/, 'email (forwarders, filters, mailing lists) is not importable yet'],
  [/^shadow$/, "the account's login password is not imported: logins are managed in the panel"],
  [/^(logs|bandwidth|counters|bandwidth_db)(\/|$)/, 'statistics and logs are not imported'],
  [/^(psql\.sql|psql)(\/|$)/, 'PostgreSQL dumps are not importable yet'],
  [/^(ssl|sslcsrs|sslreqs|locale|resellerconfig|resellerpackages|suspendinfo|team|authn|ips|dnssec|domainkeys|nobodyfiles|digestshadow|ftp|quota|homedir_paths|mysql-timestamps|has_sitejet|httpfiles|interchange|ipaddr|mysql-users|pds|shell|sds|sds2|shadow\.history|proftpdpasswd|my\.cnf)(\/|$)/, 'cPanel server settings have no counterpart in the panel'],
];

/** What an archive path (relative to the archive's top folder) is. */
export function partOf(rel: string, isDir: boolean): Part {
  const s = rel.split('/');
  if (rel === '' || rel === 'version' || (isDir && s.length === 1)) return { part: 'meta' };
  if (s[0] === 'cp' && s.length === 2) return { part: 'account', user: s[1] };
  if (s[0] === 'userdata' && s.length === 2) return { part: 'userdata', name: s[1] };
  if (s[0] === 'dnszones' && s.length === 2 && s[1].endsWith('.db')) return { part: 'zone', zone: s[1].slice(0, -3).toLowerCase() };
  if (s[0] === 'homedir') return { part: 'home', rel: s.slice(1).join('/') };
  if (s[0] === 'mysql' && s.length === 2 && /\.(create|sql)$/.test(s[1])) return { part: s[1].endsWith('.sql') ? 'mysql_dump' : 'mysql_create', database: s[1].replace(/\.(create|sql)$/, '') };
  if (rel === 'mysql.sql') return { part: 'grants' };
  if (s[0] === 'psql' || rel === 'psql.sql') return { part: 'postgresql', name: s[s.length - 1] };
  if (s[0] === 'sslcerts' && s.length === 2) return { part: 'cert', domain: s[1].replace(/\.(crt|pem)$/, '').replace(/_[0-9a-f]{5}_[0-9a-f]{5}_\d+_[0-9a-f]+$/, '') };
  if (s[0] === 'sslkeys' && s.length === 2) return { part: 'key', domain: s[1].replace(/\.(key|pem)$/, '').replace(/_[0-9a-f]{5}_[0-9a-f]{5}_\d+_[0-9a-f]+$/, '') };
  if (s[0] === 'apache_tls' && s.length === 2) return { part: 'tls', domain: s[1] };
  if (s[0] === 'cron' && s.length === 2) return { part: 'cron', user: s[1] };
  if (isDir && ['cp', 'userdata', 'dnszones', 'mysql', 'sslcerts', 'sslkeys', 'apache_tls', 'cron'].includes(s[0])) return { part: 'meta' };
  for (const [re, why] of NOT_IMPORTED) if (re.test(rel)) return { part: 'skip', why };
  return { part: 'unknown' };
}

/** Home-folder paths that are email, not website files. */
export const isMailPath = (homeRel: string) => /^(mail|Maildir|\.maildir)(\/|$)/.test(homeRel) || /^etc\/[^/]+\/(passwd|shadow|quota)$/.test(homeRel) || /^etc(\/[^/]+)?\/?$/.test(homeRel);

// ---- the small text files ----------------------------------------------------------------------

/** `KEY=value` lines of cp/<user>. */
export function parseKeyValues(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^([A-Za-z0-9_-]+)=(.*)$/.exec(line.trim());
    if (m) out[m[1].toUpperCase()] = m[2];
  }
  return out;
}

/** The subset of YAML cPanel's userdata files use: `key: value`, `key:` with `  - item` or `  k: v` below. */
export function parseUserdata(text: string): Record<string, string | string[] | Record<string, string>> {
  const out: Record<string, string | string[] | Record<string, string>> = {};
  let current: string | null = null;
  for (const raw of text.split('\n')) {
    if (!raw.trim() || raw.trim() === '---' || raw.trim().startsWith('#')) continue;
    const item = /^\s+-\s+(.*)$/.exec(raw);
    const nested = /^\s+([^:\s]+):\s*(.*)$/.exec(raw);
    const top = /^([^:\s]+):\s*(.*)$/.exec(raw);
    const unq = (v: string) => v.trim().replace(/^['"]|['"]$/g, '');
    if (item && current) {
      const list = Array.isArray(out[current]) ? (out[current] as string[]) : [];
      list.push(unq(item[1]));
      out[current] = list;
    } else if (nested && current && !top) {
      const map = out[current] && !Array.isArray(out[current]) && typeof out[current] === 'object' ? (out[current] as Record<string, string>) : {};
      map[unq(nested[1])] = unq(nested[2]);
      out[current] = map;
    } else if (top) {
      current = top[1];
      out[current] = top[2].trim() === '' || top[2].trim() === '{}' || top[2].trim() === '[]' ? (top[2].trim() === '[]' ? [] : '') : unq(top[2]);
    }
  }
  return out;
}

/** `ea-php81`, `alt-php74`, `php8.1`, `8.1` → `8.1`; null when unset or unknown. */
export function phpVersionOf(raw: string | undefined): string | null {
  const m = /(\d)\.?(\d{1,2})$/.exec(raw ?? '');
  return m ? `${m[1]}.${m[2]}` : null;
}

/** The version a site gets: the archive's when offered, else the newest offered (a change). */
export function choosePhp(wanted: string | null, offered: string[]): { php: string | null; change?: string } {
  if (wanted === null || offered.includes(wanted)) return { php: wanted };
  const newest = [...offered].sort((a, b) => Number(b.split('.')[0]) - Number(a.split('.')[0]) || Number(b.split('.')[1]) - Number(a.split('.')[1]))[0] ?? null;
  return { php: newest, change: newest ? `PHP ${wanted} is not offered: runs on PHP ${newest}` : `PHP ${wanted} is not offered: served as a static site` };
}

/** Records of a BIND zone file, relative to the zone; SOA and apex NS are the panel's own, other types are dropped. */
export function parseZone(zone: string, text: string): { records: DnsRecord[]; dropped: string[] } {
  const records: DnsRecord[] = [];
  const dropped: string[] = [];
  let ttl: number | undefined;
  let origin = `${zone}.`;
  let last = '@';
  // fold parenthesised continuations into one line; strip comments outside quotes
  const lines: string[] = [];
  let acc = '';
  let depth = 0;
  for (const raw of text.split('\n')) {
    let line = '';
    let inQ = false;
    for (const ch of raw) {
      if (ch === '"') inQ = !inQ;
      if (ch === ';' && !inQ) break;
      if (!inQ && ch === '(') depth++;
      else if (!inQ && ch === ')') depth--;
      else line += ch;
    }
    acc += (acc ? ' ' : '') + line;
    if (depth <= 0) {
      lines.push(acc);
      acc = '';
      depth = 0;
    }
  }
  const rel = (name: string) => {
    const abs = name === '@' ? origin : name.endsWith('.') ? name : `${name}.${origin}`;
    if (abs.toLowerCase() === `${zone}.`) return '@';
    return abs.toLowerCase().endsWith(`.${zone}.`) ? abs.slice(0, -(zone.length + 2)).toLowerCase() : null;
  };
  for (const line of lines) {
    if (!line.trim()) continue;
    const tokens = line.trim().match(/"[^"]*"|\S+/g) ?? [];
    if (tokens[0] === '$TTL') {
      ttl = Number(tokens[1]) || ttl;
      continue;
    }
    if (tokens[0] === '$ORIGIN' && tokens[1]) {
      origin = tokens[1].endsWith('.') ? tokens[1] : `${tokens[1]}.${origin}`;
      continue;
    }
    let name = last;
    if (!/^\s/.test(line)) name = tokens.shift()!;
    last = name;
    let recordTtl = ttl;
    while (tokens[0] !== undefined && (/^\d+$/.test(tokens[0]) || /^(IN|CH|HS)$/i.test(tokens[0]))) {
      const t = tokens.shift()!;
      if (/^\d+$/.test(t)) recordTtl = Number(t);
    }
    const type = (tokens.shift() ?? '').toUpperCase();
    const relName = rel(name);
    if (type === 'SOA' || (type === 'NS' && relName === '@')) continue;
    const label = `${name} ${type}`;
    if (relName === null) {
      dropped.push(`${label}: outside the zone`);
      continue;
    }
    if (!(RECORD_TYPES as readonly string[]).includes(type)) {
      dropped.push(`${label}: type ${type} is not supported`);
      continue;
    }
    const value = type === 'TXT' ? tokens.map((t) => t.replace(/^"|"$/g, '')).join('') : tokens.join(' ');
    const record: DnsRecord = { name: relName, type: type as RecordType, value, ...(recordTtl !== undefined ? { ttl: Math.min(604_800, Math.max(60, recordTtl)) } : {}) };
    const problem = recordProblem(record);
    if (problem) dropped.push(`${label}: ${problem}`);
    else records.push(record);
  }
  return { records, dropped };
}

/** Cron lines of cron/<user>: schedule lines kept, environment lines (MAILTO=…) and invalid lines dropped. */
export function parseCron(text: string): { lines: string[]; dropped: string[] } {
  const lines: string[] = [];
  const dropped: string[] = [];
  for (const raw of text.split('\n')) {
    const l = raw.trim();
    if (!l || l.startsWith('#')) continue;
    if (isSiteCronLine(l)) lines.push(l);
    else dropped.push(l.length > 60 ? `${l.slice(0, 60)}…` : l);
  }
  return { lines, dropped };
}

/** Database users of mysql.sql's grants: user → the databases it was granted (the account's own login user is skipped). */
export function parseGrants(text: string, accountUser: string): Map<string, string[]> {
  const users = new Map<string, string[]>();
  const re = /GRANT\s+.+?\s+ON\s+(`[^`]+`|\*)\.\S+\s+TO\s+'([^']+)'@'[^']*'/gi;
  for (const m of text.matchAll(re)) {
    const user = m[2];
    if (user === accountUser) continue;
    const db = m[1] === '*' ? null : m[1].slice(1, -1).replace(/\\_/g, '_');
    const list = users.get(user) ?? [];
    if (db && !list.includes(db)) list.push(db);
    users.set(user, list);
  }
  return users;
}

export const isImportDomain = (s: string) => isDomain(s.toLowerCase());
