import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DEFAULT_IMPORT_LIMITS } from '../domain/panel/import-archive';
import { nodePaths } from '../domain/panel/node-config';
import { startMariaDb } from '../hosting-node/mariadb';
import { canCreateSiteUsers, ensureSiteUser, removeSiteUser } from '../hosting-node/site-users';
import { siteWriter } from '../hosting-node/site-writer';
import { createLogger } from '../platform/logger';
import { readArchive } from '../services/panel/imports/reader';
import { copySiteFiles, loadDump } from '../services/panel/imports/run-items';
import { accountEntries, SANDBOX_LINE, writeArchive, type RawEntry } from '../test/helpers/legacy-archive';
import { appendResults, machine, progress, revision } from './panel-harness';
import { num } from './stats';

// Legacy import benchmark (issue 20: "dry run and import of a 2 GB archive with 100,000 files and
// a 500 MB dump — time per phase, peak memory (bounded, streaming), and the cost of a resume after a
// crash at 50 %"). Full size by default; BENCH_FILES, BENCH_FILE_BYTES and BENCH_DUMP_MB scale it.
// The site files are incompressible (slices of a random pool), so the archive is about as large as
// what it expands to. Times the archive's generation, the dry run (the streaming reader: every SQL
// statement split and checked), and the import's two heavy phases on real components — the site-file
// copy into a docroot, written as the site's own system user (root: a real user is created for the
// run and removed after), and the SQL load into a real MariaDB (started under a temp root) — with
// the process's peak RSS sampled every 20 ms. The resume is measured: each phase is cut off by an
// error at 50 % of its entries or statements (what a crash leaves: half the files, temp files, a
// half-loaded database), then run again whole, as "run again" does for an item not recorded done.
// `nice -n 19 npx tsx bench/panel-import.ts`.

const P = { files: num('BENCH_FILES', 100_000), fileBytes: num('BENCH_FILE_BYTES', 15_000), dumpMb: num('BENCH_DUMP_MB', 500) };

/** A dump of the shape mysqldump writes, streamed: header, extended INSERTs of 100 rows, footer. */
function bigDump(db: string, bytes: number): { size: number; rows: number; make: () => Iterable<Buffer> } {
  const head = Buffer.from(
    [
      SANDBOX_LINE,
      `-- MariaDB dump 10.19-11.4.2-MariaDB  Database: ${db}`,
      '/*!40101 SET NAMES utf8mb4 */;',
      'DROP TABLE IF EXISTS `wp_posts`;',
      "CREATE TABLE `wp_posts` (`ID` bigint(20) unsigned NOT NULL AUTO_INCREMENT, `post_title` text NOT NULL DEFAULT '', `post_content` longtext NOT NULL, PRIMARY KEY (`ID`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;",
      'LOCK TABLES `wp_posts` WRITE;',
      '',
    ].join('\n'),
  );
  const tail = Buffer.from('UNLOCK TABLES;\n-- Dump completed\n');
  const insert = (from: number) => {
    const values: string[] = [];
    for (let j = from; j < from + 100; j++) values.push(`(${j},'Post ${j}; it''s -- not a comment','body /* ${j} */ with \\'quotes\\' and \\\\ # hash ${'lorem ipsum '.repeat(6)}')`);
    return Buffer.from(`INSERT INTO \`wp_posts\` VALUES ${values.join(',')};\n`);
  };
  // the statements' sizes are known only by making them: one pass to size the entry, one to write it
  let size = head.length + tail.length;
  let rows = 0;
  while (size < bytes) {
    size += insert(rows + 1).length;
    rows += 100;
  }
  return {
    size,
    rows,
    *make() {
      yield head;
      for (let r = 1; r <= rows; r += 100) yield insert(r);
      yield tail;
    },
  };
}

/** Site files of incompressible content: slices of a 16 MB random pool (gzip's window is 32 KB). */
function siteFileEntries(n: number, bytes: number): RawEntry[] {
  const pool = randomBytes(16 * 1024 * 1024);
  return Array.from({ length: n }, (_, i) => {
    const at = (i * 7919 * 4099) % (pool.length - bytes);
    return { path: `homedir/public_html/files/${Math.floor(i / 1000)}/f${i}.bin`, chunks: { size: bytes, make: () => [pool.subarray(at, at + bytes)] } };
  });
}

class CutOff extends Error {}

