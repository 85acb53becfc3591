import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { cronSchedule, parseCronLine, type CronLine } from '../../../domain/panel/cron';
import { startCronDaemon } from '../../../hosting-node/cron';
import { siteOwner, siteUserName } from '../../../hosting-node/site-users';
import { siteSpec, tempNodeRoot } from '../../helpers/hosting-node';
import { createOrgWithLogin, platformAdmin, startHostingPanel, unique, type HostingPanel, type PanelClient } from '../../helpers/panel';
import { env } from '../../setup/env';
import { until } from '../../helpers/until';

// Issue 32 item 1: a node runs its sites' cron lines. crontab(5) syntax (fields, names, nicknames,
// `%` as standard input), the node's daemon (as the site's user, a timeout per run, no overlap of one
// line, nothing for a suspended site, @reboot once per boot), and a real panel whose hosting node
// runs `* * * * *` within 70 s as the site user and shows the run over the API.

describe('site cron: crontab(5) lines', function () {
  const at = (iso: string) => new Date(iso);
  const due = (when: string, iso: string) => cronSchedule(when)(at(iso));

  it('parses every standard form and refuses what crontab(5) does not define', () => {
    const ok = (line: string) => {
      const p = parseCronLine(line);
      assert.equal(typeof p, 'object', `${line}: ${String(p)}`);
      return p as CronLine;
    };
    assert.deepEqual(ok('*/5  * * * *   php run.php --x'), { when: '*/5 * * * *', command: 'php run.php --x', stdin: null }, 'fields are joined by one space');
    assert.equal(ok('0 9-17/2 1,15 jan-jun mon-fri x').when, '0 9-17/2 1,15 jan-jun mon-fri', 'ranges, steps, lists and names');
    assert.equal(ok('@DAILY x').when, '@daily', 'a nickname, in any case');
    for (const n of ['@reboot', '@yearly', '@annually', '@monthly', '@weekly', '@midnight', '@hourly']) assert.equal(ok(`${n} x`).when, n, n);
    assert.deepEqual(ok('* * * * * cat > out.txt%line one%50\\% done'), { when: '* * * * *', command: 'cat > out.txt', stdin: 'line one\n50% done\n' }, '% starts stdin; \\% is a percent sign');
    const bad: Array<[string, RegExp]> = [
      ['0 0 L * * x', /day of month/],
      ['0 0 * * 5#1 x', /day of week/],
      ['0 0 ? * * x', /day of month/],
      ['5/10 * * * * x', /minute/],
      ['60 * * * * x', /minute: 60/],
      ['0 24 * * * x', /hour/],
      ['*/0 * * * * x', /stepping/],
      ['5-1 * * * * x', /larger/],
      ['0 0 * sun * x', /month/],
      ['0 0 * * jan x', /day of week/],
      ['@every 5m x', /@every/],
      ['@daily', /command/],
      ['* * * * *', /five time fields/],
      ['* * * * * %stdin only', /command is empty/],
      ['* * * * * echo\nsecond line', /one line/],
    ];
    for (const [line, why] of bad) assert.match(String(parseCronLine(line)), why, JSON.stringify(line));
  });

  it('schedules as crontab(5) says: names, steps, ranges, 7 for Sunday, day of month OR day of week', () => {
    assert.ok(due('*/15 * * * *', '2025-03-04T10:45:00') && !due('*/15 * * * *', '2025-03-04T10:46:00'), 'steps');
    assert.ok(due('0 9-17/2 * * mon-fri', '2025-03-04T11:00:00') && !due('0 9-17/2 * * mon-fri', '2025-03-04T12:00:00'), 'a stepped range on a weekday');
    assert.ok(!due('0 9-17/2 * * mon-fri', '2025-03-08T11:00:00'), 'not on a Saturday');
    assert.ok(due('0 0 * * 7', '2025-03-02T00:00:00') && due('0 0 * * 0', '2025-03-02T00:00:00'), '0 and 7 are Sunday');
    assert.ok(due('0 0 1 jan,JUL *', '2025-07-01T00:00:00') && !due('0 0 1 jan,jul *', '2025-08-01T00:00:00'), 'month names');
    // both restricted: either matches (Sunday 2 March, and Saturday 15 March); neither: no run
    assert.ok(due('0 0 1,15 * sun', '2025-03-02T00:00:00') && due('0 0 1,15 * sun', '2025-03-15T00:00:00'), 'day of month OR day of week');
    assert.ok(!due('0 0 1,15 * sun', '2025-03-04T00:00:00'), 'neither day');
    assert.ok(due('@daily', '2025-03-04T00:00:00') && !due('@daily', '2025-03-04T01:00:00'), '@daily');
    assert.ok(due('@hourly', '2025-03-04T07:00:00') && !due('@hourly', '2025-03-04T07:01:00'), '@hourly');
    assert.ok(due('@weekly', '2025-03-02T00:00:00') && !due('@weekly', '2025-03-03T00:00:00'), '@weekly is Sunday midnight');
    assert.ok(due('@monthly', '2025-04-01T00:00:00') && due('@yearly', '2026-01-01T00:00:00'), '@monthly and @yearly');
    assert.ok(!due('@reboot', '2025-03-04T00:00:00'), '@reboot is never due by the clock');
  });
});

