import { parseCronLine } from './cron';
import { isDomain, isPhpIdentifier, NO_SITE_LIMITS, type BackupOperation, type NodeOperation, type SiteLimits, type SiteSpec } from './node-ops';
import { phpValueLines, phpValuesProblem } from './php-values';

// What a hosting node writes under its root (PANEL.md section 2), rendered from validated values
// only: nginx's main config and each site's vhost, PHP-FPM's main config and each site's pool, each
// site's cron file, and the pages a node serves itself. Pure text, so the panel can render the same
// files to compare digests, and tests can check them without a node.
//
// Nothing here quotes or escapes: every value that reaches a file is first checked to be made of
// characters that mean nothing to nginx, PHP-FPM or cron (validateOperation, isSafeRoot).

/**
 * The node's root: an absolute path of plain characters, so it can stand unquoted in every config,
 * and short enough for the unix sockets under it (at most 107 bytes each).
 */
export const isSafeRoot = (p: string): boolean => /^(\/[A-Za-z0-9._-]+)+$/.test(p) && !/\/\.\.?(\/|$)/.test(p) && p.length <= 72;

export const isSiteId = (s: string): boolean => /^[A-Za-z0-9_-]{1,64}$/.test(s);
export const isPhpVersion = (s: string): boolean => /^\d{1,2}\.\d{1,2}$/.test(s);
/** MariaDB database and user names: plain identifiers, so they need no quoting rules beyond backticks. */
export const isDbName = (s: string): boolean => /^[A-Za-z0-9_]{1,64}$/.test(s);
export const isDbUser = (s: string): boolean => /^[A-Za-z0-9_]{1,32}$/.test(s);

export const LIMITS = { aliases: 100, cronLines: 100, disabledFunctions: 512, workers: 256, passwordLength: 128 } as const;

const hasControlChars = (s: string) => /\p{Cc}/u.test(s);
const isStr = (v: unknown): v is string => typeof v === 'string';
const isStrArray = (v: unknown): v is string[] => Array.isArray(v) && v.every(isStr);

/** Why a site spec cannot be rendered, or null. Checks types too: operations arrive as JSON. */
export function validateSite(s: SiteSpec): string | null {
  if (typeof s !== 'object' || s === null) return 'site is missing';
  if (!isStr(s.id) || !isSiteId(s.id)) return `bad site id ${JSON.stringify(s.id)}`;
  if (!isStr(s.domain) || !isDomain(s.domain)) return `bad domain ${JSON.stringify(s.domain)}`;
  if (!isStrArray(s.aliases) || s.aliases.length > LIMITS.aliases) return `aliases: a list of at most ${LIMITS.aliases} domains`;
  for (const a of s.aliases) if (!isDomain(a)) return `bad alias ${JSON.stringify(a)}`;
  if (new Set([s.domain, ...s.aliases]).size !== s.aliases.length + 1) return 'aliases repeat a name';
  if (s.phpVersion !== null && !(isStr(s.phpVersion) && isPhpVersion(s.phpVersion))) return `bad PHP version ${JSON.stringify(s.phpVersion)}`;
  if (!isStrArray(s.cron) || s.cron.length > LIMITS.cronLines) return `cron: a list of at most ${LIMITS.cronLines} lines`;
  for (const c of s.cron) {
    const parsed = parseCronLine(c);
    if (typeof parsed === 'string') return `bad cron line ${JSON.stringify(c)}: ${parsed}`;
  }
  if (typeof s.suspended !== 'boolean') return 'suspended: true or false';
  if (!Number.isSafeInteger(s.generation) || s.generation < 0) return `bad generation ${JSON.stringify(s.generation)}`;
  const php = s.php;
  if (typeof php !== 'object' || php === null) return 'php settings are missing';
  if (php.workers !== null && !(Number.isInteger(php.workers) && php.workers >= 1 && php.workers <= LIMITS.workers)) return `php.workers: 1 to ${LIMITS.workers}, or null`;
  if (typeof php.allowUrlFopen !== 'boolean') return 'php.allowUrlFopen: true or false';
  if (!isStrArray(php.disabledFunctions) || php.disabledFunctions.length > LIMITS.disabledFunctions) return `php.disabledFunctions: at most ${LIMITS.disabledFunctions} names`;
  for (const f of php.disabledFunctions) if (!isPhpIdentifier(f)) return `bad PHP function name ${JSON.stringify(f)}`;
  const values = php.values === undefined ? null : phpValuesProblem(php.values);
  if (values) return `${values[0]}: ${values[1]}`;
  return validateLimits(s.limits) ?? validateTls(s.tls);
}

