import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { generateSync } from 'otplib';
import { createAccount } from '../../services/accounts/accounts';
import { DASHBOARD_AUTH_DEFAULTS, sessionOf, signIn, signOut } from '../../services/dashboard/sessions';
import { ensureDemoUser } from '../../services/dashboard/users';
import { loadSealingKey } from '../../platform/secret-box';
import { env } from '../setup/env';

// Dashboard users from the operator CLI (a real process on the test database) and npm start's
// demo user, signed in through the session service.

const ROOT = path.resolve(__dirname, '../..');
const TSX = path.join(ROOT, 'node_modules', '.bin', 'tsx');
const settings = () => ({ ...DASHBOARD_AUTH_DEFAULTS, sealingKey: loadSealingKey() });

function cli(...args: string[]): Promise<{ code: number; json: any }> { // eslint-disable-line @typescript-eslint/no-explicit-any
  return new Promise((resolve, reject) => {
    execFile(TSX, ['admin/cli.ts', ...args], { cwd: ROOT, env: { ...process.env, DATABASE_URL: env.databaseUrl }, timeout: 30_000 }, (err, stdout) => {
      if (err && typeof err.code !== 'number') return reject(err);
      resolve({ code: err ? (err.code as number) : 0, json: JSON.parse(stdout.trim().split('\n').pop()!) });
    });
  });
}

describe('dashboard users (issue 22)', function () {
  this.timeout(60_000);

  it('admin user create makes an owner with an argon2id hash and a generated password shown once; --totp yes a TOTP secret', async () => {
    const account = await createAccount(env.db, { name: `cli-${randomUUID()}`, credits: '1' });
    const email = `Owner-${randomUUID().slice(0, 8)}@Example.com`;
    const made = await cli('user', 'create', '--account', account.id, '--email', email, '--totp', 'yes');
    assert.equal(made.code, 0, JSON.stringify(made.json));
    assert.equal(made.json.email, email.toLowerCase(), 'the email is stored lower-cased');
    assert.equal(made.json.role, 'owner', 'a CLI-made user is an owner');
    assert.equal(typeof made.json.password, 'string', 'a generated password is shown once');
    const row = await env.db('dashboard_users').where({ id: made.json.id }).first();
    assert.match(row.password_hash, /^\$argon2id\$/, 'the password is hashed with argon2id');
    assert.ok(!row.totp_secret_sealed.includes(made.json.totp_secret), 'the TOTP secret is sealed at rest');

    const ip = `10.0.${Math.floor(Math.random() * 250)}.1`;
    const s = settings();
    assert.deepEqual(await signIn(env.db, s, { email, password: made.json.password, ip }), { ok: false, reason: 'code_required' }, 'the right password without a TOTP code asks for the code');
    const code = generateSync({ secret: made.json.totp_secret });
    const ok = await signIn(env.db, s, { email, password: made.json.password, code, ip });
    assert.ok(ok.ok, `the right TOTP code signs in: ${JSON.stringify(ok)}`);
    assert.deepEqual(await signIn(env.db, s, { email, password: made.json.password, code, ip }), { ok: false, reason: 'invalid_credentials' }, 'a code is accepted once');
    const session = await sessionOf(env.db, ok.token);
    assert.equal(session?.accountId, account.id, "the session belongs to the user's account");
    await signOut(env.db, session!.sessionId);
    assert.equal(await sessionOf(env.db, ok.token), null, 'signed out: the session is gone');

    const again = await cli('user', 'create', '--account', account.id, '--email', email);
    assert.equal(again.code, 1, 'creating the same email again fails with exit code 1');
    assert.match(again.json.error.message, /exists already/, 'the error says the user exists already');
    const bad = await cli('user', 'create', '--account', account.id, '--email', 'not-an-email');
    assert.equal(bad.code, 2, 'an invalid email is a usage error (exit code 2)');
    assert.match(bad.json.error.message, /email/, 'the error names the email');
    assert.equal((await cli('user', 'create', '--account', randomUUID(), '--email', `x-${randomUUID()}@example.com`)).code, 1, 'unknown account');
  });

  it('npm start\'s demo user keeps its password across starts and gets a new one when the file is gone', async () => {
    const account = await createAccount(env.db, { name: `demo-${randomUUID()}`, credits: '1' });
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'dash-')), 'demo-dashboard-password');
    await env.db('dashboard_users').where({ email: 'demo@example.com' }).delete();
    const first = await ensureDemoUser(env.db, loadSealingKey(), account.id, file);
    assert.deepEqual(await ensureDemoUser(env.db, loadSealingKey(), account.id, file), first, 'a second start keeps the demo user and its password');
    assert.equal(fs.statSync(file).mode & 0o777, 0o600, 'the password file is readable by its owner only');
    fs.rmSync(file);
    const second = await ensureDemoUser(env.db, loadSealingKey(), account.id, file);
    assert.notEqual(second.password, first.password, 'a gone password file gets a new password');
    assert.ok((await signIn(env.db, settings(), { email: second.email, password: second.password, ip: '10.9.9.9' })).ok, 'the re-created demo user signs in with its new password');
  });
});
