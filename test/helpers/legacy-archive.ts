import fs from 'node:fs';
import { createGzip } from 'node:zlib';
import { Header, Pax } from 'tar';
import { makeCertificate } from './certificates';

// Realistic cPanel account backups (`cpmove-<user>.tar.gz`) for the legacy import tests and the
// benchmark: account metadata, userdata (main, addon, parked and sub domains with their PHP
// versions), BIND zones, a homedir with site files, Maildirs and symlinks, MariaDB and MySQL dumps
// (the MariaDB one opens with the newer sandbox-mode line), a PostgreSQL dump, grants, TLS in either
// layout, cron — and unsafe entries. Headers are encoded with npm tar's Header/Pax so any entry a
// hostile archive could hold (absolute paths, devices, setuid …) can be written as it is.

export interface RawEntry {
  path: string;
  type?: 'File' | 'Directory' | 'SymbolicLink' | 'Link' | 'CharacterDevice' | 'BlockDevice' | 'FIFO';
  body?: string | Buffer;
  /** a body of this many bytes, each `fill` (streamed: never held whole) */
  zeros?: number;
  /** a body of `size` bytes made chunk by chunk by `make` (streamed: never held whole; benchmark scale) */
  chunks?: { size: number; make: () => Iterable<Buffer> };
  mode?: number;
  linkpath?: string;
}

export interface ArchiveOptions {
  user?: string;
  domain?: string;
  tls?: 'sslcerts' | 'apache_tls' | 'none';
  /** rows of the MariaDB dump's `wp_posts` table */
  rows?: number;
  /** extra files under public_html (benchmark scale) and their size */
  extraFiles?: number;
  extraFileBytes?: number;
  /** leave out these top-level parts (`cron`, `dnszones`, `psql`, …): layouts vary between versions */
  without?: string[];
  /** appended as they are (unsafe variants) */
  extra?: RawEntry[];
}

export const SANDBOX_LINE = '/*M!999999\\- enable the sandbox mode */';

function mariadbDump(db: string, rows: number): string {
  const lines = [
    SANDBOX_LINE,
    '-- MariaDB dump 10.19-11.4.2-MariaDB, for debian-linux-gnu (x86_64)',
    '--',
    `-- Host: localhost    Database: ${db}`,
    '-- ------------------------------------------------------',
    '/*!40101 SET @OLD_CHARACTER_SET_CLIENT=@@CHARACTER_SET_CLIENT */;',
    '/*!40101 SET NAMES utf8mb4 */;',
    '/*!40103 SET @OLD_TIME_ZONE=@@TIME_ZONE */;',
    "/*!40103 SET TIME_ZONE='+00:00' */;",
    '/*!40014 SET @OLD_FOREIGN_KEY_CHECKS=@@FOREIGN_KEY_CHECKS, FOREIGN_KEY_CHECKS=0 */;',
    "/*!40101 SET @OLD_SQL_MODE=@@SQL_MODE, SQL_MODE='NO_AUTO_VALUE_ON_ZERO' */;",
    '/*M!100616 SET @OLD_NOTE_VERBOSITY=@@NOTE_VERBOSITY, NOTE_VERBOSITY=0 */;',
    '',
    '--',
    '-- Table structure for table `wp_posts`',
    '--',
    '',
    'DROP TABLE IF EXISTS `wp_posts`;',
    '/*!40101 SET @saved_cs_client     = @@character_set_client */;',
    '/*!40101 SET character_set_client = utf8mb4 */;',
    'CREATE TABLE `wp_posts` (',
    '  `ID` bigint(20) unsigned NOT NULL AUTO_INCREMENT,',
    "  `post_title` text NOT NULL DEFAULT '',",
    '  `post_content` longtext NOT NULL,',
    '  PRIMARY KEY (`ID`)',
    ') ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;',
    '/*!40101 SET character_set_client = @saved_cs_client */;',
    '',
    'LOCK TABLES `wp_posts` WRITE;',
    '/*!40000 ALTER TABLE `wp_posts` DISABLE KEYS */;',
  ];
  // several rows per INSERT like mysqldump's extended inserts; values hold quotes, semicolons and comment markers
  for (let i = 1; i <= rows; i += 100) {
    const values: string[] = [];
    for (let j = i; j < Math.min(i + 100, rows + 1); j++) values.push(`(${j},'Post ${j}; it''s -- not a comment','body /* ${j} */ with \\'quotes\\' and \\\\ # hash')`);
    lines.push(`INSERT INTO \`wp_posts\` VALUES ${values.join(',')};`);
  }
  lines.push(
    '/*!40000 ALTER TABLE `wp_posts` ENABLE KEYS */;',
    'UNLOCK TABLES;',
    '/*!40103 SET TIME_ZONE=@OLD_TIME_ZONE */;',
    '/*!40101 SET SQL_MODE=@OLD_SQL_MODE */;',
    '-- Dump completed on 2026-11-20 10:00:00',
    '',
  );
  return lines.join('\n');
}