/** Limits are whole numbers ≥ 0 or null (unlimited); absent: no limits. */
function validateLimits(l: SiteSpec['limits']): string | null {
  if (l === undefined) return null;
  if (typeof l !== 'object' || l === null) return 'limits: an object';
  for (const k of Object.keys(NO_SITE_LIMITS) as Array<keyof SiteLimits>) {
    const v = l[k];
    if (v !== null && !(Number.isSafeInteger(v) && v >= 0)) return `limits.${k}: a whole number ≥ 0, or null`;
  }
  return null;
}

const PEM_BLOCK = (label: string) => `-----BEGIN ${label}-----\n[A-Za-z0-9+/=\n]{1,16384}-----END ${label}-----\n`;
const CERT_CHAIN = new RegExp(`^(${PEM_BLOCK('CERTIFICATE')}){1,10}$`);
const KEY_PEM = new RegExp(`^${PEM_BLOCK('PRIVATE KEY')}$`);

/** A certificate chain and PKCS#8 key in plain PEM (the panel re-encodes what it was given): nothing else reaches the files. */
function validateTls(tls: SiteSpec['tls']): string | null {
  if (tls === undefined || tls === null) return null;
  if (typeof tls !== 'object') return 'tls: an object or null';
  if (!isStr(tls.certificate) || !CERT_CHAIN.test(tls.certificate)) return 'tls.certificate: a PEM chain of at most 10 certificates';
  if (tls.key !== undefined && !(isStr(tls.key) && KEY_PEM.test(tls.key))) return 'tls.key: a PKCS#8 PEM private key';
  return null;
}

/** Why an operation cannot be applied as sent, or null. */
export function validateOperation(op: NodeOperation): string | null {
  if (typeof op !== 'object' || op === null || !isStr(op.id) || !/^[A-Za-z0-9_-]{1,64}$/.test(op.id)) return 'bad operation id';
  switch (op.kind) {
    case 'site.apply':
      return validateSite(op.site);
    case 'site.delete':
      if (!isStr(op.siteId) || !isSiteId(op.siteId)) return `bad site id ${JSON.stringify(op.siteId)}`;
      return isStr(op.domain) && isDomain(op.domain) ? null : `bad domain ${JSON.stringify(op.domain)}`;
    case 'database.create':
    case 'database.delete':
    case 'database.password':
    case 'database.lock':
      if (!isStr(op.database) || !isDbName(op.database)) return `bad database name ${JSON.stringify(op.database)} (letters, digits and _, at most 64)`;
      if (!isStr(op.user) || !isDbUser(op.user)) return `bad database user ${JSON.stringify(op.user)} (letters, digits and _, at most 32)`;
      if (op.kind === 'database.lock') return typeof op.locked === 'boolean' ? null : 'locked: true or false';
      if (op.kind !== 'database.delete' && !(isStr(op.password) && op.password.length >= 8 && op.password.length <= LIMITS.passwordLength && !hasControlChars(op.password)))
        return `bad database password (8 to ${LIMITS.passwordLength} characters, no control characters)`;
      return null;
    case 'backup.create':
    case 'backup.delete':
    case 'backup.restore':
      return validateBackupOperation(op);
    default:
      return `unknown operation kind ${JSON.stringify((op as { kind: unknown }).kind)}`;
  }
}

// ---- paths under the root (PANEL.md section 2) ----