describe('site cron: the node daemon', function () {
  this.timeout(30_000);
  // `nobody` stands in for a site user: the daemon runs lines as whatever user it is given
  const nobody = { name: 'nobody', uid: 65534, gid: 65534 };
  let root: string;
  let clock: number;
  const minute = (n: number) => Date.UTC(2030, 0, 1, 0, n);

  beforeEach(() => {
    root = tempNodeRoot('cron-');
    fs.mkdirSync(path.join(root, 'state'), { recursive: true });
    clock = minute(1);
  });
  afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

  const siteOn = (over: Parameters<typeof siteSpec>[0]) => {
    const s = siteSpec(over);
    const dir = path.join(root, 'sites', s.domain);
    fs.mkdirSync(dir, { recursive: true, mode: 0o777 });
    fs.chmodSync(dir, 0o777);
    return { s, dir };
  };

  it('runs due lines as the given user with the line’s stdin, never overlaps one line, kills a run at the time limit, skips a suspended site', async () => {
    const { s, dir } = siteOn({ cron: ['* * * * * id -un > who.txt; cat > stdin.txt%first%second', '*/2 * * * * sleep 20'] });
    const { s: off, dir: offDir } = siteOn({ cron: ['* * * * * touch ran.txt'], suspended: true });
    const d = startCronDaemon({ root, sites: () => [s, off], userOf: () => nobody, timeoutMs: 1500, now: () => clock, logger: env.logger });
    try {
      clock = minute(2);
      d.tick();
      await until('the first line to finish', () => d.runs(s.id).find((r) => r.line === s.cron[0] && r.status === 'ok'), 10_000);
      assert.equal(fs.readFileSync(path.join(dir, 'who.txt'), 'utf8').trim(), 'nobody', 'run as the given user');
      assert.equal(fs.statSync(path.join(dir, 'who.txt')).uid, nobody.uid, "the file is the user's");
      assert.equal(fs.readFileSync(path.join(dir, 'stdin.txt'), 'utf8'), 'first\nsecond\n', 'what follows % is stdin, % a newline');
      // minute 4 (and 3): the sleeping line is still running, so a second run of it is skipped
      clock = minute(4);
      d.tick();
      const runs = d.runs(s.id).filter((r) => r.line === s.cron[1]);
      assert.deepEqual(runs.map((r) => r.status), ['skipped', 'running'], JSON.stringify(runs));
      const timedOut = await until('the sleep to be killed', () => d.runs(s.id).find((r) => r.line === s.cron[1] && r.status === 'timeout'), 10_000);
      assert.match(timedOut!.output, /killed after 2 s/, 'the timeout is said in the output');
      assert.ok(!fs.existsSync(path.join(offDir, 'ran.txt')) && d.runs(off.id).length === 0, 'a suspended site runs nothing');
      const ok = d.runs(s.id).find((r) => r.line === s.cron[0] && r.status === 'ok')!;
      assert.equal(ok.user, 'nobody', 'the run names its user');
      // what changed is reported once, then nothing more until something changes
      const first = d.changedSince(0);
      assert.ok(first.runs.length >= 3, `runs reported: ${first.runs.length}`);
      assert.equal(d.changedSince(first.seq).runs.length, 0, 'nothing new since the last report');
    } finally {
      await d.stop();
    }
  });

  it('runs @reboot lines once per boot of the machine, and keeps the runs across a restart', async () => {
    const { s, dir } = siteOn({ cron: ['@reboot echo booted >> boots.txt'] });
    const start = () => startCronDaemon({ root, sites: () => [s], userOf: () => nobody, now: () => clock, logger: env.logger });
    const d1 = start();
    await until('the @reboot run', () => d1.runs(s.id).find((r) => r.status === 'ok'), 10_000);
    await d1.stop();
    const d2 = start();
    try {
      clock = minute(3);
      d2.tick();
      await new Promise((r) => setTimeout(r, 500));
      assert.equal(fs.readFileSync(path.join(dir, 'boots.txt'), 'utf8'), 'booted\n', 'once for this boot, not at every start');
      assert.equal(d2.runs(s.id).length, 1, 'the run of the first start is kept');
    } finally {
      await d2.stop();
    }
  });
});