function mysqlDump(db: string): string {
  return [
    '-- MySQL dump 10.13  Distrib 8.0.36, for Linux (x86_64)',
    `-- Host: localhost    Database: ${db}`,
    '/*!40101 SET NAMES utf8mb4 */;',
    'DROP TABLE IF EXISTS `orders`;',
    'CREATE TABLE `orders` (`id` int NOT NULL, `total` decimal(10,2) NOT NULL, `note` varchar(200) DEFAULT NULL, PRIMARY KEY (`id`)) ENGINE=InnoDB;',
    'LOCK TABLES `orders` WRITE;',
    "INSERT INTO `orders` VALUES (1,19.99,'first'),(2,5.00,NULL),(3,120.50,'a \"quoted\" note');",
    'UNLOCK TABLES;',
    'CREATE OR REPLACE VIEW `big_orders` AS select `o`.`id` AS `id`,`o`.`total` AS `total` from `orders` `o` where `o`.`total` > 100;',
    '',
  ].join('\n');
}

const POSTGRES_DUMP = [
  '--',
  '-- PostgreSQL database dump',
  '--',
  "SET statement_timeout = 0;",
  'CREATE TABLE public.visits (id integer NOT NULL, at timestamp with time zone);',
  'COPY public.visits (id, at) FROM stdin;',
  '1\t2026-01-01 00:00:00+00',
  '\\.',
  '',
].join('\n');


/** The entries of a realistic account archive, in the order cPanel's pkgacct writes them. */
/** A WordPress-style .htaccess: rewrites, PHP values (two within bounds, one flag) and an access rule. */
export const HTACCESS = [
  '# BEGIN WordPress',
  '<IfModule mod_rewrite.c>',
  'RewriteEngine On',
  'RewriteRule ^index\\.php$ - [L]',
  'RewriteCond %{REQUEST_FILENAME} !-f',
  'RewriteRule . /index.php [L]',
  '</IfModule>',
  'php_value memory_limit 256M',
  'php_value upload_max_filesize "64M"',
  'php_flag display_errors Off',
  '<Files wp-config.php>',
  'Require all denied',
  '</Files>',
  '',
].join('\n');

