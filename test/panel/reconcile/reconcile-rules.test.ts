import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { classifyDatabase, classifySite, combinedDigest, diffExcerpt, managedFileDomain, shouldRemediate, type FileCheck } from '../../../domain/panel/reconcile';

// The pure rules of reconciliation (domain/panel/reconcile.ts): classification of a site from its
// files and the node's record, the diff excerpt, which paths are managed files, when to rewrite.

const sha = (t: string) => createHash('sha256').update(t).digest('hex');
const file = (over: Partial<FileCheck> = {}): FileCheck => ({ kind: 'vhost', path: '/n/etc/nginx/sites/a.test.conf', expected: 'server {}\n', actual: 'server {}\n', ...over });
const panel = { generation: 3, suspended: false };
const docroot = { path: '/n/sites/a.test/public_html', present: true };

describe('panel: reconciliation rules', () => {
  it('in sync when every file matches and the node applied the same generation and suspension state', () => {
    const v = classifySite(panel, { generation: 3, suspended: false }, [file(), file({ kind: 'cron', path: '/n/etc/cron.d/a.test' })], sha, docroot);
    assert.deepEqual(v, { status: 'in_sync', findings: [], remediable: false }, 'every file matching and the same generation: in sync, nothing to do');
  });

  it('drift: a changed file (digests and a diff), another generation, another suspension state', () => {
    const v = classifySite(panel, { generation: 2, suspended: true }, [file({ actual: 'server {}\n# mine\n' })], sha, docroot);
    assert.equal(v.status, 'drift', 'a changed file is drift');
    assert.equal(v.remediable, true, 'drift is remediable');
    assert.deepEqual(
      v.findings.map((f) => f.problem),
      ['drift', 'generation', 'suspension'],
      'the findings are the file, the generation and the suspension state',
    );
    const d = v.findings[0] as Extract<(typeof v.findings)[0], { problem: 'drift' }>;
    assert.equal(d.expected_digest, sha('server {}\n'), "the expected digest is of the panel's content");
    assert.equal(d.node_digest, sha('server {}\n# mine\n'), 'the node digest is of the file on the node');
    assert.deepEqual(d.diff, ['@@ line 2 @@', '+# mine'], 'the diff shows the added line');
  });

  it('missing: a file gone (remediable), or the whole site unknown to the node (not remediable)', () => {
    const gone = classifySite(panel, { generation: 3, suspended: false }, [file(), file({ kind: 'cron', actual: null })], sha, docroot);
    assert.equal(gone.status, 'missing', 'a file gone makes the site missing');
    assert.equal(gone.remediable, true, 'a gone file is remediable');
    const unknown = classifySite(panel, null, [file({ actual: null })], sha, docroot);
    assert.equal(unknown.status, 'missing', 'a site unknown to the node is missing');
    assert.equal(unknown.remediable, false, 'an unknown site is not remediable');
    assert.equal(unknown.findings[0].problem, 'site_missing', 'the finding is site_missing');
  });

  it('missing: a deleted docroot, with every managed file in place, is remediable (recreated empty)', () => {
    const v = classifySite(panel, { generation: 3, suspended: false }, [file()], sha, { ...docroot, present: false });
    assert.deepEqual(v, { status: 'missing', findings: [{ problem: 'docroot_missing', path: docroot.path }], remediable: true }, 'the docroot is the finding');
  });

  it('unreadable wins over missing and drift and is never remediable', () => {
    const v = classifySite(panel, { generation: 3, suspended: false }, [file({ actual: null, readError: 'EISDIR: illegal operation on a directory' }), file({ kind: 'cron', actual: null }), file({ kind: 'pool', actual: 'x' })], sha, docroot);
    assert.equal(v.status, 'unreadable', 'unreadable wins over missing and drift');
    assert.equal(v.remediable, false, 'unreadable is never remediable');
    assert.deepEqual(
      v.findings.map((f) => f.problem),
      ['unreadable', 'missing', 'drift'],
      'every finding is listed, in file order',
    );
  });

  it('the diff excerpt keeps the differing middle, and is cut after a dozen lines', () => {
    assert.deepEqual(diffExcerpt('a\nb\nc\n', 'a\nB\nc\n'), ['@@ line 2 @@', '-b', '+B'], 'the excerpt keeps only the differing middle line');
    const long = diffExcerpt('x\n', Array.from({ length: 40 }, (_, i) => `line ${i}`).join('\n'));
    assert.equal(long.length, 13, 'a long diff is cut to 12 lines and a note');
    assert.match(long[12], /^… \d+ more lines$/, 'the last line says how many lines were cut');
  });

  it('managed files by path: vhosts, pools of any PHP version, cron files; nothing else', () => {
    assert.deepEqual(managedFileDomain('/n', '/n/etc/nginx/sites/a.test.conf'), { kind: 'vhost', domain: 'a.test' }, 'a vhost is a managed file');
    assert.deepEqual(managedFileDomain('/n', '/n/etc/php/8.2/pool.d/a.test.conf'), { kind: 'pool', domain: 'a.test' }, 'a pool of any PHP version is a managed file');
    assert.deepEqual(managedFileDomain('/n', '/n/etc/cron.d/a.test'), { kind: 'cron', domain: 'a.test' }, 'a cron file is a managed file');
    assert.equal(managedFileDomain('/n', '/n/etc/nginx.conf'), null, 'nginx.conf is not a managed file');
    assert.equal(managedFileDomain('/n', '/other/etc/cron.d/a.test'), null, 'a path outside the node root is not managed');
  });

  it('a rewrite happens only in mode on, for a remediate policy, of a remediable verdict; the combined digest is order-free', () => {
    const drift = { status: 'drift' as const, findings: [], remediable: true };
    assert.equal(shouldRemediate('on', 'remediate', drift), true, 'mode on, remediate policy, remediable verdict: rewrite');
    assert.equal(shouldRemediate('dry-run', 'remediate', drift), false, 'dry-run never rewrites');
    assert.equal(shouldRemediate('on', 'observe', drift), false, 'an observe policy never rewrites');
    assert.equal(shouldRemediate('on', 'remediate', { ...drift, remediable: false }), false, 'a verdict not remediable is never rewritten');
    const a = combinedDigest([{ kind: 'vhost', digest: 'x' }, { kind: 'cron', digest: null }], sha);
    assert.equal(a, combinedDigest([{ kind: 'cron', digest: null }, { kind: 'vhost', digest: 'x' }], sha), 'the combined digest does not depend on the order of files');
    assert.notEqual(a, combinedDigest([{ kind: 'vhost', digest: 'x' }, { kind: 'cron', digest: 'y' }], sha), 'another file digest changes the combined digest');
  });

  it('a database: in sync while MariaDB has it and its user; missing names what is gone', () => {
    const d = { name: 'shop', db_user: 'shop' };
    assert.deepEqual(classifyDatabase(d, { databases: ['shop'], users: ['shop'] }), { status: 'in_sync', findings: [] }, 'both present');
    assert.deepEqual(classifyDatabase(d, { databases: ['other'], users: ['shop'] }), { status: 'missing', findings: [{ problem: 'database_missing', database: 'shop' }] }, 'the database dropped');
    assert.deepEqual(classifyDatabase(d, { databases: [], users: [] }).findings.map((f) => f.problem), ['database_missing', 'database_user_missing'], 'both dropped');
  });
});