describe('site cron on a hosting panel', function () {
  this.timeout(180_000);
  let panel: HostingPanel;
  let customer: { id: string; client: PanelClient };

  before(async function () {
    this.timeout(90_000);
    panel = await startHostingPanel({ reportEveryMs: 2000 });
    const admin = await platformAdmin(panel.url);
    const provider = await createOrgWithLogin(admin, { type: 'provider' });
    customer = await createOrgWithLogin(provider.client, { type: 'customer' });
  });
  after(async () => {
    await panel?.close();
  });

  it('`* * * * *` writes a file within 70 s as the site user, and the run shows at GET /v1/sites/{id}/cron/runs', async () => {
    const domain = `${unique('cron')}.example.com`;
    const line = '* * * * * id -un > public_html/cron-ran.txt';
    const r = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain, cron: [line] });
    assert.equal(r.status, 201, JSON.stringify(r.json));
    const site = r.json as { id: string };
    const bad = await customer.client.post(`/v1/orgs/${customer.id}/sites`, { domain: `${unique('cron')}.example.com`, cron: ['0 0 L * * x'] });
    assert.equal(bad.status, 400, JSON.stringify(bad.json));
    assert.match(bad.json.error.details.detail, /cron\.0: day of month/, 'the refusal names the field');

    const file = path.join(panel.root, 'sites', domain, 'public_html', 'cron-ran.txt');
    await until('the cron line to run', () => fs.existsSync(file) && fs.readFileSync(file, 'utf8').trim() !== '', 70_000);
    const owner = siteOwner(panel.root, site.id);
    assert.ok(owner, 'the site has its own system user');
    assert.equal(fs.readFileSync(file, 'utf8').trim(), siteUserName(panel.root, site.id), 'the line ran as the site user');
    assert.equal(fs.statSync(file).uid, owner.uid, "the file is the site user's");

    const runs = await until(
      'the run over the API',
      async () => {
        const g = await customer.client.get(`/v1/sites/${site.id}/cron/runs`);
        assert.equal(g.status, 200, JSON.stringify(g.json));
        return g.json.runs.find((x: { status: string }) => x.status === 'ok') ?? null;
      },
      15_000,
    );
    assert.equal(runs.line, line, 'the run names its line');
    assert.equal(runs.user, owner.name, 'and its user');
    assert.equal(runs.exit_code, 0, 'and its exit code');
    // another account cannot read them
    const other = await createOrgWithLogin(await platformAdmin(panel.url), { type: 'provider' });
    assert.equal((await other.client.get(`/v1/sites/${site.id}/cron/runs`)).status, 404, 'outside the subtree: 404');
  });
});