export function accountEntries(o: ArchiveOptions = {}): RawEntry[] {
  const user = o.user ?? 'alice';
  const domain = o.domain ?? 'alice-shop.test';
  const addon = `addon-${domain}`;
  const parked = domain.replace(/\.test$/, '.example');
  const sub = `blog.${domain}`;
  const top = `cpmove-${user}`;
  const e: RawEntry[] = [];
  const dir = (p: string) => e.push({ path: p ? `${top}/${p}/` : `${top}/`, type: 'Directory', mode: 0o755 });
  const file = (p: string, body: string | Buffer, mode = 0o644) => e.push({ path: `${top}/${p}`, body, mode });
  const skip = new Set(o.without ?? []);
  dir('');
  file('version', 'pkgacct version: 10\narchive version: 4\n');
  if (!skip.has('cp')) file(`cp/${user}`, [`USER=${user}`, `DNS=${domain}`, `DNS1=${addon}`, 'PLAN=gold', `CONTACTEMAIL=${user}@${domain}`, 'MAXSQL=unlimited', 'STARTDATE=1600000000', ''].join('\n'));
  if (!skip.has('userdata')) {
    file('userdata/main', [`main_domain: ${domain}`, 'addon_domains:', `  ${addon}: addon.${domain}`, 'parked_domains:', `  - ${parked}`, 'sub_domains:', `  - ${sub}`, `  - addon.${domain}`, ''].join('\n'));
    file(`userdata/${domain}`, [`servername: ${domain}`, `serveralias: www.${domain} ${parked} www.${parked}`, `documentroot: /home/${user}/public_html`, `homedir: /home/${user}`, 'phpversion: ea-php81', `user: ${user}`, ''].join('\n'));
    file(`userdata/${sub}`, [`servername: ${sub}`, `serveralias: www.${sub}`, `documentroot: /home/${user}/blog`, 'phpversion: ea-php74', ''].join('\n'));
    file(`userdata/addon.${domain}`, [`servername: addon.${domain}`, `serveralias: ${addon} www.${addon}`, `documentroot: /home/${user}/${addon}`, 'phpversion: ea-php82', ''].join('\n'));
  }
  if (!skip.has('dnszones')) {
    for (const z of [domain, addon]) {
      file(`dnszones/${z}.db`, [`; cPanel first:11.110 latest:11.110 Cpanel::ZoneFile::VERSION:1.3`, '$TTL 14400', `${z}.\t86400\tIN\tSOA\tns1.oldhost.net.\thostmaster.${z}. ( 2026010101 3600 1800 1209600 86400 )`, `${z}.\t86400\tIN\tNS\tns1.oldhost.net.`, `${z}.\t14400\tIN\tA\t203.0.113.10`, `www\t14400\tIN\tCNAME\t${z}.`, `${z}.\t14400\tIN\tMX\t0 ${z}.`, `${z}.\t14400\tIN\tTXT\t"v=spf1 +a +mx ~all"`, `ftp\t14400\tIN\tA\t203.0.113.10`, `_dmarc\t14400\tIN\tTXT\t"v=DMARC1; p=none"`, `old\t14400\tIN\tHINFO\t"PC" "Linux"`, ''].join('\n'));
    }
  }
  if (!skip.has('homedir')) {
    dir('homedir');
    dir('homedir/public_html');
    file('homedir/public_html/index.html', `<!doctype html><title>${domain}</title><h1>Imported ${domain}</h1>\n`);
    file('homedir/public_html/info.php', '<?php echo "php ", PHP_VERSION;\n');
    dir('homedir/public_html/css');
    file('homedir/public_html/css/site.css', 'body { font-family: sans-serif; }\n');
    e.push({ path: `${top}/homedir/public_html/style.css`, type: 'SymbolicLink', linkpath: 'css/site.css' });
    e.push({ path: `${top}/homedir/public_html/index.htm`, type: 'Link', linkpath: `${top}/homedir/public_html/index.html` });
    file('homedir/public_html/.htaccess', HTACCESS);
    const n = o.extraFiles ?? 0;
    for (let i = 0; i < n; i++) e.push({ path: `${top}/homedir/public_html/files/${Math.floor(i / 1000)}/f${i}.txt`, zeros: o.extraFileBytes ?? 100, mode: 0o644 });
    dir('homedir/blog');
    file('homedir/blog/index.html', `<h1>blog of ${domain}</h1>\n`);
    dir(`homedir/${addon}`);
    file(`homedir/${addon}/index.html`, `<h1>${addon}</h1>\n`);
    file('homedir/.bashrc', '# ~/.bashrc\n');
    file('homedir/.my.cnf', '[client]\nuser=alice\n', 0o600);
    dir('homedir/mail');
    file(`homedir/mail/${domain}/info/cur/1700000000.M1P1.host:2,S`, 'From: a@b\nSubject: hi\n\nhello\n', 0o600);
    file('homedir/Maildir/new/1700000001.M2P2.host', 'From: c@d\n\nnew\n', 0o600);
    file(`homedir/etc/${domain}/passwd`, `info:x:1000:1000::/home/${user}/mail/${domain}/info:/usr/local/cpanel/bin/noshell\n`, 0o640);
    e.push({ path: `${top}/homedir/www`, type: 'SymbolicLink', linkpath: 'public_html' });
  }
  if (!skip.has('mysql')) {
    file(`mysql/${user}_wp.create`, `CREATE DATABASE /*!32312 IF NOT EXISTS*/ \`${user}_wp\` /*!40100 DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci */;\n`);
    file(`mysql/${user}_wp.sql`, mariadbDump(`${user}_wp`, o.rows ?? 250));
    file(`mysql/${user}_shop.create`, `CREATE DATABASE /*!32312 IF NOT EXISTS*/ \`${user}_shop\`;\n`);
    file(`mysql/${user}_shop.sql`, mysqlDump(`${user}_shop`));
    file('mysql.sql', [
      `GRANT USAGE ON *.* TO '${user}'@'localhost' IDENTIFIED BY PASSWORD '*0123456789ABCDEF0123456789ABCDEF01234567';`,
      `GRANT ALL PRIVILEGES ON \`${user}\\_wp\`.* TO '${user}_wpuser'@'localhost';`,
      `GRANT SELECT, INSERT, UPDATE, DELETE ON \`${user}\\_shop\`.* TO '${user}_shopuser'@'localhost';`,
      '',
    ].join('\n'));
  }
  if (!skip.has('psql')) file(`psql/${user}_stats.sql`, POSTGRES_DUMP);
  const tls = o.tls ?? 'sslcerts';
  // a real self-signed certificate for the main domain and its www name, as cPanel's AutoSSL leaves them
  const cert = tls === 'none' ? null : makeCertificate({ names: [domain, `www.${domain}`] });
  if (cert && tls === 'sslcerts') {
    file(`sslcerts/${domain}.crt`, cert.certificate);
    file(`sslkeys/${domain}.key`, cert.key, 0o600);
  } else if (cert && tls === 'apache_tls') {
    file(`apache_tls/${domain}`, cert.key + cert.certificate, 0o600);
  }
  if (!skip.has('cron')) file(`cron/${user}`, [`MAILTO=${user}@${domain}`, `*/15 * * * * php /home/${user}/public_html/wp-cron.php >/dev/null 2>&1`, `0 3 * * * /home/${user}/bin/backup.sh`, ''].join('\n'));
  file('logs/access_log', '203.0.113.1 - - [20/Nov/2026] "GET / HTTP/1.1" 200 12\n');
  file('bandwidth/http', '1700000000=1234\n');
  file('shadow', '$6$abcdefgh$hash\n', 0o600);
  return [...e, ...(o.extra ?? []).map((x) => ({ ...x, path: x.path.startsWith('/') || x.path.startsWith('..') ? x.path : `${top}/${x.path}` }))];
}

