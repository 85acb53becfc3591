import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { insertLogin } from '../../../services/panel/logins/logins';
import { hashPassword } from '../../../services/panel/logins/passwords';
import { PanelClient, PASSWORD, platformAdmin, signInFresh, unique, usePanel } from '../../helpers/panel';
import { env } from '../../setup/env';

// `panelctl reset-password -login NAME` (issue 32 item 20): a lost platform administrator password
// is reset where the panel's database is reachable: a temporary password printed once, its change
// forced at the next sign-in, the login's sessions and API tokens ended, the reset audited.

const run = promisify(execFile);
const BIN = path.join(__dirname, '../../../bin/panelctl.cjs');

/** panelctl with the database only in DATA_DIR/connection.json, as next to `npm start`. */
async function panelctl(dataDir: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const { DATABASE_URL: _url, ...rest } = process.env;
  void _url;
  try {
    return { code: 0, ...(await run(process.execPath, [BIN, ...args], { env: { ...rest, DATA_DIR: dataDir } })) };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('panel: panelctl reset-password (a lost platform administrator password)', () => {
  const url = usePanel();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'panelctl-reset-'));
  before(() => fs.writeFileSync(path.join(dataDir, 'connection.json'), JSON.stringify({ DATABASE_URL: env.databaseUrl }), { mode: 0o600 }));
  after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  it('prints a one-time temporary password, forces its change, ends sessions and tokens, audits; exit 1 unknown login, 2 usage', async () => {
    await platformAdmin(url());
    const platform = await env.db('panel_orgs').where({ type: 'platform' }).first();
    const username = unique('ops');
    const first = `first-${unique('pw')}`;
    const login = await env.db.transaction(async (trx) => insertLogin(trx, platform, { username, passwordHash: await hashPassword(first), role: 'platform_admin' }));
    const session = await signInFresh(url(), username, first);
    const made = await session.post('/v1/account/tokens', { name: 'ci' });
    assert.equal(made.status, 201, `token: ${JSON.stringify(made.json)}`);
    const bearer = new PanelClient(url(), made.json.token);
    assert.equal((await bearer.get('/v1/orgs')).status, 200, 'the token works before the reset');

    const r = await panelctl(dataDir, 'reset-password', '-login', username);
    assert.equal(r.code, 0, `exit status: ${r.stdout}${r.stderr}`);
    const temporary = /shown once[^\n]*\n {2}(\S+)\n/.exec(r.stdout)?.[1];
    assert.ok(temporary && temporary.length >= 20, `a temporary password is printed: ${r.stdout}`);
    assert.match(r.stdout, /1 session\(s\) ended, 1 API token\(s\) revoked/, 'the answer counts what ended');

    assert.equal((await session.get('/v1/account')).status, 401, 'the old session ended');
    assert.equal((await bearer.get('/v1/orgs')).status, 401, 'the API token is revoked');
    const fresh = new PanelClient(url());
    assert.equal((await fresh.signIn(username, PASSWORD)).status, 401, 'the old password is gone');
    const signedIn = await fresh.signIn(username, temporary);
    assert.equal(signedIn.status, 200, 'the temporary password signs in');
    assert.equal(signedIn.json.must_change_password, true, 'its change is forced');
    assert.equal((await fresh.get('/v1/orgs')).json.error.code, 'password_change_required', 'nothing else before the change');
    assert.equal((await fresh.post('/v1/account/password', { current_password: temporary, new_password: `${PASSWORD} 2` })).status, 204, 'the change');
    assert.equal((await fresh.get('/v1/orgs')).status, 200, 'after the change the login works');
    assert.equal((await new PanelClient(url()).signIn(username, temporary)).status, 401, 'the temporary password is one-time');

    const audited = await env.db('panel_audit').where({ action: 'login.reset_password', target_id: login.id }).first();
    assert.ok(audited, 'the reset is in the audit log');
    assert.equal(audited.actor_login_id, null, 'no login made it: the operator command line');
    assert.deepEqual(audited.after, { sessions_ended: 1, tokens_revoked: 1, via: 'panelctl reset-password' }, 'the audit entry says what ended');
    assert.ok(!JSON.stringify(audited).includes(temporary), 'the password is not in the audit log');

    const json = await panelctl(dataDir, 'reset-password', '-login', username, '-json');
    assert.equal(json.code, 0, json.stderr);
    assert.equal(JSON.parse(json.stdout).must_change_password, true, 'the JSON answer is the login');
    assert.equal(typeof JSON.parse(json.stdout).temporary_password, 'string', 'with the password once');

    const unknown = await panelctl(dataDir, 'reset-password', '-login', 'no-such-login');
    assert.equal(unknown.code, 1, unknown.stdout);
    assert.match(unknown.stdout, /no login named "no-such-login"/, 'says which login is unknown');
    for (const args of [['reset-password'], ['reset-password', '-login'], ['reset-password', '-login', 'x', '-bogus']]) {
      const u = await panelctl(dataDir, ...args);
      assert.equal(u.code, 2, `${args.join(' ')}: ${u.stdout}${u.stderr}`);
      assert.match(u.stderr, /panelctl reset-password -login/, 'the usage is shown');
    }
  });
});