export interface SitePaths {
  siteDir: string;
  docroot: string;
  /** the pool's temp, upload and session folder, outside the docroot */
  tmp: string;
  vhost: string;
  cron: string;
  /** the pool file of a PHP version */
  pool(version: string): string;
}

export function sitePaths(root: string, domain: string): SitePaths {
  const siteDir = `${root}/sites/${domain}`;
  return {
    siteDir,
    docroot: `${siteDir}/public_html`,
    tmp: `${siteDir}/tmp`,
    vhost: `${root}/etc/nginx/sites/${domain}.conf`,
    cron: `${root}/etc/cron.d/${domain}`,
    pool: (version) => `${root}/etc/php/${version}/pool.d/${domain}.conf`,
  };
}

/** Where a site's certificate chain and private key (0600) live: outside the site's folder, so neither backups nor the site's own code reach them. */
export function tlsPaths(root: string, domain: string) {
  const dir = `${root}/etc/ssl/${domain}`;
  return { dir, certificate: `${dir}/fullchain.pem`, key: `${dir}/privkey.pem` };
}

/** FNV-1a, 64 bits, as 16 hex digits: a short stable name for a long domain. */
function fnv64(s: string): string {
  let h = 0xcbf29ce484222325n;
  for (const byte of new TextEncoder().encode(s)) h = ((h ^ BigInt(byte)) * 0x100000001b3n) & 0xffffffffffffffffn;
  return h.toString(16).padStart(16, '0');
}

/** Unix socket paths are limited to 107 bytes: the domain names the socket when it fits, else a hash of it. */
export function phpSocketPath(root: string, site: Pick<SiteSpec, 'domain'>): string {
  const byDomain = `${root}/run/php/${site.domain}.sock`;
  return byDomain.length <= 107 ? byDomain : `${root}/run/php/site-${fnv64(site.domain)}.sock`;
}

export const nodePaths = (root: string) => ({
  nginxConf: `${root}/etc/nginx.conf`,
  fastcgiParams: `${root}/etc/nginx/fastcgi_params`,
  nginxSites: `${root}/etc/nginx/sites`,
  /** the vhosts the node wrote, one include each: nginx loads nothing else of the sites folder */
  nginxSiteIndex: `${root}/etc/nginx/sites.conf`,
  pages: `${root}/etc/nginx/pages`,
  nginxPid: `${root}/run/nginx.pid`,
  nginxLogs: `${root}/log/nginx`,
  nginxTemp: `${root}/tmp/nginx`,
  /** a site's own PHP-FPM master: its config (which includes only the site's pool), pid and log */
  siteFpmConf: (version: string, domain: string) => `${root}/etc/php/${version}/masters/${domain}.conf`,
  siteFpmPid: (domain: string) => `${root}/run/php/${domain}.pid`,
  phpFpmLogs: `${root}/log/php-fpm`,
  siteFpmLog: (domain: string) => `${root}/log/php-fpm/${domain}.log`,
  cronDir: `${root}/etc/cron.d`,
  sites: `${root}/sites`,
  state: `${root}/state`,
  db: `${root}/db`,
  mariadbSocket: `${root}/run/my.sock`,
  mariadbPid: `${root}/run/mariadbd.pid`,
});

// ---- nginx ----

/** `host:port` as nginx's listen takes it (IPv6 in brackets). */
export const listenAddress = (host: string, port: number): string => `${host.includes(':') ? `[${host}]` : host}:${port}`;

const header = (site: SiteSpec, comment: string) =>
  `${comment} Managed by the hosting panel: site ${site.id}, generation ${site.generation}. Manual edits are drift and are overwritten.\n`;

/** Content types the node serves (nginx's types block and the built-in server). */
export const MIME_TYPES: Record<string, string> = {
  html: 'text/html', htm: 'text/html', css: 'text/css', js: 'application/javascript', mjs: 'application/javascript', json: 'application/json',
  txt: 'text/plain', xml: 'application/xml', svg: 'image/svg+xml', png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', gif: 'image/gif',
  webp: 'image/webp', avif: 'image/avif', ico: 'image/x-icon', woff: 'font/woff', woff2: 'font/woff2', ttf: 'font/ttf', pdf: 'application/pdf',
  mp4: 'video/mp4', webm: 'video/webm', mp3: 'audio/mpeg', wasm: 'application/wasm', zip: 'application/zip',
};

