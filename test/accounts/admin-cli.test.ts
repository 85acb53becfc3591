import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createAccount } from '../../services/accounts/accounts';
import { env } from '../setup/env';
import { cli, oneObject, type Run } from '../helpers/admin-cli';

// The operator CLI (admin/cli.ts) as a real process against the test database.

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

describe('admin CLI (real process)', function () {
  this.timeout(120_000);
  let accountId: string;
  const name = `cli-${Date.now()}`;

  it('account create prints one JSON object with the new account', async function () {
    const r = await cli('account', 'create', '--name', name, '--tier', 'starter', '--credits', '12.5');
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const out = oneObject(r);
    assert.match(out.id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, 'the new account id is a UUID');
    assert.equal(out.name, name, 'the output names the account');
    assert.equal(out.tier, 'starter', 'the output gives the tier');
    accountId = out.id;
    const row = await env.db('accounts').where({ id: accountId }).first();
    assert.equal(row.name, name, 'the account row has the name');
    assert.equal(row.tier, 'starter', 'the account row has the tier');
    assert.equal(Number(row.total_credits), 12.5, 'the account row holds the granted credits');
    assert.equal(Number(row.total_usage), 0, 'a new account has no usage');
    assert.equal(row.active, true, 'a new account is active');
    const grants = await env.db('ledger').where({ account_id: accountId, kind: 'grant' }).select('amount');
    assert.deepEqual(grants.map((g) => Number(g.amount)), [12.5], 'one grant of the initial credits in the ledger');
  });

  it('credits add raises total_credits and writes a grant to the ledger', async function () {
    assert.ok(accountId, 'needs the account of the previous test');
    const r = await cli('credits', 'add', '--account', accountId, '--credits', '0.25');
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const out = oneObject(r);
    assert.equal(out.id, accountId, 'the output is the same account');
    assert.equal(Number(out.total_credits), 12.75, 'the output shows the raised credits');
    const row = await env.db('accounts').where({ id: accountId }).first();
    assert.equal(row.total_credits, '12.750000000000', 'total_credits raised exactly by 0.25');
    const grants = await env.db('ledger').where({ account_id: accountId, kind: 'grant' }).orderBy('id').select('amount');
    assert.deepEqual(grants.map((g) => Number(g.amount)), [12.5, 0.25], 'a second grant of the added credits');
  });

  it('key create returns the key once (gw_ai_ by default, rk_live_ on request); the database keeps only its sha256', async function () {
    assert.ok(accountId, 'needs the account of the first test');
    const [a, b] = await Promise.all([
      cli('key', 'create', '--account', accountId, '--label', 'ops key'),
      cli('key', 'create', '--account', accountId, '--label', 'legacy', '--format', 'rk_live'),
    ]);
    for (const [r, prefix, label, format] of [
      [a, 'gw_ai_', 'ops key', 'gw_ai'],
      [b, 'rk_live_', 'legacy', 'rk_live'],
    ] as const) {
      assert.equal(r.code, 0, r.stdout + r.stderr);
      const out = oneObject(r);
      assert.match(out.id, /^[0-9a-f-]{36}$/, 'the key id is a UUID');
      assert.equal(typeof out.key, 'string', 'the full key is printed once');
      assert.ok(out.key.startsWith(prefix), out.key);
      assert.ok(out.key.length > prefix.length + 30, 'a long random body');
      const row = await env.db('api_keys').where({ id: out.id }).first();
      assert.equal(row.account_id, accountId, 'the key belongs to the account');
      assert.equal(row.label, label, 'the key keeps its label');
      assert.equal(row.format, format, 'the key has the requested format');
      assert.equal(row.key_hash, sha256(out.key), 'the database keeps the sha256 of the key');
      assert.equal(row.key_prefix, out.key.slice(0, 12), 'the key prefix is its first 12 characters');
      assert.equal(row.revoked_at, null, 'a new key is not revoked');
      // No column of any key row holds the full key.
      const leaked = await env.db.raw(`SELECT count(*)::int AS n FROM api_keys k WHERE strpos(row_to_json(k)::text, ?) > 0`, [out.key]);
      assert.equal(leaked.rows[0].n, 0, 'no key row holds the full key');
    }
    assert.notEqual(a.json.key, b.json.key, 'each key is different');
  });

  it('key revoke sets revoked_at; account deactivate clears active', async function () {
    assert.ok(accountId, 'needs the account of the first test');
    const key = await env.db('api_keys').where({ account_id: accountId, label: 'ops key' }).first();
    assert.ok(key, 'needs the key of the previous test');
    const [rev, deact] = await Promise.all([cli('key', 'revoke', '--id', key.id), cli('account', 'deactivate', '--account', accountId)]);
    assert.equal(rev.code, 0, rev.stdout + rev.stderr);
    assert.equal(oneObject(rev).id, key.id, 'the revoked key is the one named');
    assert.ok(rev.json.revoked_at, 'revoked_at in the output');
    const after = await env.db('api_keys').where({ id: key.id }).first();
    assert.ok(after.revoked_at instanceof Date, 'revoked_at set');
    assert.equal(after.revoked_at.toISOString(), new Date(rev.json.revoked_at).toISOString(), 'the stored revoked_at is the printed one');
    const legacy = await env.db('api_keys').where({ account_id: accountId, label: 'legacy' }).first();
    assert.equal(legacy.revoked_at, null, 'only the named key is revoked');

    assert.equal(deact.code, 0, deact.stdout + deact.stderr);
    assert.deepEqual(oneObject(deact), { id: accountId, active: false }, 'deactivate prints the account as inactive');
    const acct = await env.db('accounts').where({ id: accountId }).first();
    assert.equal(acct.active, false, 'the account row is inactive');
  });

  describe('failures: non-zero exit and one JSON error object on stdout', function () {
    const badName = `cli-bad-${Date.now()}`;
    let runs: Record<string, Run>;
    let target: string;

    before(async function () {
      target = (await createAccount(env.db, { name: `cli-target-${Date.now()}`, tier: 'pro', credits: '1' })).id;
      const [unknown, noName, badTier, badCredits, badAdd, badFlag] = await Promise.all([
        cli('account', 'frobnicate'),
        cli('account', 'create', '--tier', 'pro'),
        cli('account', 'create', '--name', badName, '--tier', 'platinum'),
        cli('account', 'create', '--name', badName, '--credits', 'abc'),
        cli('credits', 'add', '--account', target, '--credits', 'abc'),
        cli('account', 'create', '--name', badName, '--bogus', '1'),
      ]);
      runs = { unknown, noName, badTier, badCredits, badAdd, badFlag };
    });

    function failure(r: Run, pattern: RegExp) {
      assert.notEqual(r.code, 0, `exit code: ${r.stdout}`);
      const out = oneObject(r);
      assert.deepEqual(Object.keys(out), ['error'], 'the output is only an error object');
      assert.equal(typeof out.error.message, 'string', 'the error has a message');
      assert.match(out.error.message, pattern, `the error message says what is wrong: ${out.error.message}`);
    }

    it('unknown command', function () {
      failure(runs.unknown, /unknown command 'account frobnicate'/);
      assert.match(runs.unknown.json.error.message, /account create/, 'lists the commands');
    });

    it('missing --name', function () {
      failure(runs.noName, /--name is required/);
    });

    it('bad --tier', function () {
      failure(runs.badTier, /tier/);
      assert.equal(runs.badTier.json.error.type, 'usage_error', 'a bad tier is a usage error');
    });

    it('bad --credits value', async function () {
      failure(runs.badCredits, /credits/);
      assert.equal(runs.badCredits.json.error.type, 'usage_error', 'a bad credits value is a usage error');
      // credits add with a bad amount changes nothing.
      failure(runs.badAdd, /decimal/);
      const acct = await env.db('accounts').where({ id: target }).first();
      assert.equal(Number(acct.total_credits), 1, 'the failed credits add left the credits unchanged');
      const grants = await env.db('ledger').where({ account_id: target, kind: 'grant' });
      assert.equal(grants.length, 1, 'the failed credits add wrote no grant');
      // Nothing was created by the failed invocations.
      const rows = await env.db('accounts').where({ name: badName });
      assert.equal(rows.length, 0, 'no account was created by the failed invocations');
    });

    it('unknown flag: exit 2, a usage error naming the flag and the known ones', function () {
      failure(runs.badFlag, /^unknown flag --bogus \(known: --name, --tier, --credits, --plan-expires-at\)$/);
      assert.equal(runs.badFlag.code, 2, 'usage errors exit 2 (admin help)');
      assert.equal(runs.badFlag.json.error.type, 'usage_error', runs.badFlag.stdout);
    });
  });
});
