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
    assert.match(out.id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    assert.equal(out.name, name);
    assert.equal(out.tier, 'starter');
    accountId = out.id;
    const row = await env.db('accounts').where({ id: accountId }).first();
    assert.equal(row.name, name);
    assert.equal(row.tier, 'starter');
    assert.equal(Number(row.total_credits), 12.5);
    assert.equal(Number(row.total_usage), 0);
    assert.equal(row.active, true);
    const grants = await env.db('ledger').where({ account_id: accountId, kind: 'grant' }).select('amount');
    assert.deepEqual(grants.map((g) => Number(g.amount)), [12.5]);
  });

  it('credits add raises total_credits and writes a grant to the ledger', async function () {
    assert.ok(accountId, 'needs the account of the previous test');
    const r = await cli('credits', 'add', '--account', accountId, '--credits', '0.25');
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const out = oneObject(r);
    assert.equal(out.id, accountId);
    assert.equal(Number(out.total_credits), 12.75);
    const row = await env.db('accounts').where({ id: accountId }).first();
    assert.equal(row.total_credits, '12.750000000000');
    const grants = await env.db('ledger').where({ account_id: accountId, kind: 'grant' }).orderBy('id').select('amount');
    assert.deepEqual(grants.map((g) => Number(g.amount)), [12.5, 0.25]);
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
      assert.match(out.id, /^[0-9a-f-]{36}$/);
      assert.equal(typeof out.key, 'string');
      assert.ok(out.key.startsWith(prefix), out.key);
      assert.ok(out.key.length > prefix.length + 30, 'a long random body');
      const row = await env.db('api_keys').where({ id: out.id }).first();
      assert.equal(row.account_id, accountId);
      assert.equal(row.label, label);
      assert.equal(row.format, format);
      assert.equal(row.key_hash, sha256(out.key));
      assert.equal(row.key_prefix, out.key.slice(0, 12));
      assert.equal(row.revoked_at, null);
      // No column of any key row holds the full key.
      const leaked = await env.db.raw(`SELECT count(*)::int AS n FROM api_keys k WHERE strpos(row_to_json(k)::text, ?) > 0`, [out.key]);
      assert.equal(leaked.rows[0].n, 0);
    }
    assert.notEqual(a.json.key, b.json.key);
  });

  it('key revoke sets revoked_at; account deactivate clears active', async function () {
    assert.ok(accountId, 'needs the account of the first test');
    const key = await env.db('api_keys').where({ account_id: accountId, label: 'ops key' }).first();
    assert.ok(key, 'needs the key of the previous test');
    const [rev, deact] = await Promise.all([cli('key', 'revoke', '--id', key.id), cli('account', 'deactivate', '--account', accountId)]);
    assert.equal(rev.code, 0, rev.stdout + rev.stderr);
    assert.equal(oneObject(rev).id, key.id);
    assert.ok(rev.json.revoked_at, 'revoked_at in the output');
    const after = await env.db('api_keys').where({ id: key.id }).first();
    assert.ok(after.revoked_at instanceof Date, 'revoked_at set');
    assert.equal(after.revoked_at.toISOString(), new Date(rev.json.revoked_at).toISOString());
    const legacy = await env.db('api_keys').where({ account_id: accountId, label: 'legacy' }).first();
    assert.equal(legacy.revoked_at, null, 'only the named key is revoked');

    assert.equal(deact.code, 0, deact.stdout + deact.stderr);
    assert.deepEqual(oneObject(deact), { id: accountId, active: false });
    const acct = await env.db('accounts').where({ id: accountId }).first();
    assert.equal(acct.active, false);
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
      assert.deepEqual(Object.keys(out), ['error']);
      assert.equal(typeof out.error.message, 'string');
      assert.match(out.error.message, pattern);
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
      assert.equal(runs.badTier.json.error.type, 'usage_error');
    });

    it('bad --credits value', async function () {
      failure(runs.badCredits, /credits/);
      assert.equal(runs.badCredits.json.error.type, 'usage_error');
      // credits add with a bad amount changes nothing.
      failure(runs.badAdd, /decimal/);
      const acct = await env.db('accounts').where({ id: target }).first();
      assert.equal(Number(acct.total_credits), 1);
      const grants = await env.db('ledger').where({ account_id: target, kind: 'grant' });
      assert.equal(grants.length, 1);
      // Nothing was created by the failed invocations.
      const rows = await env.db('accounts').where({ name: badName });
      assert.equal(rows.length, 0);
    });

    it('unknown flag: exit 2, a usage error naming the flag and the known ones', function () {
      failure(runs.badFlag, /^unknown flag --bogus \(known: --name, --tier, --credits, --plan-expires-at\)$/);
      assert.equal(runs.badFlag.code, 2, 'usage errors exit 2 (admin help)');
      assert.equal(runs.badFlag.json.error.type, 'usage_error', runs.badFlag.stdout);
    });
  });
});
