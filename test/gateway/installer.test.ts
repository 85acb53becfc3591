import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Language, Parser, type Node } from 'web-tree-sitter';
import { backupsOf, runScript, snapshot } from '../helpers/installer';
import { newAccount, useStack, type TestAccount } from '../helpers/stack';

// Installer scripts of spec 1 section 1 item 8, downloaded from a real gateway and run with bash
// against a temporary HOME. PowerShell is not available here: the PowerShell scripts are checked
// for being served and for parsing with tree-sitter's PowerShell grammar, not run.

/** Syntax errors tree-sitter's PowerShell grammar finds in a script, as "line:col text". */
async function powershellSyntaxErrors(source: string): Promise<string[]> {
  await Parser.init();
  const parser = new Parser();
  parser.setLanguage(await Language.load(require.resolve('tree-sitter-powershell/tree-sitter-powershell.wasm')));
  const errors: string[] = [];
  const visit = (n: Node) => {
    if (n.isError || n.isMissing) errors.push(`${n.startPosition.row + 1}:${n.startPosition.column + 1} ${source.slice(n.startIndex, n.startIndex + 60)}`);
    else if (n.hasError) for (const c of n.children) if (c) visit(c);
  };
  visit(parser.parse(source)!.rootNode);
  return errors;
}

const SCRIPTS = ['install.sh', 'uninstall.sh', 'install.ps1', 'uninstall.ps1'];
const BAK = /\.bak-\d{8}-\d{6}$/;
const OTHER_KEY = 'sk-proj-abcdefghijklmnopqrstuvwxyz012345';

const ORIGINAL = {
  settings: JSON.stringify({ theme: 'dark', env: { FOO: '1' } }, null, 2) + '\n',
  codex: 'model = "o3"\n\n[profiles.fast]\nmodel = "o4-mini"\n',
  bashrc: "alias ll='ls -l'\n",
  zshrc: `export OPENAI_API_KEY=${OTHER_KEY}\n`,
};

const count = (text: string, needle: string) => text.split(needle).length - 1;