/** nginx.conf of a node: its own pid, logs and temp paths under the root, one default server answering 404 for unknown hosts. */
export function renderNginxMain(o: { root: string; listen: string; user: string | null; workerProcesses?: number; tlsListen?: string | null }): string {
  const p = nodePaths(o.root);
  const byType = new Map<string, string[]>();
  for (const [ext, type] of Object.entries(MIME_TYPES)) byType.set(type, [...(byType.get(type) ?? []), ext]);
  const types = [...byType].map(([type, exts]) => `        ${type} ${exts.join(' ')};`).join('\n');
  return `# Managed by the hosting node; rewritten at every start.
${o.user ? `user ${o.user};\n` : ''}worker_processes ${o.workerProcesses ?? 2};
daemon off;
pid ${p.nginxPid};
error_log ${p.nginxLogs}/error.log warn;
events { worker_connections 1024; }
http {
    types {
${types}
    }
    default_type application/octet-stream;
    charset utf-8;
    sendfile on;
    server_tokens off;
    client_max_body_size 64m;
    access_log ${p.nginxLogs}/access.log;
    client_body_temp_path ${p.nginxTemp}/client_body;
    proxy_temp_path ${p.nginxTemp}/proxy;
    fastcgi_temp_path ${p.nginxTemp}/fastcgi;
    uwsgi_temp_path ${p.nginxTemp}/uwsgi;
    scgi_temp_path ${p.nginxTemp}/scgi;
    # a Host no site claims
    server {
        listen ${o.listen} default_server;
        server_name _;
        return 404;
    }
${o.tlsListen ? renderTlsDefault(o.tlsListen) : ''}    include ${p.nginxSiteIndex};
}
`;
}

/**
 * The site index nginx.conf includes: the vhosts the node wrote, by name. A hand-written file in
 * the sites folder is never loaded, so it can neither capture a site's traffic (a more specific
 * listen, an earlier server_name, a second default_server) nor fail the config test of every reload.
 */
export const renderNginxSiteIndex = (vhosts: string[]): string =>
  `# Managed by the hosting node: the vhosts it wrote. Other files in sites/ are not loaded (reconciliation lists them as orphans).\n${[...vhosts].sort().map((f) => `include ${f};\n`).join('')}`;

/** The TLS port's default server: a name no site's certificate covers gets no certificate at all (the handshake is refused). */
const renderTlsDefault = (tlsListen: string) => `    ssl_protocols TLSv1.2 TLSv1.3;
    server {
        listen ${tlsListen} ssl default_server;
        server_name _;
        ssl_reject_handshake on;
    }
`;

/** FastCGI parameters (Debian's list, HTTP_HOST from $host so a forged absolute URI cannot set it). */
export function renderFastcgiParams(): string {
  const params: Array<[string, string]> = [
    ['QUERY_STRING', '$query_string'], ['REQUEST_METHOD', '$request_method'], ['CONTENT_TYPE', '$content_type'], ['CONTENT_LENGTH', '$content_length'],
    ['SCRIPT_NAME', '$fastcgi_script_name'], ['REQUEST_URI', '$request_uri'], ['DOCUMENT_URI', '$document_uri'], ['DOCUMENT_ROOT', '$realpath_root'],
    ['SERVER_PROTOCOL', '$server_protocol'], ['REQUEST_SCHEME', '$scheme'], ['HTTPS', '$https if_not_empty'], ['GATEWAY_INTERFACE', 'CGI/1.1'],
    ['SERVER_SOFTWARE', 'nginx'], ['REMOTE_ADDR', '$remote_addr'], ['REMOTE_PORT', '$remote_port'], ['REMOTE_USER', '$remote_user'],
    ['SERVER_ADDR', '$server_addr'], ['SERVER_PORT', '$server_port'], ['SERVER_NAME', '$server_name'], ['REDIRECT_STATUS', '200'],
    ['HTTP_HOST', '$host'], ['SCRIPT_FILENAME', '$realpath_root$fastcgi_script_name'],
  ];
  return `# Managed by the hosting node.\n${params.map(([k, v]) => `fastcgi_param ${k} ${v};`).join('\n')}\n`;
}

