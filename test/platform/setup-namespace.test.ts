import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { resolveTemporalCli } from '../../platform/temporal-cli';
import { env } from '../setup/env';

// temporal-config/setup-namespace.sh against the tests' Temporal server, run from a copy next to
// a search-attributes.json of the test's own, so the failure case can ask for more attributes
// than SQL visibility has columns for (10 Keyword): a registration that fails must fail the script.

const ROOT = path.resolve(__dirname, '../..');
const cli = resolveTemporalCli();

function setup(attributes: Record<string, string>, vars: Record<string, string>) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'setup-ns-'));
  fs.copyFileSync(path.join(ROOT, 'temporal-config/setup-namespace.sh'), path.join(dir, 'setup-namespace.sh'));
  fs.writeFileSync(path.join(dir, 'search-attributes.json'), JSON.stringify({ attributes }));
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile('bash', [path.join(dir, 'setup-namespace.sh')], { env: { ...process.env, TEMPORAL_CLI_PATH: cli, SETUP_RETRY_SECONDS: '0.5', ...vars }, timeout: 60_000 }, (err, stdout, stderr) => {
      fs.rmSync(dir, { recursive: true, force: true });
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

function listed(namespace: string): Promise<Record<string, string>> {
  return new Promise((resolve, reject) =>
    execFile(cli, ['operator', 'search-attribute', 'list', '--address', env.temporalAddress, '-n', namespace, '-o', 'json'], (err, stdout) =>
      err ? reject(err) : resolve(JSON.parse(stdout).customAttributes ?? {}),
    ),
  );
}

describe('temporal-config/setup-namespace.sh', function () {
  this.timeout(90_000);

  it('creates a fresh namespace and registers every attribute, verified by search-attribute list', async () => {
    const ns = `setup-${randomUUID().slice(0, 8)}`;
    const r = await setup({ AccountId: 'Keyword', RequestIds: 'KeywordList', Tries: 'Int' }, { TEMPORAL_ADDRESS: env.temporalAddress, TEMPORAL_NAMESPACE: ns, SETUP_TIMEOUT_SECONDS: '30' });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /all 3 custom search attributes registered/, 'the script reports all three attributes registered');
    assert.deepEqual(await listed(ns), { AccountId: 'INDEXED_VALUE_TYPE_KEYWORD', RequestIds: 'INDEXED_VALUE_TYPE_KEYWORD_LIST', Tries: 'INDEXED_VALUE_TYPE_INT' }, 'search-attribute list shows each attribute with its type');
    // Run again: nothing to do, still success.
    const again = await setup({ AccountId: 'Keyword', RequestIds: 'KeywordList', Tries: 'Int' }, { TEMPORAL_ADDRESS: env.temporalAddress, TEMPORAL_NAMESPACE: ns });
    assert.equal(again.code, 0, again.stdout + again.stderr);
  });

  it('exits non-zero and names the missing attributes when the server refuses some', async () => {
    const ns = `setup-${randomUUID().slice(0, 8)}`;
    const eleven = Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`Word${i + 1}`, 'Keyword']));
    const r = await setup(eleven, { TEMPORAL_ADDRESS: env.temporalAddress, TEMPORAL_NAMESPACE: ns, SETUP_TIMEOUT_SECONDS: '3' });
    assert.notEqual(r.code, 0, `exit 0 although an attribute is missing: ${r.stdout}`);
    assert.match(r.stderr, /missing search attributes/, 'the script says attributes are missing');
    assert.match(r.stderr, /missing Word\d+ Keyword/, 'the error names a missing attribute and its type');
    assert.match(r.stderr, /cannot have more than 10/, 'the server\'s refusal (limit of 10) is passed on');
    assert.doesNotMatch(r.stdout, /already registered/, 'nothing was registered before, so nothing is reported as already registered');
    assert.equal(Object.keys(await listed(ns)).length, 10, 'the server kept the first 10 attributes');
  });

  it('exits non-zero when an attribute is registered with another type', async () => {
    const ns = `setup-${randomUUID().slice(0, 8)}`;
    assert.equal((await setup({ Flavour: 'Int' }, { TEMPORAL_ADDRESS: env.temporalAddress, TEMPORAL_NAMESPACE: ns })).code, 0, 'the first run registers Flavour as Int');
    const r = await setup({ Flavour: 'Keyword' }, { TEMPORAL_ADDRESS: env.temporalAddress, TEMPORAL_NAMESPACE: ns, SETUP_TIMEOUT_SECONDS: '30' });
    assert.equal(r.code, 1, `a type clash exits 1: ${r.stdout}${r.stderr}`);
    assert.match(r.stderr, /Flavour: wants Keyword, registered as INDEXED_VALUE_TYPE_INT/, 'the error names the attribute, wanted and registered types');
  });

  it('exits non-zero when the server cannot be reached', async () => {
    const r = await setup({ AccountId: 'Keyword' }, { TEMPORAL_ADDRESS: '127.0.0.1:1', SETUP_TIMEOUT_SECONDS: '2' });
    assert.notEqual(r.code, 0, 'an unreachable server is a failure');
    assert.match(r.stderr, /the list could not be read/, 'the error says the list could not be read');
  });
});