/** A heartbeat that "crashes" the phase after `n` calls (entries or statements). */
const cutAfter = (n: number) => {
  let calls = 0;
  return () => {
    if (++calls > n) throw new CutOff(`cut off after ${n}`);
  };
};

function peakSampler() {
  let peak = process.memoryUsage().rss;
  const t = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
  return {
    reset: () => (peak = process.memoryUsage().rss),
    stop: () => {
      clearInterval(t);
      return peak;
    },
    get peak() {
      return peak;
    },
  };
}

const mb = (b: number) => (b / 1024 / 1024).toFixed(1);

async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T; peakMb: string }> {
  const s = peakSampler();
  const t0 = performance.now();
  const value = await fn();
  const ms = performance.now() - t0;
  return { ms, value, peakMb: mb(s.stop()) };
}

async function main() {
  const say = progress('import');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-import-'));
  fs.chmodSync(dir, 0o755);
  const logger = createLogger('warn');
  const limits = { ...DEFAULT_IMPORT_LIMITS, maxRatio: 100_000 };
  const siteId = `bench-${process.pid}`;
  const owner = canCreateSiteUsers() ? await ensureSiteUser(dir, siteId, path.join(dir, 'site')) : null;
  try {
    const file = path.join(dir, 'cpmove-bench.tar.gz');
    const dump = bigDump('bench_wp', P.dumpMb * 1024 * 1024);
    const extra: RawEntry[] = [
      ...siteFileEntries(P.files, P.fileBytes),
      { path: 'mysql/bench_wp.create', body: 'CREATE DATABASE `bench_wp`;\n' },
      { path: 'mysql/bench_wp.sql', chunks: dump },
    ];
    say(`generating: ${P.files} files of ${P.fileBytes} bytes, a dump of ${(dump.size / 1048576).toFixed(0)} MB (${dump.rows} rows)`);
    const gen = await timed(() => writeArchive(file, accountEntries({ user: 'bench', domain: 'bench.test', without: ['mysql'], extra })));
    say(`archive ${mb(fs.statSync(file).size)} MB in ${(gen.ms / 1000).toFixed(0)} s; dry run`);
    const dry = await timed(() => readArchive(file, { limits, phpVersions: ['8.2'] }));
    const r = dry.value;
    const statements = r.plan.databases.find((d) => d.name === 'bench_wp')!.statements;
    const docroot = path.join(dir, 'site/public_html');
    fs.mkdirSync(docroot, { recursive: true });
    if (owner) fs.chownSync(docroot, owner.uid, owner.gid);
    const docroots = r.plan.websites.map((w) => w.docroot);
    const copyFiles = (beat: () => void) => copySiteFiles(file, 'public_html', docroots, siteWriter(docroot, owner), limits, beat);
    say(`dry run ${(dry.ms / 1000).toFixed(0)} s; copy`);
    const copy = await timed(() => copyFiles(() => {}));
    say(`copy ${(copy.ms / 1000).toFixed(0)} s; copy cut off at 50 %, then again`);
    fs.rmSync(docroot, { recursive: true, force: true });
    fs.mkdirSync(docroot);
    if (owner) fs.chownSync(docroot, owner.uid, owner.gid);
    const copyCut = await timed(() => copyFiles(cutAfter(Math.floor(r.read.entries / 2))).catch((err) => (err instanceof CutOff ? null : Promise.reject(err))));
    const copyAgain = await timed(() => copyFiles(() => {}));
    const owned = owner ? fs.readdirSync(docroot, { recursive: true }).filter((f) => fs.lstatSync(path.join(docroot, String(f))).uid !== owner.uid).length : null;
    fs.rmSync(docroot, { recursive: true, force: true });
    const root = path.join(dir, 'node');
    const db = await startMariaDb({ root, port: 20000 + Math.floor(Math.random() * 9000), logger });
    let load, loadCut, loadAgain;
    try {
      await db.createDatabase('bench_wp', 'bench_wpuser', 'bench-password-123');
      say('load');
      load = await timed(() => loadDump(file, 'bench_wp', nodePaths(root).mariadbSocket, limits));
      say(`load ${(load.ms / 1000).toFixed(0)} s; load cut off at 50 %, then again`);
      loadCut = await timed(() => loadDump(file, 'bench_wp', nodePaths(root).mariadbSocket, limits, cutAfter(Math.floor(statements / 2))).catch((err) => (err instanceof CutOff ? null : Promise.reject(err))));
      loadAgain = await timed(() => loadDump(file, 'bench_wp', nodePaths(root).mariadbSocket, limits));
    } finally {
      await db.stop();
    }
    const rev = revision(/^(services\/panel\/imports|domain\/panel\/import|bench\/panel-import|hosting-node\/site-)/);
    const s = (ms: number) => (ms / 1000).toFixed(1);
    const lines = [
      `## Legacy import at ${P.files} files and a ${P.dumpMb} MB dump (issue 20's full size: 100,000 files, 500 MB) — ${new Date().toISOString().slice(0, 16)}Z, commit ${rev.commit}, ${machine().join(', ')}`,
      '',
      `${P.files} site files of ${P.fileBytes} bytes (incompressible) and a MariaDB dump of ${mb(dump.size)} MB (${dump.rows} rows). Archive: ${mb(r.read.compressed_bytes)} MB compressed, ${mb(r.read.expanded_bytes)} MB expanded, ${r.read.entries} entries. Run with \`nice -n 19\` on the shared 2-core box. Files copied as ${owner ? `the site's own system user (${owner.name}), through the site writer` : 'this process (no site users: not root)'}.`,
      '',
      '| phase | time s | throughput | peak RSS of the process MB |',
      '| --- | --- | --- | --- |',
      `| generate the archive (test helper) | ${s(gen.ms)} | ${(fs.statSync(file).size / 1048576 / (gen.ms / 1000)).toFixed(1)} MB/s written | ${gen.peakMb} |`,
      `| dry run: stream, classify, split and check every SQL statement (${statements} statements) | ${s(dry.ms)} | ${(r.read.expanded_bytes / 1048576 / (dry.ms / 1000)).toFixed(1)} MB/s expanded | ${dry.peakMb} |`,
      `| site files: copy ${copy.value.copied_files} files (${mb(copy.value.copied_bytes)} MB) into the docroot | ${s(copy.ms)} | ${(copy.value.copied_files / (copy.ms / 1000)).toFixed(0)} files/s, ${(copy.value.copied_bytes / 1048576 / (copy.ms / 1000)).toFixed(1)} MB/s | ${copy.peakMb} |`,
      `| site files: cut off at 50 % of the entries | ${s(copyCut.ms)} | | ${copyCut.peakMb} |`,
      `| site files: run again after the cut (temp files swept, every file rewritten whole) | ${s(copyAgain.ms)} | | ${copyAgain.peakMb} |`,
      `| SQL load into MariaDB (${load.value.statements} statements, ${dump.rows} rows, checked again on the way) | ${s(load.ms)} | ${(dump.rows / (load.ms / 1000)).toFixed(0)} rows/s | ${load.peakMb} |`,
      `| SQL load: cut off at 50 % of the statements | ${s(loadCut.ms)} | | ${loadCut.peakMb} |`,
      `| SQL load: run again after the cut (database emptied, dump reloaded) | ${s(loadAgain.ms)} | | ${loadAgain.peakMb} |`,
      '',
      `- Cost of a resume after a crash at 50 %: the item cut off is performed again from its start, items recorded done are skipped. File copy: ${s(copyCut.ms)} s lost + ${s(copyAgain.ms)} s again = ${s(copyCut.ms + copyAgain.ms)} s instead of ${s(copy.ms)} s (+${(((copyCut.ms + copyAgain.ms) / copy.ms - 1) * 100).toFixed(0)} %). SQL load: ${s(loadCut.ms)} + ${s(loadAgain.ms)} = ${s(loadCut.ms + loadAgain.ms)} s instead of ${s(load.ms)} s (+${(((loadCut.ms + loadAgain.ms) / load.ms - 1) * 100).toFixed(0)} %). A crash between items costs nothing extra.${owned === null ? '' : ` After the resumed copy, ${owned} entries of the docroot were not owned by the site user.`}`,
      '- Peak RSS is of the whole benchmark process (the site writer child that writes the files is a separate process of a few tens of MB, not counted); the reader holds metadata files of at most 1 MB and one SQL statement at a time, so memory stays bounded whatever the archive size.',
      '',
    ];
    appendResults('panel-import', lines.join('\n'));
    process.stdout.write(lines.join('\n') + '\n');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
    if (owner) await removeSiteUser(dir, siteId);
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(String(err?.stack ?? err) + '\n');
    process.exit(1);
  },
);