export const SUSPENDED_FILE = 'suspended.html';

/** A site's vhost: its names, its docroot and PHP upstream, or only the suspended page (503) when suspended. */
export function renderVhost(site: SiteSpec, o: { root: string; listen: string; tlsListen?: string | null }): string {
  const p = nodePaths(o.root);
  const paths = sitePaths(o.root, site.domain);
  const names = [site.domain, ...site.aliases].join(' ');
  const common = `    listen ${o.listen};
${renderTlsListen(site, o)}    server_name ${names};
    access_log ${p.nginxLogs}/${site.domain}.access.log;
`;
  if (site.suspended) {
    return `${header(site, '#')}server {
${common}    # suspended: every request gets the suspended page, nothing of the site is served
    add_header Cache-Control "no-store" always;
    error_page 503 /${SUSPENDED_FILE};
    location = /${SUSPENDED_FILE} {
        root ${p.pages};
        internal;
    }
    location / {
        return 503;
    }
}
`;
  }
  const php = site.phpVersion
    ? `    location ~ \\.php$ {
        try_files $uri =404;
        fastcgi_pass unix:${phpSocketPath(o.root, site)};
        include ${p.fastcgiParams};
    }
`
    : '';
  return `${header(site, '#')}server {
${common}    root ${paths.docroot};
    index ${site.phpVersion ? 'index.php ' : ''}index.html index.htm;
    # dot files (.git, .env, .user.ini, .htaccess) are never served
    location ~ /\\.(?!well-known/) {
        deny all;
    }
    location / {
        try_files $uri $uri/ ${site.phpVersion ? '/index.php?$args' : '=404'};
    }
${php}}
`;
}

/** With a certificate attached and a TLS port on the node, the same server answers HTTPS too (by SNI). */
function renderTlsListen(site: SiteSpec, o: { root: string; tlsListen?: string | null }): string {
  if (!site.tls || !o.tlsListen) return '';
  const t = tlsPaths(o.root, site.domain);
  return `    listen ${o.tlsListen} ssl;
    ssl_certificate ${t.certificate};
    ssl_certificate_key ${t.key};
`;
}

// ---- PHP-FPM ----

/** The php-fpm.conf of a site's own master: foreground, pid and log under the root, the site's pool only. */
export function renderSiteFpmMain(o: { root: string; version: string; domain: string }): string {
  const p = nodePaths(o.root);
  return `; Managed by the hosting node; rewritten before every start and test.
[global]
pid = ${p.siteFpmPid(o.domain)}
error_log = ${p.siteFpmLog(o.domain)}
daemonize = no
include = ${sitePaths(o.root, o.domain).pool(o.version)}
`;
}

/** A pool run by the site's own user; its socket stays the web server's (nginx connects to it). */
const sitePoolUser = (siteUser: string, webUser: string) => `user = ${siteUser}\ngroup = ${siteUser}\nlisten.owner = ${webUser}\nlisten.group = ${webUser}\nlisten.mode = 0660\n`;

const poolUser = (user: string | null) => (user ? `user = ${user}\ngroup = ${user}\nlisten.owner = ${user}\nlisten.group = ${user}\nlisten.mode = 0660\n` : '');

/**
 * A site's pool. Operator settings are php_admin_*: neither ini_set() nor .user.ini in the site
 * can change them. open_basedir keeps the site in its own folder, temp and sessions included.
 */