describe('installer scripts (spec 1 section 1 item 8)', function () {
  const stack = useStack();
  let base: string;
  let acct: TestAccount;
  let dir: string;
  const served: Record<string, { status: number; type: string | null; cache: string | null; text: string }> = {};

  before(async function () {
    base = stack.gateway.url;
    acct = await newAccount();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-installer-'));
    for (const name of SCRIPTS) {
      const res = await fetch(`${base}/${name}`);
      const text = await res.text();
      served[name] = { status: res.status, type: res.headers.get('content-type'), cache: res.headers.get('cache-control'), text };
      fs.writeFileSync(path.join(dir, name), text);
    }
  });

  after(async function () {
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  /** A fresh HOME with unrelated settings, the .zshrc holding another provider's key. */
  function newHome(): string {
    const home = fs.mkdtempSync(path.join(dir, 'home-'));
    fs.mkdirSync(path.join(home, '.claude'));
    fs.mkdirSync(path.join(home, '.codex'));
    fs.writeFileSync(path.join(home, '.claude', 'settings.json'), ORIGINAL.settings);
    fs.writeFileSync(path.join(home, '.codex', 'config.toml'), ORIGINAL.codex);
    fs.writeFileSync(path.join(home, '.bashrc'), ORIGINAL.bashrc);
    fs.writeFileSync(path.join(home, '.zshrc'), ORIGINAL.zshrc);
    return home;
  }

  const run = (script: string, args: string[], home: string, opts: { input?: string; env?: Record<string, string> } = {}) => runScript(dir, script, args, home, opts);

  const install = (home: string, extra: string[] = [], env?: Record<string, string>) =>
    run('install.sh', ['--key', acct.key, '--apps', 'claude,codex,shell', '--models', 'sim-gpt,sim-gpt-mini', '--yes', ...extra], home, { env });

  function assertInstalled(home: string, key = acct.key) {
    const settings = JSON.parse(fs.readFileSync(path.join(home, '.claude', 'settings.json'), 'utf8'));
    assert.deepEqual(settings, { theme: 'dark', env: { FOO: '1', ANTHROPIC_BASE_URL: base, ANTHROPIC_AUTH_TOKEN: key, ANTHROPIC_MODEL: 'sim-gpt' } }, `Claude settings keep the user's own and gain the gateway env: ${JSON.stringify(settings)}`);

    const codex = fs.readFileSync(path.join(home, '.codex', 'config.toml'), 'utf8');
    assert.equal(count(codex, '# >>> gateway >>>'), 2, codex);
    assert.equal(count(codex, '# <<< gateway <<<'), 2, codex);
    assert.equal(count(codex, '[model_providers.gateway]'), 1, codex);
    // Top-level keys come before the first table; the user's own model line is commented out.
    assert.match(codex, /^# >>> gateway >>>\n# [^\n]*\nmodel = "sim-gpt"\nmodel_provider = "gateway"\n# <<< gateway <<<\n# \[gateway\] model = "o3"\n/, `the gateway's top-level keys come before the first table, the user's model line commented out: ${codex}`);
    assert.ok(codex.includes('[profiles.fast]\nmodel = "o4-mini"\n'), codex);
    assert.ok(codex.includes(`[model_providers.gateway]\nname = "Gateway"\nbase_url = "${base}/v1"\nenv_key = "GATEWAY_API_KEY"\n`), codex);

    const bashrc = fs.readFileSync(path.join(home, '.bashrc'), 'utf8');
    assert.ok(bashrc.startsWith(ORIGINAL.bashrc), bashrc);
    assert.equal(count(bashrc, '# >>> gateway >>>'), 1, bashrc);
    assert.ok(bashrc.includes(`export GATEWAY_API_KEY="${key}"\n`), bashrc);
    assert.ok(bashrc.includes(`export OPENAI_BASE_URL="${base}/v1"\n`), bashrc);
    assert.ok(bashrc.includes('export OPENAI_API_KEY="$GATEWAY_API_KEY"\n'), bashrc);
    assert.ok(bashrc.trimEnd().endsWith('# <<< gateway <<<'), bashrc);

    // The user's own OPENAI_API_KEY stays in charge in .zshrc.
    const zshrc = fs.readFileSync(path.join(home, '.zshrc'), 'utf8');
    assert.ok(zshrc.startsWith(ORIGINAL.zshrc), zshrc);
    assert.equal(count(zshrc, '# >>> gateway >>>'), 1, zshrc);
    assert.ok(zshrc.includes(`export GATEWAY_API_KEY="${key}"\n`), zshrc);
    assert.equal(count(zshrc, 'OPENAI_API_KEY='), 1, zshrc);
    assert.ok(!zshrc.includes('OPENAI_BASE_URL'), 'OpenAI tools keep going to OpenAI with the user key');
  }

  it('serves the four scripts without authentication, with the base URL filled in', function () {
    for (const name of SCRIPTS) {
      const s = served[name];
      assert.equal(s.status, 200, name);
      assert.equal(s.type, 'text/plain; charset=utf-8', name);
      assert.equal(s.cache, 'no-cache', name);
      assert.ok(!s.text.includes('__GATEWAY_BASE_URL__'), `${name} still holds the placeholder`);
      // The functions shared per platform are spliced in: each served script stands alone.
      assert.ok(!s.text.includes('__GATEWAY_COMMON__'), `${name} still holds the common marker`);
      assert.ok(s.text.includes(name.endsWith('.ps1') ? 'function Get-Tilde(' : 'tilde() {'), `${name} lacks the shared functions`);
    }
    assert.ok(served['install.sh'].text.includes(`BASE_URL='${base}'\n`), `install.sh carries BASE_URL='${base}'`);
    assert.ok(served['uninstall.sh'].text.includes(`BASE_URL='${base}'\n`), `uninstall.sh carries BASE_URL='${base}'`);
    assert.ok(served['install.ps1'].text.includes(`$BaseUrl = '${base}'`), `install.ps1 carries $BaseUrl = '${base}'`);
    assert.ok(served['uninstall.ps1'].text.includes(`$BaseUrl = '${base}'`), `uninstall.ps1 carries $BaseUrl = '${base}'`);
    assert.ok(served['install.ps1'].text.includes('-DryRun') || served['install.ps1'].text.includes('[switch]$DryRun'), 'install.ps1 has a -DryRun switch');
  });

  it('rejects a Host header that could inject script text', async function () {
    const http = await import('node:http');
    const status = await new Promise<number | undefined>((resolve, reject) => {
      const req = http.request(`${base}/install.sh`, { headers: { host: "x'$(id)" } }, (res) => {
        res.resume();
        resolve(res.statusCode);
      });
      req.on('error', reject);
      req.end();
    });
    assert.equal(status, 400, 'a Host header with shell text is refused with 400');
  });

  it('the shell scripts parse (bash -n; shellcheck when installed)', function () {
    for (const name of ['install.sh', 'uninstall.sh']) {
      const r = spawnSync('bash', ['-n', path.join(dir, name)], { encoding: 'utf8' });
      assert.equal(r.status, 0, `${name}: ${r.stderr}`);
    }
    const which = spawnSync('sh', ['-c', 'command -v shellcheck'], { encoding: 'utf8' });
    if (which.status === 0) {
      const r = spawnSync('shellcheck', ['-S', 'warning', path.join(dir, 'install.sh'), path.join(dir, 'uninstall.sh')], { encoding: 'utf8' });
      assert.equal(r.status, 0, r.stdout + r.stderr);
    }
  });

  it('the PowerShell scripts parse (tree-sitter PowerShell grammar), which would catch a broken one', async function () {
    for (const name of ['install.ps1', 'uninstall.ps1']) assert.deepEqual(await powershellSyntaxErrors(served[name].text), [], name);
    const broken = served['install.ps1'].text.replace(/\}\s*$/, '').replace('function ', 'function (');
    assert.notDeepEqual(await powershellSyntaxErrors(broken), [], 'a broken script has syntax errors');
  });

  it('a wrong key stops with a non-zero exit and changes nothing', async function () {
    const home = newHome();
    const before = snapshot(home);
    const malformed = await run('install.sh', ['--key', 'sk-not-a-gateway-key', '--all', '--yes'], home);
    assert.notEqual(malformed.code, 0, 'a key not shaped like a gateway key stops the installer');
    assert.match(malformed.stderr, /not a gateway API key/, 'the installer says the key is not a gateway key');
    const unknown = await run('install.sh', ['--all', '--yes'], home, { input: `gw_ai_${'x'.repeat(43)}\n` });
    assert.notEqual(unknown.code, 0, 'a key the gateway does not know stops the installer');
    assert.match(unknown.stderr, /rejected the key \(HTTP 401\)/, 'the installer says the gateway rejected the key');
    assert.deepEqual(snapshot(home), before, 'a refused key changes nothing in HOME');
  });

  it('installs claude, codex and shell entries, keeps other content, backs up files without foreign keys; idempotent', async function () {
    const home = newHome();
    const r = await install(home);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assertInstalled(home);
    assert.match(r.stdout, /Summary:/, `the installer prints a summary: ${r.stdout}`);

    for (const [file, original] of [
      [path.join(home, '.claude', 'settings.json'), ORIGINAL.settings],
      [path.join(home, '.codex', 'config.toml'), ORIGINAL.codex],
      [path.join(home, '.bashrc'), ORIGINAL.bashrc],
    ]) {
      const baks = backupsOf(file);
      assert.equal(baks.length, 1, file);
      assert.match(baks[0], BAK, `the backup of ${file} is named .bak-date-time`);
      assert.equal(fs.readFileSync(baks[0], 'utf8'), original, `the backup of ${file} holds the original content`);
    }
    assert.deepEqual(backupsOf(path.join(home, '.zshrc')), [], 'a file with another provider\'s key is not copied');
    assert.match(r.stdout, /\.zshrc \(no backup: it holds API keys of other providers\)/, `the installer says why .zshrc has no backup: ${r.stdout}`);

    // The block works as shell code.
    const env = spawnSync('bash', ['-c', 'source ~/.bashrc; printf "%s|%s|%s" "$OPENAI_BASE_URL" "$OPENAI_API_KEY" "$GATEWAY_MODEL"'], { env: { HOME: home, PATH: process.env.PATH }, encoding: 'utf8' });
    assert.equal(env.stdout, `${base}/v1|${acct.key}|sim-gpt`, 'the bash block sets the base URL, the key and the model');

    // Same answers again: nothing is written, no new backup.
    const before = snapshot(home);
    const again = await install(home);
    assert.equal(again.code, 0, again.stdout + again.stderr);
    assert.deepEqual(snapshot(home), before, 'a second install with the same answers writes nothing');
    assert.match(again.stdout, /already configured/, `the second install says it is already configured: ${again.stdout}`);

    // A new key replaces the entries instead of adding a second set.
    const other = await newAccount();
    const third = await run('install.sh', ['--key', other.key, '--all', '--models', 'sim-gpt', '--yes'], home);
    assert.equal(third.code, 0, third.stdout + third.stderr);
    assertInstalled(home, other.key);
  });

  it('asks for key, applications and models on stdin (numbers allowed, first is the default); node edits JSON when chosen', async function () {
    const home = newHome();
    const r = await run('install.sh', [], home, { input: `${acct.key}\nclaude\nsim-gpt-mini,1\n\n`, env: { GATEWAY_JSON_TOOL: 'node' } });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /Gateway API key/, `the installer asks for the key: ${r.stdout}`);
    assert.match(r.stdout, /Models this key may call:/, `the installer lists the key's models: ${r.stdout}`);
    const settings = JSON.parse(fs.readFileSync(path.join(home, '.claude', 'settings.json'), 'utf8'));
    assert.equal(settings.env.ANTHROPIC_MODEL, 'sim-gpt-mini', "the model answered on stdin is Claude's model");
    assert.equal(settings.env.ANTHROPIC_AUTH_TOKEN, acct.key, "the key answered on stdin is Claude's token");
    assert.equal(fs.readFileSync(path.join(home, '.codex', 'config.toml'), 'utf8'), ORIGINAL.codex, 'codex was not chosen');
  });

  it('skips Claude Code with a clear message when neither python3 nor node can edit JSON', async function () {
    const home = newHome();
    const r = await install(home, [], { GATEWAY_JSON_TOOL: 'none' });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /\[skipped\]\s+claude\s+neither python3 nor node/, `the installer says why Claude is skipped: ${r.stdout}`);
    assert.equal(fs.readFileSync(path.join(home, '.claude', 'settings.json'), 'utf8'), ORIGINAL.settings, 'Claude settings are left as they were');
    assert.match(fs.readFileSync(path.join(home, '.codex', 'config.toml'), 'utf8'), /\[model_providers\.gateway\]/, 'codex is still configured');
  });

  it('--all --dry-run prints the plan and writes nothing (install and uninstall)', async function () {
    const home = newHome();
    const before = snapshot(home);
    const r = await run('install.sh', ['--all', '--dry-run'], home, { input: `${acct.key}\n2,1\n` });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.deepEqual(snapshot(home), before, 'a dry run writes nothing');
    assert.match(r.stdout, /\[would change\]\s+claude\s+~\/\.claude\/settings\.json/, `the dry run plans to change Claude settings: ${r.stdout}`);
    assert.match(r.stdout, /\[would change\]\s+codex\s+~\/\.codex\/config\.toml/, `the dry run plans to change the codex config: ${r.stdout}`);
    assert.match(r.stdout, /\[would change\]\s+shell\s+~\/\.bashrc/, `the dry run plans to change .bashrc: ${r.stdout}`);
    const second = /^ {2}2\) (\S+)$/m.exec(r.stdout)?.[1];
    assert.ok(second, r.stdout);
    assert.ok(r.stdout.includes(`env.ANTHROPIC_MODEL = ${second}\n`), 'model 2 was chosen first, so it is the default');
    assert.ok(!r.stdout.includes(acct.key), 'the key is masked in the plan');

    assert.equal((await install(home)).code, 0, 'the install before the uninstall dry run succeeds');
    const installed = snapshot(home);
    const u = await run('uninstall.sh', ['--all', '--dry-run'], home, { input: 'reset\n' });
    assert.equal(u.code, 0, u.stdout + u.stderr);
    assert.deepEqual(snapshot(home), installed, 'an uninstall dry run writes nothing');
    assert.match(u.stdout, /\[would change\]\s+claude\s+~\/\.claude\/settings\.json: remove the gateway entries/, `the uninstall dry run plans to remove Claude's gateway entries: ${u.stdout}`);
    assert.match(u.stdout, /\[would change\]\s+codex\s+delete ~\/\.codex\/config\.toml\.bak-\d{8}-\d{6}/, `the uninstall dry run plans to delete codex backups: ${u.stdout}`);
  });

  it('uninstall entries removes exactly the gateway entries and keeps every backup', async function () {
    const home = newHome();
    assert.equal((await install(home)).code, 0, 'the install succeeds');
    const files = [path.join(home, '.claude', 'settings.json'), path.join(home, '.codex', 'config.toml'), path.join(home, '.bashrc')];
    const installBackups = files.flatMap(backupsOf);
    assert.equal(installBackups.length, 3, 'the install backs up three files');

    const r = await run('uninstall.sh', ['--level', 'entries', '--all', '--yes'], home);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.deepEqual(JSON.parse(fs.readFileSync(files[0], 'utf8')), JSON.parse(ORIGINAL.settings), 'Claude settings are back to the original');
    assert.equal(fs.readFileSync(files[1], 'utf8'), ORIGINAL.codex, 'the codex config is back to the original');
    assert.equal(fs.readFileSync(files[2], 'utf8'), ORIGINAL.bashrc, '.bashrc is back to the original');
    assert.equal(fs.readFileSync(path.join(home, '.zshrc'), 'utf8'), ORIGINAL.zshrc, '.zshrc is back to the original');
    for (const b of installBackups) assert.ok(fs.existsSync(b), `${b} kept`);
    // Each file was copied again before the uninstaller wrote it; .zshrc never.
    for (const f of files) assert.equal(backupsOf(f).length, 2, f);
    assert.deepEqual(backupsOf(path.join(home, '.zshrc')), [], '.zshrc, holding another key, is never backed up');

    // Nothing left to remove: a second run changes nothing.
    const before = snapshot(home);
    const again = await run('uninstall.sh', ['--level', 'entries', '--all', '--yes'], home);
    assert.equal(again.code, 0, again.stdout + again.stderr);
    assert.deepEqual(snapshot(home), before, 'a second uninstall changes nothing');
  });

  it('uninstall reset also deletes the old .bak-* files', async function () {
    const home = newHome();
    assert.equal((await install(home)).code, 0, 'the install succeeds');
    const files = [path.join(home, '.claude', 'settings.json'), path.join(home, '.codex', 'config.toml'), path.join(home, '.bashrc')];
    const old = files.flatMap(backupsOf);
    assert.equal(old.length, 3, 'the install backs up three files');

    const r = await run('uninstall.sh', ['--all', '--yes'], home, { input: '2\n' });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    for (const b of old) assert.ok(!fs.existsSync(b), `${b} deleted`);
    assert.equal(fs.readFileSync(files[1], 'utf8'), ORIGINAL.codex, 'the codex config is back to the original after the reset');
    assert.equal(fs.readFileSync(files[2], 'utf8'), ORIGINAL.bashrc, '.bashrc is back to the original after the reset');
    // The copy taken right before the reset wrote each file held the gateway key: deleted too.
    for (const f of files) assert.deepEqual(backupsOf(f), [], f);
    assert.match(r.stdout, /deleted ~\/\.bashrc\.bak-\d{8}-\d{6} \(it held the gateway key\)/, `the reset says it deleted the .bashrc backup holding the gateway key: ${r.stdout}`);
    for (const f of files) assert.ok(!fs.readFileSync(f, 'utf8').includes(acct.key), f);
  });

  it('backups are readable by their owner only (0600), whatever the mode of the file', async function () {
    const home = newHome();
    for (const f of ['.bashrc', '.codex/config.toml']) fs.chmodSync(path.join(home, f), 0o644);
    assert.equal((await install(home)).code, 0, 'the install succeeds');
    const r = await run('uninstall.sh', ['--level', 'entries', '--all', '--yes'], home);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const baks = [path.join(home, '.bashrc'), path.join(home, '.codex', 'config.toml')].flatMap(backupsOf);
    assert.equal(baks.length, 4, 'install and uninstall each back up both files');
    for (const b of baks) assert.equal(fs.statSync(b).mode & 0o777, 0o600, b);
  });

  it('--all --dry-run needs no key: without a terminal or input it shows the plan with placeholders', async function () {
    const home = newHome();
    const before = snapshot(home);
    const r = await run('install.sh', ['--all', '--dry-run'], home);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.deepEqual(snapshot(home), before, 'a dry run without a key writes nothing');
    assert.match(r.stdout, /\[skipped\]\s+key\s+dry run without a key: <API_KEY> stands for it/, `the dry run says <API_KEY> stands for the missing key: ${r.stdout}`);
    assert.match(r.stdout, /\[would change\]\s+claude\s+~\/\.claude\/settings\.json/, `the dry run plans to change Claude settings: ${r.stdout}`);
    assert.ok(r.stdout.includes('env.ANTHROPIC_MODEL = <model_id>\n'), r.stdout);
    const named = await run('install.sh', ['--all', '--dry-run', '--models', 'sim-gpt'], home);
    assert.equal(named.code, 0, named.stdout + named.stderr);
    assert.ok(named.stdout.includes('env.ANTHROPIC_MODEL = sim-gpt\n'), named.stdout);
  });
});