/** One unsafe entry (or small set) per case the import must refuse (prefixed with the archive's top folder unless absolute or `..`). */
export const UNSAFE: Record<string, RawEntry[]> = {
  absolute_path: [{ path: '/etc/cron.d/evil', body: '* * * * * root sh\n' }],
  dotdot: [{ path: '../../evil.php', body: '<?php system($_GET[1]);\n' }],
  dotdot_inside: [{ path: 'homedir/public_html/../../../escape.txt', body: 'x' }],
  symlink_outside: [{ path: 'homedir/public_html/passwd', type: 'SymbolicLink', linkpath: '/etc/passwd' }],
  symlink_up: [{ path: 'homedir/public_html/up', type: 'SymbolicLink', linkpath: '../../../../../root' }],
  hardlink_outside: [{ path: 'homedir/public_html/shadow', type: 'Link', linkpath: '/etc/shadow' }],
  char_device: [{ path: 'homedir/public_html/null', type: 'CharacterDevice' }],
  block_device: [{ path: 'homedir/disk', type: 'BlockDevice' }],
  fifo: [{ path: 'homedir/public_html/pipe', type: 'FIFO' }],
  setuid: [{ path: 'homedir/public_html/cgi-bin/su.cgi', body: '#!/bin/sh\n', mode: 0o4755 }],
  control_chars: [{ path: 'homedir/public_html/bad\u001bname.html', body: 'x' }],
  sql_grant: [{ path: 'mysql/alice_evil.sql', body: 'CREATE TABLE t (id int);\nGRANT ALL ON *.* TO \'x\'@\'%\';\n' }],
  sql_create_user: [{ path: 'mysql/alice_evil.sql', body: "CREATE USER 'x'@'%' IDENTIFIED BY 'p';\n" }],
  sql_outfile: [{ path: 'mysql/alice_evil.sql', body: "SELECT * FROM wp_users INTO OUTFILE '/tmp/users.txt';\n" }],
  sql_load_data: [{ path: 'mysql/alice_evil.sql', body: "LOAD DATA INFILE '/etc/passwd' INTO TABLE t;\n" }],
  sql_definer: [{ path: 'mysql/alice_evil.sql', body: 'DELIMITER ;;\n/*!50003 CREATE*/ /*!50017 DEFINER=`root`@`localhost`*/ /*!50003 TRIGGER t_bi BEFORE INSERT ON `t` FOR EACH ROW SET NEW.a = 1 */;;\nDELIMITER ;\n' }],
  sql_cross_database: [{ path: 'mysql/alice_evil.sql', body: "INSERT INTO mysql.user (Host, User) VALUES ('%', 'x');\n" }],
  sql_use_other: [{ path: 'mysql/alice_evil.sql', body: 'USE `mysql`;\nDELETE FROM user;\n' }],
};