export function renderPhpPool(site: SiteSpec, o: { root: string; user: string | null; siteUser?: string | null }): string {
  const paths = sitePaths(o.root, site.domain);
  const disabled = [...new Set(site.php.disabledFunctions)];
  return `${header(site, ';')}[${site.domain}]
${o.siteUser && o.user ? sitePoolUser(o.siteUser, o.user) : poolUser(o.user)}listen = ${phpSocketPath(o.root, site)}
pm = ondemand
pm.max_children = ${site.php.workers ?? 5}
pm.process_idle_timeout = 10s
pm.max_requests = 500
chdir = /
php_admin_flag[allow_url_fopen] = ${site.php.allowUrlFopen ? 'on' : 'off'}
php_admin_value[disable_functions] = "${disabled.join(',')}"
php_admin_value[open_basedir] = ${paths.siteDir}/
php_admin_value[upload_tmp_dir] = ${paths.tmp}
php_admin_value[session.save_path] = ${paths.tmp}
php_admin_value[sys_temp_dir] = ${paths.tmp}
${phpValueLines(site.php.values)}`;
}

// ---- cron ----

/**
 * The site's cron file in /etc/cron.d format: each line runs as the site's user. The node's own
 * scheduler (hosting-node/cron.ts) runs the applied lines this file shows.
 */
export function renderCron(site: SiteSpec, o: { user: string }): string {
  const lines = site.cron.map((line) => {
    const when = (parseCronLine(line) as { when: string }).when;
    const m = line.startsWith('@') ? /^\S+\s+(.*)$/.exec(line.trim())! : /^(?:\S+\s+){5}(.*)$/.exec(line.trim())!;
    return `${when} ${o.user} ${m[1]}`;
  });
  return `${header(site, '#')}SHELL=/bin/sh
PATH=/usr/local/bin:/usr/bin:/bin
${lines.map((l) => `${l}\n`).join('')}`;
}

// ---- pages ----

export function renderSuspendedPage(): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Site suspended</title></head>
<body><h1>This site is suspended</h1><p>Its owner can contact their hosting provider.</p></body></html>
`;
}

/** The first page of a new site (the domain is a validated DNS name: nothing to escape). */
export function renderWelcomePage(domain: string, kind: 'html' | 'php'): string {
  const body = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${domain}</title></head>
<body><h1>${domain} works</h1><p>This site is ready. Upload your files to replace this page.</p>`;
  return kind === 'html' ? `${body}</body></html>\n` : `${body}<p>PHP <?php echo PHP_VERSION; ?> is running.</p></body></html>\n`;
}

const isUuidLike = (v: unknown): v is string => isStr(v) && /^[0-9a-f-]{36}$/.test(v);

/** Why a backup operation cannot be applied as sent, or null: ids only (archive names come from them), plain database names. */
function validateBackupOperation(op: BackupOperation): string | null {
  if (!isUuidLike(op.backupId)) return `bad restore point id ${JSON.stringify(op.backupId)}`;
  const siteId = op.kind === 'backup.restore' ? op.fromSiteId : op.siteId;
  if (!isStr(siteId) || !isSiteId(siteId)) return `bad site id ${JSON.stringify(siteId)}`;
  if (op.kind === 'backup.create') {
    if (!isStrArray(op.databases) || op.databases.length > 100 || !op.databases.every(isDbName)) return 'databases: at most 100 database names';
    return null;
  }
  if (op.kind === 'backup.delete') return null;
  if (!isStr(op.sha256) || !/^[0-9a-f]{64}$/.test(op.sha256)) return 'bad SHA-256';
  const why = validateSite(op.site);
  if (why) return why;
  if (!Array.isArray(op.databases) || op.databases.length > 100) return 'databases: at most 100';
  for (const d of op.databases) {
    if (typeof d !== 'object' || d === null || !isStr(d.from) || !isDbName(d.from) || !isStr(d.name) || !isDbName(d.name) || !isStr(d.user) || !isDbUser(d.user)) return 'databases: from, name and user are plain names';
    if (!(isStr(d.password) && d.password.length >= 8 && d.password.length <= LIMITS.passwordLength && !hasControlChars(d.password))) return 'bad database password';
  }
  return null;
}
