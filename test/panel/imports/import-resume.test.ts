import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { writeAccountArchive } from '../../helpers/legacy-archive';
import { startImportWorkerChild, type ImportWorkerChild } from '../../helpers/import-worker-child';
import { createOrgWithLogin, platformAdmin, startHostingPanel, unique, type HostingPanel, type PanelClient } from '../../helpers/panel';
import { env } from '../../setup/env';
import { adminSql, settledImport, uploadArchive } from '../../helpers/imports';
import { until } from '../../helpers/until';

// Resume of a legacy import after crashes (spec 2 section 3 "import run: run again"): the worker
// process running the import is killed with SIGKILL in the middle of the file copy and again in the
// middle of the SQL load; "run again" continues, and nothing ends up twice: every copied file has the
// archive's checksum, the table holds exactly the dump's rows, the killed items ran twice and every
// other item once, and the zones, sites and databases exist once.

const FILES = 3000;
const FILE_BYTES = 2048;
const ROWS = 400_000;

/** `until`, with the import's state in the message when it times out. */
const untilShowing = <T>(what: string, probe: () => Promise<T | null | undefined | false>, state: () => Promise<unknown>, timeoutMs = 120_000): Promise<T> =>
  until(what, probe, timeoutMs, 25).catch(async (err: Error) => {
    throw new Error(`${err.message}: ${JSON.stringify(await state())}`);
  });

const countFiles = (dir: string): number => (fs.existsSync(dir) ? fs.readdirSync(dir, { recursive: true, withFileTypes: true }).filter((d) => d.isFile()).length : 0);

describe('panel: legacy import resumes after kill -9 of its worker', function () {
  this.timeout(400_000);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'panel-import-resume-'));
  const importQueue = `panel-imports-${randomUUID()}`;
  let panel: HostingPanel;
  let provider: { id: string; client: PanelClient };
  const workers: ImportWorkerChild[] = [];

  before(async function () {
    this.timeout(120_000);
    panel = await startHostingPanel({ mariadb: true, opTimeoutMs: 30_000, imports: { dir: path.join(dir, 'uploads'), taskQueue: importQueue, limits: { maxRatio: 100_000 } } });
    provider = await createOrgWithLogin(await platformAdmin(panel.url), { type: 'provider' });
  });
  after(async () => {
    for (const w of workers) await w.close();
    await panel?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const worker = async () => {
    const w = await startImportWorkerChild({ taskQueue: importQueue, nodeOpsQueue: panel.taskQueue, root: panel.root });
    workers.push(w);
    return w;
  };

  it('kill -9 mid file copy and mid SQL load, run again: nothing repeated, everything once', async () => {
    const customer = await createOrgWithLogin(provider.client, { type: 'customer' });
    const user = unique('res').toLowerCase();
    const domain = `${user}.test`;
    const file = await writeAccountArchive(path.join(dir, `cpmove-${user}.tar.gz`), { user, domain, rows: ROWS, extraFiles: FILES, extraFileBytes: FILE_BYTES });
    const uploaded = await uploadArchive(provider.client, customer.id, file);
    assert.equal(uploaded.status, 201, JSON.stringify(uploaded.json));
    const up = uploaded.json;
    const item = (step: string, name: string) => env.db('panel_import_items').where({ import_id: up.id, step, name }).first();
    const docroot = path.join(panel.root, 'sites', domain, 'public_html');
    const state = () => env.db('panel_import_items').where({ import_id: up.id }).orderBy('seq').select('step', 'name', 'state', 'attempts', 'error');

    const first = await worker();
    assert.equal((await provider.client.post(`/v1/imports/${up.id}/run`)).status, 202, 'the first run is accepted');
    // mid file copy: the item is running and part of the files are there
    const copiedBeforeKill = await untilShowing('the file copy under way', async () => {
      const n = countFiles(path.join(docroot, 'files'));
      return (await item('site_files', domain))?.state === 'running' && n > 50 && n < FILES && n;
    }, state);
    await first.kill();
    assert.ok(countFiles(path.join(docroot, 'files')) < FILES, `killed after ${copiedBeforeKill} files`);

    const second = await worker();
    assert.equal((await provider.client.post(`/v1/imports/${up.id}/run`)).status, 202, 'run again after the kill mid file copy is accepted');
    // mid SQL load: the dump's INSERTs are executing (the load holds LOCK TABLES, so rows cannot be counted yet)
    const rowsBeforeKill = await untilShowing('the SQL load under way', async () => {
      if ((await item('sql_loads', `${user}_wp`))?.state !== 'running') return null;
      const list = await adminSql(panel.root, `SELECT count(*) FROM information_schema.processlist WHERE db = '${user}_wp' AND info LIKE 'INSERT INTO \`wp_posts\`%'`).catch(() => '0');
      return Number(list) > 0 && 'an INSERT of the dump was executing';
    }, state);
    await second.kill();

    await worker();
    assert.equal((await provider.client.post(`/v1/imports/${up.id}/run`)).status, 202, 'run again after the kill mid SQL load is accepted');
    const done = await settledImport(provider.client, up.id, 240_000);
    assert.equal(done.json.status, 'done', JSON.stringify(done.json.items.filter((i: { error: string | null }) => i.error)));

    // nothing twice: exact rows, files with the archive's checksums, one of each created thing
    assert.equal(await adminSql(panel.root, `SELECT count(*), count(DISTINCT ID) FROM \`${user}_wp\`.wp_posts`), `${ROWS}\t${ROWS}`, `killed while ${rowsBeforeKill}`);
    assert.equal(countFiles(path.join(docroot, 'files')), FILES, 'every archive file was copied exactly once');
    const zeros = createHash('sha256').update(Buffer.alloc(FILE_BYTES)).digest('hex');
    for (const f of fs.readdirSync(path.join(docroot, 'files'), { recursive: true, withFileTypes: true }).filter((d) => d.isFile())) {
      assert.equal(createHash('sha256').update(fs.readFileSync(path.join(f.parentPath, f.name))).digest('hex'), zeros, f.name);
    }
    assert.deepEqual(fs.readdirSync(docroot).filter((n) => n.includes('.import-')), [], 'no temporary .import- leftovers in the docroot');
    const attempts = Object.fromEntries(done.json.items.map((i: { step: string; name: string; attempts: number }) => [`${i.step}:${i.name}`, i.attempts]));
    for (const [key, n] of Object.entries(attempts)) assert.equal(n, key === `site_files:${domain}` || key === `sql_loads:${user}_wp` ? 2 : 1, key);
    assert.equal(await env.db('panel_sites').where({ org_id: customer.id }).count<{ n: string }[]>('* as n').then((r) => Number(r[0].n)), 3, 'three sites exist, each once');
    assert.equal(await env.db('panel_databases').where({ org_id: customer.id }).count<{ n: string }[]>('* as n').then((r) => Number(r[0].n)), 2, 'two databases exist, each once');
    assert.equal(await env.db('panel_dns_zones').where({ org_id: customer.id }).count<{ n: string }[]>('* as n').then((r) => Number(r[0].n)), 2, 'two DNS zones exist, each once');
    assert.equal(fs.readdirSync(path.join(dir, 'uploads')).length, 0, 'the uploaded archive is removed after the import');
  });
});
