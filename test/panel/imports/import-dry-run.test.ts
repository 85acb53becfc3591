import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { checkStatement, SqlSplitter } from '../../../domain/panel/import-sql';
import { accountEntries, BOMBS, UNSAFE, writeAccountArchive, writeArchive } from '../../helpers/legacy-archive';

// `panelctl import-legacy -archive F [-json]` as a real process over generated cPanel archives:
// every class of the report, each unsafe case refused with exit 3, tar bombs stopped at the
// configured limits, exit 1 for unreadable archives and exit 2 for usage errors.

const run = promisify(execFile);
const BIN = path.join(__dirname, '../../../bin/panelctl.cjs');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'panel-import-'));

interface Item {
  kind: string;
  name: string;
  class: string;
  note?: string;
}

async function panelctl(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await run(process.execPath, [BIN, ...args], { maxBuffer: 64 * 1024 * 1024 });
    return { code: 0, ...r };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

async function dryRun(file: string, ...flags: string[]) {
  const r = await panelctl('import-legacy', '-archive', file, '-json', ...flags);
  return { code: r.code, report: JSON.parse(r.stdout) };
}

const find = (items: Item[], kind: string, name?: string) => items.find((i) => i.kind === kind && (name === undefined || i.name === name));

describe('panel: legacy import dry run (panelctl import-legacy)', () => {
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('classifies every item of a realistic account archive and exits 0', async () => {
    const file = await writeAccountArchive(path.join(dir, 'cpmove-alice.tar.gz'), { rows: 1234 });
    const { code, report } = await dryRun(file);
    assert.equal(code, 0, JSON.stringify(report.items.filter((i: Item) => i.class === 'refused')));
    assert.equal(report.status, 'safe', 'the realistic archive is reported safe');
    assert.equal(report.top, 'cpmove-alice', "the report names the archive's top folder");
    const items: Item[] = report.items;
    // migrated
    assert.equal(find(items, 'site_files', 'alice-shop.test')?.class, 'migrated', 'the site files are migrated');
    assert.match(find(items, 'site_files', 'alice-shop.test')!.note!, /^6 file\(s\)/, 'the site files note counts the files');
    assert.equal(find(items, 'sql_dump', 'alice_shop')?.class, 'migrated', 'the shop database dump is migrated');
    // migrated with changes, saying which change
    assert.equal(find(items, 'website', 'alice-shop.test')?.class, 'migrated_with_changes', 'the main website is migrated with changes');
    assert.match(find(items, 'website', 'alice-shop.test')!.note!, /parked domains become aliases \(alice-shop\.example\); PHP 8\.1 is not offered: runs on PHP 8\.2/, 'the website note says parked domains become aliases and the PHP version changes');
    assert.match(find(items, 'website', 'addon-alice-shop.test')!.note!, /addon domain becomes its own website/, 'the addon domain becomes its own website');
    assert.match(find(items, 'sql_dump', 'alice_wp')!.note!, /1234|statement/, 'the WordPress dump note counts its statements');
    assert.match(find(items, 'sql_dump', 'alice_wp')!.note!, /sandbox-mode first line is dropped/, 'the WordPress dump note says the sandbox-mode line is dropped');
    assert.match(find(items, 'dns_zone', 'alice-shop.test')!.note!, /dropped: old HINFO/, 'the DNS zone note says the old HINFO record is dropped');
    assert.match(find(items, 'database', 'alice_wp')!.note!, /its user alice_wpuser gets a new random password/, 'the database note says its user gets a new password');
    assert.match(find(items, 'cron')!.note!, /dropped: MAILTO=/, 'the cron note says MAILTO is dropped');
    // not migrated, saying why
    assert.match(find(items, 'postgresql_dump')!.note!, /PostgreSQL dumps are not importable yet/, 'PostgreSQL dumps are reported as not importable yet');
    assert.match(find(items, 'email')!.note!, /email is not importable yet \(3 file/, 'email is reported as not importable yet, with its file count');
    assert.equal(find(items, 'certificate', 'alice-shop.test')?.class, 'migrated', 'the certificate is migrated');
    assert.equal(find(items, 'part', 'logs/access_log')?.class, 'not_migrated', 'the access log is not migrated');
    assert.equal(report.counts.refused, 0, 'nothing is refused');
    // Apache habits: the .htaccess carries two PHP values into the website, the rest is reported
    const htaccess = find(items, 'htaccess', 'alice-shop.test/.htaccess');
    assert.equal(htaccess?.class, 'migrated_with_changes', `the .htaccess item: ${JSON.stringify(htaccess)}`);
    assert.match(htaccess!.note!, /carried into the website's PHP values: memory_limit 256 MB, upload_max_filesize 64 MB/, 'the carried values are named');
    assert.match(htaccess!.note!, /rewrite rules \(RewriteEngine, RewriteRule ×2, RewriteCond\) nginx does not read \.htaccess/, 'the rewrite rules are reported');
    assert.match(htaccess!.note!, /access rules \(Require\) have no effect: the paths they restricted are served to anyone/, 'the access rule is reported with its consequence');
    assert.match(htaccess!.note!, /PHP settings \(php_flag display_errors\) are not carried/, 'the flag outside the table is reported');
    // the plan in the spec's order
    const plan = report.plan;
    assert.deepEqual(plan.dns_zones.map((z: { name: string }) => z.name), ['alice-shop.test', 'addon-alice-shop.test'], 'the plan has both DNS zones, main domain first');
    assert.deepEqual(plan.dns_zones[0].records.find((r: { type: string; name: string }) => r.type === 'TXT' && r.name === '_dmarc'), { name: '_dmarc', type: 'TXT', value: 'v=DMARC1; p=none', ttl: 14400 }, 'the zone keeps the _dmarc TXT record with its TTL');
    const main = plan.websites.find((w: { domain: string }) => w.domain === 'alice-shop.test');
    assert.deepEqual(main.aliases, ['www.alice-shop.test', 'alice-shop.example', 'www.alice-shop.example'], 'www and the parked domain with its www become aliases of the main website');
    assert.equal(main.docroot, 'public_html', 'the document root is public_html');
    assert.deepEqual(main.php_values, { memory_limit: 256, upload_max_filesize: 64 }, 'the PHP values of the document root\'s .htaccess');
    assert.deepEqual(main.cron, ['*/15 * * * * php /home/alice/public_html/wp-cron.php >/dev/null 2>&1', '0 3 * * * /home/alice/bin/backup.sh'], 'the crontab lines without MAILTO');
    assert.deepEqual(plan.databases.map((d: { name: string; users: string[] }) => [d.name, d.users]), [['alice_shop', ['alice_shopuser']], ['alice_wp', ['alice_wpuser']]], "the plan's databases with their users");
    assert.equal(plan.databases.find((d: { name: string }) => d.name === 'alice_wp').statements, 18 + Math.ceil(1234 / 100), "the WordPress database's statement count: 18 plus one per 100 rows");
    assert.deepEqual({ ...plan.totals, disk_mb: undefined }, { websites: 3, domains: 8, databases: 2, dns_zones: 2, disk_mb: undefined, inodes: 8 }, "the plan's totals");
  });

  it('reports an unknown part and tolerates missing parts (apache_tls layout, no cron, no zones)', async () => {
    const file = await writeAccountArchive(path.join(dir, 'cpmove-bob.tar.gz'), { user: 'bob', domain: 'bob.test', tls: 'apache_tls', without: ['cron', 'dnszones', 'psql'], extra: [{ path: 'mystery/thing.bin', body: 'x' }] });
    const { code, report } = await dryRun(file);
    assert.equal(code, 0, 'an archive with an unknown part and missing parts still exits 0');
    assert.equal(find(report.items, 'part', 'mystery/thing.bin')?.class, 'unknown', 'the mystery part is reported unknown');
    assert.match(find(report.items, 'certificate', 'bob.test')!.note!, /attached to the website bob\.test/, 'the apache_tls certificate is attached to its website');
    assert.equal(find(report.items, 'cron'), undefined, 'no cron item without a cron part');
    assert.deepEqual(report.plan.dns_zones, [], 'no DNS zones planned without zones in the archive');
  });

  it('prints the plan and the report for a person without -json', async () => {
    const file = path.join(dir, 'cpmove-alice.tar.gz');
    const r = await panelctl('import-legacy', '-archive', file);
    assert.equal(r.code, 0, 'the text form exits 0 for a safe archive');
    assert.match(r.stdout, /Plan \(main domain alice-shop\.test\): 3 website\(s\), 8 domain\(s\), 2 DNS zone\(s\), 2 database\(s\)/, 'the text form prints the plan');
    assert.match(r.stdout, /migrated with changes \(\d+\):/, 'the text form lists the items migrated with changes');
    assert.match(r.stdout, /Result: read and safe \(exit 0\)\./, 'the text form ends with the result');
  });

  for (const [name, entries] of Object.entries(UNSAFE)) {
    it(`refuses ${name.replace(/_/g, ' ')} as unsafe and exits 3`, async () => {
      const file = await writeAccountArchive(path.join(dir, `unsafe-${name}.tar.gz`), { extra: entries });
      const { code, report } = await dryRun(file);
      assert.equal(code, 3, JSON.stringify(report.items?.filter((i: Item) => i.class === 'refused')));
      assert.equal(report.status, 'refused', `${name}: the report is refused`);
      const refused: Item[] = report.items.filter((i: Item) => i.class === 'refused');
      assert.equal(refused.length, 1, JSON.stringify(refused));
      // the safe parts are still classified
      assert.equal(find(report.items, 'website', 'alice-shop.test')?.class, 'migrated_with_changes', `${name}: the safe website is still classified`);
    });
  }

  const bombLimits: Record<string, string[]> = {
    entries: ['-max-entries', '200'],
    size: ['-max-expanded-mb', '4', '-max-ratio', '100000'],
    depth: ['-max-depth', '20'],
    ratio: ['-max-ratio', '50'],
  };
  for (const [name, entries] of Object.entries(BOMBS)) {
    // a bomb stops the reading: exit 1 ("could not be read within the safety limits", spec 4.4.4 and
    // issue 32 item 17) naming the limit; too deep a nesting refuses one entry and the reading goes on: exit 3
    const stops = name !== 'depth';
    it(`stops a tar bomb by ${name} at the configured limit and exits ${stops ? '1 naming the limit' : '3'}`, async () => {
      const file = await writeAccountArchive(path.join(dir, `bomb-${name}.tar.gz`), { extra: entries });
      const { code, report } = await dryRun(file, ...bombLimits[name]);
      assert.equal(code, stops ? 1 : 3, `exit status of ${name}`);
      const refused: Item[] = report.items.filter((i: Item) => i.class === 'refused');
      assert.equal(refused.length, 1, JSON.stringify(refused));
      assert.match(refused[0].note!, name === 'depth' ? /nested 4\d levels deep \(the limit is 20\)/ : /a tar bomb: /, `${name}: the refused entry's note says why`);
      if (stops) {
        const flag = bombLimits[name][0];
        assert.equal(report.stopped_by?.limit, { entries: 'maxEntries', size: 'maxExpandedBytes', ratio: 'maxRatio' }[name], 'the JSON report names the limit');
        const text = await panelctl('import-legacy', '-archive', file, ...bombLimits[name]);
        assert.equal(text.code, 1, 'the text form exits 1 too');
        assert.ok(text.stdout.includes(`Result: could not be read within the safety limits: the ${flag} limit stopped the reading at `), text.stdout);
      } else assert.equal(report.stopped_by, null, 'a deep entry does not stop the reading');
      // within wider limits the same archive is read and safe (zeros compress beyond the default ratio)
      if (name !== 'depth') assert.equal((await dryRun(file, '-max-ratio', '100000')).code, 0, `${name}: within wider limits the same archive is read and safe`);
    });
  }

  it('exits 1 for a truncated, a garbage and a non-tar archive', async () => {
    const good = fs.readFileSync(path.join(dir, 'cpmove-alice.tar.gz'));
    const cases = {
      'truncated.tar.gz': good.subarray(0, Math.floor(good.length / 2)),
      'garbage.tar.gz': Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7919) % 256)),
      'plain.tar.gz': Buffer.from('just text\n'),
    };
    for (const [name, body] of Object.entries(cases)) {
      fs.writeFileSync(path.join(dir, name), body);
      const r = await panelctl('import-legacy', '-archive', path.join(dir, name), '-json');
      assert.equal(r.code, 1, `${name}: ${r.stdout}`);
      assert.equal(JSON.parse(r.stdout).error.code, 'unreadable_archive', `${name}: the error is unreadable_archive`);
    }
    const notAccount = await writeArchive(path.join(dir, 'other.tar.gz'), [{ path: 'photos/a.jpg', body: 'x' }]);
    assert.equal((await panelctl('import-legacy', '-archive', notAccount)).code, 1, 'an archive that is no cPanel account is unreadable: exit 1');
  });

  it('exits 2 for usage errors', async () => {
    for (const args of [[], ['export'], ['import-legacy'], ['import-legacy', '-archive'], ['import-legacy', '-archive', path.join(dir, 'none.tar.gz')], ['import-legacy', '-archive', 'x', '-bogus'], ['import-legacy', '-archive', 'x', '-max-depth', '0']]) {
      const r = await panelctl(...args);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, /usage: panelctl import-legacy/, `${args.join(' ')}: the usage is printed`);
    }
  });

  it('splits dumps on delimiters only outside quotes and comments, across any chunking', () => {
    const entry = accountEntries({ rows: 300 }).find((e) => e.path.endsWith('alice_wp.sql'))!;
    const text = String(entry.body);
    const whole = new SqlSplitter();
    const expected = [...whole.push(text), ...whole.end()].map((s) => s.text);
    for (const size of [1, 2, 3, 5, 64, 4096]) {
      const s = new SqlSplitter();
      const got: string[] = [];
      for (let i = 0; i < text.length; i += size) got.push(...s.push(text.slice(i, i + size)).map((x) => x.text));
      got.push(...s.end().map((x) => x.text));
      assert.deepEqual(got, expected, `chunks of ${size}`);
    }
    assert.equal(expected.filter((t) => t.startsWith('INSERT')).length, 3, 'the dump has three INSERT statements');
    const trig = new SqlSplitter();
    const trigger = [...trig.push('DELIMITER ;;\nCREATE TRIGGER t BEFORE INSERT ON a FOR EACH ROW BEGIN SET NEW.x = 1; SET NEW.y = 2; END ;;\nDELIMITER ;\nSELECT 1;\n'), ...trig.end()];
    assert.deepEqual(trigger.map((s) => checkStatement(s, 'db').action), ['run', 'run'], 'the trigger in its DELIMITER block is one statement and SELECT another, both run');
    assert.match(trigger[0].text, /SET NEW\.y = 2; END$/, 'the trigger statement ends with its END, the inner semicolons kept');
  });

  it('checks statements: DDL/DML on the own database only, executable comments unwrapped', () => {
    const v = (sql: string) => checkStatement({ text: sql, line: 1 }, 'shop');
    assert.deepEqual(v("/*!40101 SET NAMES utf8mb4 */"), { action: 'run', sql: 'SET NAMES utf8mb4' }, 'an executable comment is unwrapped and run');
    assert.equal(v('/*M!999999\\- enable the sandbox mode */').action, 'skip', 'the sandbox-mode line is skipped');
    assert.equal(v('USE `shop`').action, 'skip', 'USE of the own database is skipped');
    assert.equal(v('CREATE DATABASE IF NOT EXISTS `shop`').action, 'skip', 'CREATE DATABASE of the own database is skipped');
    assert.equal(v('SELECT a.id FROM orders a JOIN items i ON i.order_id = a.id').action, 'run', 'a join within the own database runs');
    for (const bad of ['GRANT ALL ON *.* TO x', 'CREATE USER x', "SELECT 1 INTO DUMPFILE '/tmp/x'", 'LOAD XML INFILE "x" INTO TABLE t', 'SET GLOBAL general_log = 1', 'SET PASSWORD = "x"', 'DROP DATABASE other', 'SELECT * FROM other.t', 'SELECT * FROM `other`.`t`', 'UPDATE a.b.c SET x = 1', 'CREATE PROCEDURE p() SELECT 1', 'FLUSH PRIVILEGES', 'PREPARE s FROM @q', 'SHUTDOWN', "SELECT LOAD_FILE('/etc/passwd')", '/*!50017 DEFINER=`root`@`%`*/ CREATE VIEW v AS SELECT 1', 'CALL p()']) {
      assert.equal(v(bad).action, 'refuse', bad);
    }
    // a comment hiding a statement is not run, a string holding one is data
    assert.deepEqual(v("INSERT INTO t VALUES ('GRANT ALL ON *.* TO x; -- ')"), { action: 'run', sql: "INSERT INTO t VALUES ('GRANT ALL ON *.* TO x; -- ')" }, 'a statement inside a string is data: the INSERT runs unchanged');
    assert.equal(v('/* GRANT */ DELETE FROM t').action, 'run', 'a statement hidden in a comment is not run; the DELETE after it runs');
    assert.equal(checkStatement({ text: '\\! rm -rf /', line: 3, client: true }, 'shop').action, 'refuse', 'a client command (\\!) is refused');
  });
});