/** Tar bombs: each trips one configured limit when read with the limits the tests pass. */
export const BOMBS: Record<string, RawEntry[]> = {
  entries: Array.from({ length: 300 }, (_, i) => ({ path: `homedir/public_html/many/${i}.txt`, body: 'x' })),
  size: [{ path: 'homedir/public_html/big.bin', zeros: 8 * 1024 * 1024 }],
  depth: [{ path: `homedir/public_html/${Array.from({ length: 40 }, (_, i) => `d${i}`).join('/')}/deep.txt`, body: 'x' }],
  ratio: [{ path: 'homedir/public_html/zeros.bin', zeros: 3 * 1024 * 1024 }],
};

function* blocks(entries: RawEntry[]): Generator<Buffer> {
  const mtime = new Date('2026-11-20T10:00:00Z');
  for (const x of entries) {
    const type = x.type ?? 'File';
    const size = type === 'File' ? (x.zeros ?? x.chunks?.size ?? Buffer.byteLength(x.body ?? '')) : 0;
    const data = { path: x.path, mode: x.mode ?? (type === 'Directory' ? 0o755 : 0o644), uid: 1000, gid: 1000, size, mtime, type, linkpath: x.linkpath ?? '', uname: 'alice', gname: 'alice' };
    const h = new Header(data);
    h.encode();
    if (h.needPax) yield new Pax(data).encode();
    yield h.block!;
    if (size === 0) continue;
    if (x.zeros !== undefined) {
      const chunk = Buffer.alloc(64 * 1024);
      for (let left = size; left > 0; left -= chunk.length) yield left >= chunk.length ? chunk : chunk.subarray(0, left);
    } else if (x.chunks) {
      yield* x.chunks.make();
    } else {
      yield Buffer.from(x.body ?? '');
    }
    if (size % 512) yield Buffer.alloc(512 - (size % 512));
  }
  yield Buffer.alloc(1024);
}

/** Writes `entries` as a gzip'd tar to `file`. */
export async function writeArchive(file: string, entries: RawEntry[]): Promise<string> {
  const gz = createGzip({ level: 6 });
  const out = fs.createWriteStream(file);
  const done = new Promise<void>((resolve, reject) => {
    out.on('finish', resolve).on('error', reject);
    gz.on('error', reject);
  });
  gz.pipe(out);
  for (const b of blocks(entries)) {
    if (!gz.write(b)) await new Promise((r) => gz.once('drain', r));
  }
  gz.end();
  await done;
  return file;
}

/** A realistic account archive with options, written to `file`. */
export const writeAccountArchive = (file: string, o: ArchiveOptions = {}) => writeArchive(file, accountEntries(o));
